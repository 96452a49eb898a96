"""The skill tool: `search` the enabled skills (auto-approved; reranked with `[tools]
rerank_bm25`), `load` one (a person approves).

Loading renders the skill's placeholders and stores it as the workstream's active skill;
the system prompt carries it from the next model step on (app/skills/section.py).
"""

from __future__ import annotations

from typing import Any

from app.settings import RECALL_MAX_QUERY_CHARS, SKILL_SEARCH_RESULTS
from app.skills import store
from app.skills.fields import risk_warning
from app.storage.models import PromptTemplate
from app.storage.types import storable
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "skill"
ACTIONS = ("load", "search")
NO_STORAGE = "Error: skill has no storage in this context"
PREVIEW_CHARS = 600


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    action = args.get("action")
    if action not in ACTIONS:
        error = f"Error: skill's action must be one of {', '.join(ACTIONS)}, not {_shown(action)}"
        return _refused(args, error)
    if action == "search":
        query = args.get("query", "")
        if not isinstance(query, str) or len(query) > RECALL_MAX_QUERY_CHARS:
            error = (
                f"Error: skill search's query must be a string of at most {RECALL_MAX_QUERY_CHARS} characters"
            )
            return _refused(args, error)
        header = f"skill search {query[:80]}".strip()
        return Preparation({"action": "search", "query": query}, header, needs_approval=False)
    name = args.get("name")
    if not isinstance(name, str) or not name.strip():
        return _refused(args, "Error: skill load needs 'name', the skill to activate ('search' lists them)")
    header = f"skill load {name[:80]}"
    # a name no row can have (a NUL, a lone surrogate) never reaches a query
    skill = store.get(ctx.db, name) if ctx.db is not None and storable(name) == name else None
    if skill is None or not skill.enabled:
        error = f"Error: no enabled skill named {_shown(name)}; use skill search to find one"
        return _refused({"action": "load", "name": name}, error, header)
    return Preparation({"action": "load", "name": name}, header, preview=_preview(skill), needs_approval=True)


def _preview(skill: PromptTemplate) -> str:
    content = skill.content
    if len(content) > PREVIEW_CHARS:
        content = content[:PREVIEW_CHARS] + " [...]"
    return "\n".join(
        [f"Activate skill {skill.name} (risk: {skill.risk_level})", skill.description, "", content]
    )


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None:
        return ToolOutcome(NO_STORAGE, is_error=True)
    if args["action"] == "search":
        found = store.search(ctx.db, args["query"], SKILL_SEARCH_RESULTS, ctx.settings)
        if not found:
            query = args["query"]
            return ToolOutcome(f"No skills match {query!r}." if query else "No skills are available.")
        return ToolOutcome("\n".join(_line(k) for k in found))
    skill = store.get(ctx.db, args["name"])
    if skill is None or not skill.enabled:  # deleted or disabled since it was approved
        return ToolOutcome(f"Error: skill {args['name']!r} is no longer available", is_error=True)
    model = ctx.model.model if ctx.model is not None else ""
    store.activate(ctx.db, ctx.ws_id, skill, model)
    loaded = f"Loaded skill {skill.name!r}: {skill.description}".rstrip(": ")
    parts = [loaded, f"Risk level: {skill.risk_level}."]
    if warning := risk_warning(skill.name, skill.risk_level):
        parts.append(warning)
    parts.append("Its instructions are in the system prompt from the next step on.")
    return ToolOutcome("\n".join(parts))


def _line(k: PromptTemplate) -> str:
    about = f": {k.description}" if k.description else ""
    category = f"{k.category}, " if k.category else ""
    return f"- {k.name} [{category}risk: {k.risk_level}, activation: {k.activation}]{about}"


def _refused(args: dict[str, Any], error: str, header: str = TOOL) -> Preparation:
    return Preparation(dict(args), header, needs_approval=False, error=error)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
