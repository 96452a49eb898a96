"""The system prompt, built for each model step from small sections.

A section is a function of the step's `PromptContext` that returns its text, or
None to stay out. Capabilities add a section (skills, memories, MCP catalogs,
watches) to `SECTIONS`, or a runtime adds its own; nobody edits one constant.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.conversation.prompt_context import PromptContext, Section
from app.memory import relevance
from app.skills import section as skill_section
from app.tools.core.tool_search_plan import CLIENT


def identity(ctx: PromptContext) -> str:
    return (
        "You are an agent working in a workstream of turnstone-jobs. You have tools; "
        "use them when they help, and answer plainly when they do not."
    )


def working_directory(ctx: PromptContext) -> str:
    return f"Your working directory is {ctx.workstream.working_dir}."


def hidden_tools(ctx: PromptContext) -> str | None:
    if not ctx.tools.deferred:
        return None
    count = len(ctx.tools.deferred)
    how = "call tool_search with a few words saying" if ctx.tools.tier == CLIENT else "search for them by"
    return (
        f"{count} more tool{'s are' if count > 1 else ' is'} available but not listed; "
        f"{how} what they do when the listed tools are not enough."
    )


def sub_agent(ctx: PromptContext) -> str | None:
    if ctx.workstream.kind != "task":
        return None
    return (
        "You are a sub-agent: another agent handed you the task in the user message. Nobody "
        "will answer questions, so work on your own until the task is done. Your final reply "
        "is all the other agent gets back: make it a complete, self-contained answer."
    )


SECTIONS: tuple[Section, ...] = (
    identity,
    working_directory,
    hidden_tools,
    sub_agent,
    skill_section.section,
    relevance.section,
)


def build(ctx: PromptContext, sections: Sequence[Section] = SECTIONS) -> str:
    """The sections' texts in order, blank-line separated; empty ones left out."""
    parts = (section(ctx) for section in sections)
    return "\n\n".join(p.strip() for p in parts if p and p.strip())
