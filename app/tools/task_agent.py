"""The task_agent tool: a self-contained task handed to a sub-agent, whose final answer is
the call's result. The call ends `waiting`; the sub-agent's end finishes it (app/engine/subagents/fanin.py).
A sub-agent has at most `[tools] agent_max_turns` model steps with tools, then one without.
"""

from __future__ import annotations

from typing import Any

from app.settings import ModelSettings, Settings
from app.storage.models import Workstream
from app.tools.core import toolset as toolsets
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.tool import TASK

TOOL = "task_agent"
MAX_PROMPT_CHARS = 100_000  # a task description, not a document: files are for the helper to read
HEADER_CHARS = 120
LAST_STEP_NOTICE = (
    "You have used all {n} of your steps with tools. Do not call any tool now: reply with "
    "your final answer, saying what you did, what you found, and what is left undone."
)
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


# -- the last step of a bounded sub-agent ------------------------------------------------------


def last_step_notice(settings: Settings, ws: Workstream, step: int) -> str | None:
    """At `tools.agent_max_turns` model steps a child gets one more, with no tools and this
    instruction; None for any other step (and for every step when there is no limit)."""
    limit = settings.tools.agent_max_turns
    if ws.kind != TASK or limit <= 0 or step < limit:
        return None
    return LAST_STEP_NOTICE.format(n=limit)


def last_step_tools(tools: toolsets.ToolSet, model: ModelSettings) -> toolsets.ToolSet:
    """No tools for the last step; but the Anthropic API refuses a conversation holding tool
    calls without tool definitions, so there they stay listed (and any call is dropped)."""
    return tools if model.provider == "anthropic" else toolsets.ToolSet(tools.kind)
