"""The system prompt, built for each model step from small sections.

A section is a function of the step's `PromptContext` that returns its text, or
None to stay out. Capabilities add a section (skills, memories, MCP catalogs,
watches) to `SECTIONS`, or a runtime adds its own; nobody edits one constant.

`SECTIONS` change seldom (a skill loaded, a tool found) and make the system prompt, the start
of every request; what may change from one step to the next (the memories relevant to the
turn's message, changed by the memory tool) is in `TURN_SECTIONS`, sent after the conversation
(`turn_context`), so that each request starts as the one before it did and the provider's prompt
cache serves that start (docs/providers.md, "Prompt caching").
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
)
TURN_SECTIONS: tuple[Section, ...] = (relevance.section,)


def turn_context(ctx: PromptContext, sections: Sequence[Section] = TURN_SECTIONS) -> dict[str, str] | None:
    """What goes after the conversation for this step: a user message of `TURN_SECTIONS`'
    texts, or None when they are all empty."""
    text = build(ctx, sections)
    return {"role": "user", "content": text} if text else None


def build(ctx: PromptContext, sections: Sequence[Section] = SECTIONS) -> str:
    """The sections' texts in order, blank-line separated; empty ones left out."""
    parts = (section(ctx) for section in sections)
    return "\n\n".join(p.strip() for p in parts if p and p.strip())
