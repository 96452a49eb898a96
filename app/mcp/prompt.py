"""The system prompt's MCP sections: `<mcp-resources>` (first 50) and `<mcp-prompts>` (first 30)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.engine.conversation.prompt_context import PromptContext
    from app.mcp.catalog import MCPToolSource

MAX_RESOURCES = 50
MAX_PROMPTS = 30
MAX_LINE_CHARS = 300  # a server's description is its text, not ours: one short line each
_SPACE = re.compile(r"\s+")


def sections(source: MCPToolSource) -> list[Callable[[PromptContext], str | None]]:
    def mcp_resources(ctx: PromptContext) -> str | None:
        resources = source.offer().resources
        if not resources or ctx.tools.tool("read_resource") is None:
            return None
        lines = [_line(r["uri"], r["description"] or r["name"]) for r in resources[:MAX_RESOURCES]]
        return (
            "<mcp-resources>\n" + "\n".join(lines) + "\n</mcp-resources>\n"
            "Use read_resource(uri='...') to access the resources listed above."
        )

    def mcp_prompts(ctx: PromptContext) -> str | None:
        prompts = source.offer().prompts
        if not prompts or ctx.tools.tool("use_prompt") is None:
            return None
        lines = [_line(_signature(p), p["description"]) for p in prompts[:MAX_PROMPTS]]
        return (
            "<mcp-prompts>\n" + "\n".join(lines) + "\n</mcp-prompts>\n"
            "Use use_prompt(name='...', arguments={...}) to expand the prompts listed above "
            "(argument values are strings; '?' marks an optional one)."
        )

    return [mcp_resources, mcp_prompts]


def _signature(prompt: dict) -> str:
    args = ", ".join(a["name"] + ("" if a["required"] else "?") for a in prompt["arguments"])
    return f"{prompt['name']}({args})"


def _line(key: str, description: str) -> str:
    text = f"{_clean(key)}  {_clean(description)}".strip()
    return "  " + (text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 3] + "...")


def _clean(text: str) -> str:
    # One line each, and no text of a server's that could close our block early.
    return _SPACE.sub(" ", text.replace("<", "‹").replace(">", "›")).strip()
