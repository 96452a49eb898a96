"""The recall tool: full-text search over the owner's stored conversations (auto-approved).

Each match says where (workstream name and id), who (role, or the tool whose result it
was), when, and shows a snippet with the matched words «marked». The turn asking is left
out: its own message would always be the first match.
"""

from __future__ import annotations

from typing import Any

from app.memory import owners
from app.recall import search
from app.recall.query import QueryError, parse
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

RECALL_DEFAULT_LIMIT = 20
RECALL_MAX_LIMIT = 100

TOOL = "recall"
NO_STORAGE = "Error: recall has no storage in this context"


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return _refused(args, "Error: recall needs 'query', a non-empty string")
    header = f"{TOOL} {' '.join(query.split())[:80]}"
    limit = args.get("limit", RECALL_DEFAULT_LIMIT)
    # bool is an int to Python, never to the model's schema
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RECALL_MAX_LIMIT:
        error = f"Error: recall's limit must be a whole number from 1 to {RECALL_MAX_LIMIT}"
        return _refused(args, error, header)
    try:
        parse(query)
    except QueryError as exc:
        return _refused(args, f"Error: recall: {exc}", header)
    return Preparation({"query": query, "limit": limit}, header, needs_approval=False)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None:
        return ToolOutcome(NO_STORAGE, is_error=True)
    query = parse(args["query"])
    with ctx.db.reader() as s:
        owner = owners.owner_of_workstream(s, ctx.ws_id)
    hits = search.search(ctx.db, query, owner, args["limit"], skip_turn=ctx.turn_id)
    if not hits:
        return ToolOutcome(f"Nothing in the conversation history matches {args['query']!r}.")
    return ToolOutcome("\n\n".join(_entry(hit) for hit in hits))


def _entry(hit: search.Hit) -> str:
    who = f"tool result ({hit.tool})" if hit.role == "tool" else hit.role
    when = hit.created_at.strftime("%Y-%m-%d %H:%M UTC")
    return f"[{when}] {hit.workstream} ({hit.ws_id}), {who}:\n{hit.snippet}"


def _refused(args: dict[str, Any], error: str, header: str = TOOL) -> Preparation:
    return Preparation(dict(args), header, needs_approval=False, error=error)
