"""use_prompt: expand an MCP server's prompt into `[role]: content` blocks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.mcp.handler import run_request
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from app.mcp.manager import MCPManager

MAX_ARGUMENTS = 100


class Handler:
    def __init__(self, manager: MCPManager, prompts: Any) -> None:
        self.manager = manager
        self.prompts = prompts  # () -> {full name: {server, prompt, arguments, ...}}

    def prepare(self, args: dict[str, Any], ctx: ToolContext) -> Preparation:
        name = args.get("name")
        given = {} if args.get("arguments") is None else args["arguments"]  # null: no arguments
        if not isinstance(name, str) or not name:
            return Preparation(
                args, "use_prompt", error="Error: use_prompt needs 'name', such as mcp__server__prompt"
            )
        prompt = self.prompts().get(name)
        if prompt is None:
            known = ", ".join(sorted(self.prompts())[:30]) or "none"
            return Preparation(
                args, f"use_prompt {name[:100]}", error=f"Error: no prompt {name[:100]!r}; prompts: {known}"
            )
        if problem := _argument_problem(given, prompt):
            return Preparation(args, f"use_prompt {name}", error=f"Error: use_prompt {name}: {problem}")
        shown = "\n".join(f"{k}: {v[:500]}" for k, v in given.items())
        return Preparation(
            {"name": name, "arguments": dict(given)},
            header=f"MCP {prompt['server']}: prompt {prompt['prompt']}",
            preview=shown,
            needs_approval=True,
        )

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        prompt = self.prompts().get(args["name"])
        if prompt is None:
            return ToolOutcome(f"Error: prompt {args['name']!r} is no longer offered", is_error=True)
        from app.mcp.results import prompt_output

        timeout = float(ctx.settings.mcp_call_timeout)
        server, name, given = prompt["server"], prompt["prompt"], args.get("arguments") or {}

        def expand() -> tuple[str, bool]:
            return prompt_output(
                self.manager.get_prompt(server, name, given, timeout, ctx.is_cancelled)
            ), False

        return run_request(server, f"prompt {name}", expand)


def _argument_problem(given: Any, prompt: dict[str, Any]) -> str | None:
    if not isinstance(given, dict) or len(given) > MAX_ARGUMENTS:
        return "'arguments' must be an object of strings"
    bad = sorted(k for k, v in given.items() if not isinstance(v, str))
    if bad:
        return f"argument(s) {', '.join(map(repr, bad))} must be strings"
    missing = [a["name"] for a in prompt["arguments"] if a["required"] and a["name"] not in given]
    return f"missing required argument(s): {', '.join(missing)}" if missing else None
