"""MCP prompts synced into the skills table on SQLite and PostgreSQL: a prompt whose name the
table cannot hold is skipped with a warning, and every other prompt, of every server, syncs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from app.mcp.skills import MAX_NAME_CHARS, sync
from app.storage.database import Database
from app.storage.models import PromptTemplate
from tests.integration.storage import migrated

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    yield from migrated(request.param, tmp_path)


def prompt(server: str, name: str, description: str = "d") -> dict[str, Any]:
    return {
        "name": f"mcp__{server}__{name}",
        "prompt": name,
        "server": server,
        "description": description,
        "arguments": [],
    }


def rows(db: Database) -> dict[str, PromptTemplate]:
    with db.reader() as s:
        return {r.name: r for r in s.exec(select(PromptTemplate)).all()}


def test_a_name_the_table_cannot_hold_skips_that_prompt_only(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    fits = "f" * (MAX_NAME_CHARS - len("mcp__b__"))
    offered = [
        prompt("a", "review"),
        prompt("b", fits + "x"),  # one character too long for prompt_templates.name
        prompt("b", "with\x00nul"),
        prompt("b", "lone\ud800surrogate"),
        prompt("b", fits),
        prompt("b", "odd", description="NUL \x00, lone \udfff, " + "long " * 20_000),
    ]
    sync(db, offered, connected={"a", "b"}, configured={"a", "b"})
    stored = rows(db)
    assert set(stored) == {"mcp__a__review", f"mcp__b__{fits}", "mcp__b__odd"}
    assert stored["mcp__b__odd"].description.startswith("NUL \\x00, lone \ufffd, long long")
    skipped = [m for m in caplog.messages if "is not synced as a skill" in m]
    assert len(skipped) == 3 and f"its name is {MAX_NAME_CHARS + 1} characters" in skipped[0]
    assert "NUL, a lone surrogate" in skipped[1] and "NUL, a lone surrogate" in skipped[2]
    sync(db, [prompt("a", "review"), prompt("b", "x" * 500)], connected={"a", "b"}, configured={"a", "b"})
    assert set(rows(db)) == {"mcp__a__review"}  # b's other prompts went; its long one never came
