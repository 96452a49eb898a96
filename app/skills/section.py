"""The system prompt's active skill: the workstream's chosen skill, as rendered when chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.engine.conversation.prompt_context import PromptContext


def section(ctx: PromptContext) -> str | None:
    ws = ctx.workstream
    if not ws.skill or not ws.skill_content:
        return None
    return f'<skill name="{ws.skill}">\n{ws.skill_content.strip()}\n</skill>'
