"""MCP prompts kept in the skills table (`prompt_templates`): origin `mcp`, read-only, in step
with what each connected server offers. A person's skill of the same name wins.

Every worker runs the same sync after a change; each write is conditional on what it
found, so two workers syncing at once leave one row per prompt."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from app.storage.database import Database
from app.storage.models import PromptTemplate, utcnow
from app.storage.types import UNSTORABLE

log = logging.getLogger(__name__)

ORIGIN_MCP = "mcp"
MAX_NAME_CHARS: int = PromptTemplate.__table__.c.name.type.length  # type: ignore[attr-defined]


def sync(db: Database, prompts: Iterable[dict[str, Any]], connected: set[str], configured: set[str]) -> None:
    """Make the `mcp` rows match `prompts` for the `connected` servers; drop the rows of servers
    no longer `configured`. A disconnected server's rows stay until it says otherwise."""
    offered = {p["name"]: p for p in prompts if p["server"] in connected and _is_storable(p)}
    try:
        with db.session() as s:
            rows = {r.name: r for r in s.exec(select(PromptTemplate)).all()}
            for name, prompt in offered.items():
                _upsert(s, rows.get(name), prompt)
            gone = [
                r.id
                for r in rows.values()
                if r.origin == ORIGIN_MCP
                and (r.mcp_server not in configured or (r.mcp_server in connected and r.name not in offered))
            ]
            if gone:
                s.exec(delete(PromptTemplate).where(col(PromptTemplate.id).in_(gone)))
    except IntegrityError:  # another worker inserted the same prompt first: its row stands
        log.info("MCP prompt sync raced another worker; the next change syncs again")


def _is_storable(prompt: dict[str, Any]) -> bool:
    """Whether the prompt's name fits a skill's name; one that does not is skipped, not the sync
    (one transaction for every server: PostgreSQL would refuse it whole, on every try)."""
    name = prompt["name"]
    if len(name) > MAX_NAME_CHARS:
        why = f"its name is {len(name)} characters, a skill's at most {MAX_NAME_CHARS}"
    elif UNSTORABLE.search(name):
        why = "its name has a character the database cannot store (NUL, a lone surrogate)"
    else:
        return True
    log.warning("MCP prompt %.120r of server %s is not synced as a skill: %s", name, prompt["server"], why)
    return False


def _upsert(s: Any, row: PromptTemplate | None, prompt: dict[str, Any]) -> None:
    if row is not None and row.origin != ORIGIN_MCP:
        log.warning("MCP prompt %s is not synced: a skill of that name exists", prompt["name"])
        return
    content = _content(prompt)
    if row is not None and row.content == content and row.description == prompt["description"]:
        return
    row = row or PromptTemplate(name=prompt["name"])
    row.description = prompt["description"]
    row.content = content
    row.tags = ["mcp", prompt["server"]]
    row.category = "mcp"
    row.activation = "manual"
    row.origin = ORIGIN_MCP
    row.mcp_server = prompt["server"]
    row.readonly = True
    row.updated_at = utcnow()
    s.add(row)


def _content(prompt: dict[str, Any]) -> str:
    args = ", ".join(a["name"] + ("" if a["required"] else "?") for a in prompt["arguments"]) or "none"
    return (
        f"MCP prompt {prompt['prompt']!r} of server {prompt['server']!r} (arguments: {args}). "
        f"Expand it with use_prompt(name={prompt['name']!r})."
    )
