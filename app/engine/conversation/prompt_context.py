"""What a system prompt section may look at, apart from the sections themselves.

Sections live with what they show (memories, skills, MCP catalogs) and the prompt imports
them; they import this, not the prompt, so no import goes round in a circle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.settings import Settings
from app.storage.database import Database
from app.storage.models import Workstream
from app.tools.core.toolset import ToolSet


@dataclass(frozen=True)
class PromptContext:
    """What a section may look at: the workstream as the step loaded it, its tools, the settings."""

    workstream: Workstream
    tools: ToolSet
    settings: Settings
    db: Database | None = None  # for sections that read storage (memories)
    message: str | None = None  # the user's message that opened the turn


Section = Callable[[PromptContext], str | None]
