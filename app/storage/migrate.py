"""Applies the Alembic migrations (`turnstone-jobs migrate`, run by the web start-up line)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "head")


def make_revision(database_url: str, message: str) -> None:
    """For developers: autogenerate a migration from the models' changes."""
    command.revision(alembic_config(database_url), message=message, autogenerate=True)
