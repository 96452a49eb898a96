"""What the users modules need of a process: its database and its settings. A Runtime has both;
the CLI's user and token commands make a Store alone, without Celery, Redis or the tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from app.settings import Settings
from app.storage.database import Database


class Store(Protocol):
    db: Database
    settings: Settings


@dataclass
class DatabaseStore:
    db: Database
    settings: Settings

    @classmethod
    def create(cls, settings: Settings) -> DatabaseStore:
        return cls(db=Database(settings.database_url), settings=settings)

    def close(self) -> None:
        self.db.dispose()
