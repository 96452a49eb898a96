"""The task_agent tool: a self-contained task handed to a sub-agent, whose final answer is
the call's result. The call ends `waiting`; the sub-agent's end finishes it (app/engine/fanin.py).
"""

from __future__ import annotations

from typing import Any

from app.tools.base import Preparation, ToolContext, ToolOutcome

TOOL = "task_agent"
MAX_PROMPT_CHARS = 100_000  # a task description, not a document: files are for the helper to read
HEADER_CHARS = 120
NOT_HERE = "Error: task_agent cannot start a sub-agent here (no service is running this call)"


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return _refused(args, "Error: task_agent needs 'prompt', a non-empty string: the whole task")
    if len(prompt) > MAX_PROMPT_CHARS:
        return _refused(
            {"prompt": prompt[:HEADER_CHARS]},
            f"Error: the prompt is {len(prompt):,} characters; at most {MAX_PROMPT_CHARS:,}. "
            "Put long material in a file and tell the sub-agent where it is.",
        )
    first = prompt.strip().splitlines()[0]
    header = f"{TOOL} {first[:HEADER_CHARS]}{'…' if len(first) > HEADER_CHARS else ''}"
    return Preparation({"prompt": prompt}, header, preview=prompt, needs_approval=True)


def _refused(args: dict[str, Any], error: str) -> Preparation:
    return Preparation(dict(args), TOOL, needs_approval=False, error=error)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.start_task is None:
        return ToolOutcome(NOT_HERE, is_error=True)
    child_ws_id = ctx.start_task(args["prompt"])
    return ToolOutcome("", waiting_on=f"sub-agent {child_ws_id}")
