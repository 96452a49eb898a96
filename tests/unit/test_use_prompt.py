"""use_prompt's checks before anyone is asked: what a model gets for the arguments it sends."""

from __future__ import annotations

from typing import Any

import pytest

from app.mcp.manager import MCPManager
from app.tools import use_prompt
from app.tools.core.base import ToolContext

PROMPTS = {
    "mcp__s__plan": {"server": "s", "prompt": "plan", "arguments": []},
    "mcp__s__review": {
        "server": "s",
        "prompt": "review",
        "arguments": [{"name": "code", "required": True, "description": ""}],
    },
}
HANDLER = use_prompt.Handler(MCPManager({}), lambda: PROMPTS)
CTX = ToolContext(ws_id="ws", working_dir="/tmp")


@pytest.mark.parametrize("args", [{"name": "mcp__s__plan"}, {"name": "mcp__s__plan", "arguments": None}])
def test_no_arguments_and_null_arguments_are_the_same(args: dict[str, Any]) -> None:
    prep = HANDLER.prepare(args, CTX)
    assert prep.error is None and prep.needs_approval
    assert prep.args == {"name": "mcp__s__plan", "arguments": {}}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (None, "missing required argument(s): code"),
        ("code=1", "'arguments' must be an object of strings"),
        ([["code", "1"]], "'arguments' must be an object of strings"),
        ({"code": 1}, "argument(s) 'code' must be strings"),
        ({"code": "x\x00\ud800"}, None),  # odd characters are the server's business
    ],
)
def test_arguments_are_checked_before_approval(arguments: Any, problem: str | None) -> None:
    prep = HANDLER.prepare({"name": "mcp__s__review", "arguments": arguments}, CTX)
    assert prep.error == (f"Error: use_prompt mcp__s__review: {problem}" if problem else None)
