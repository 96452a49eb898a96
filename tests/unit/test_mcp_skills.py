"""MCP prompts synced into the skills table: created, updated, removed; a person's skill wins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlmodel import select

from app.mcp.skills import sync
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import PromptTemplate


def prompt(server: str, name: str, description: str = "d") -> dict[str, Any]:
    return {
        "name": f"mcp__{server}__{name}",
        "prompt": name,
        "server": server,
        "description": description,
        "arguments": [{"name": "code", "required": True, "description": ""}],
    }


def rows(db: Database) -> dict[str, PromptTemplate]:
    with db.reader() as s:
        return {r.name: r for r in s.exec(select(PromptTemplate)).all()}


def test_prompts_become_read_only_skills_and_follow_their_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    db = Database(url)
    with db.session() as s:
        s.add(PromptTemplate(name="mcp__a__mine", content="a person's", origin="manual"))
    offered = [prompt("a", "review"), prompt("a", "mine"), prompt("b", "plan")]
    sync(db, offered, connected={"a", "b"}, configured={"a", "b"})
    now = rows(db)
    assert now["mcp__a__review"].origin == "mcp" and now["mcp__a__review"].readonly
    assert now["mcp__a__review"].mcp_server == "a" and "use_prompt" in now["mcp__a__review"].content
    assert now["mcp__a__mine"].origin == "manual" and now["mcp__a__mine"].content == "a person's"
    sync(
        db,
        [prompt("a", "review", "new words"), prompt("b", "plan")],
        connected={"a", "b"},
        configured={"a", "b"},
    )
    assert rows(db)["mcp__a__review"].description == "new words"
    sync(db, [prompt("b", "plan")], connected={"b"}, configured={"a", "b"})  # a is down: kept
    assert "mcp__a__review" in rows(db)
    sync(db, [prompt("b", "plan")], connected={"a", "b"}, configured={"a", "b"})  # a stopped offering it
    assert "mcp__a__review" not in rows(db) and "mcp__a__mine" in rows(db)
    sync(db, [], connected=set(), configured=set())  # b removed from the configuration
    assert set(rows(db)) == {"mcp__a__mine"}
    db.dispose()
