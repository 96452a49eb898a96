"""The synthetic `tool_search` tool: BM25 over the workstream's deferred tools (its best
ones reordered by the reranker with `[tools] rerank_bm25`); what it finds joins the tools
the model is offered, for good.

Offered only while the workstream's tool search runs on our side (the client tier of
`app.tools.core.tool_search_plan`). The tool set that offers it says how to find the deferred
tools and how many to return, as of the call's execution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.bm25 import Index
from app.reranking import retrieval
from app.settings import RERANK_BM25_POOL
from app.storage.models import Workstream
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.tool import Tool, ToolDefinition

NAME = "tool_search"
SOURCE = "tool_search"  # its Tool.source and catalog version's prefix; no tool source may take it
MAX_QUERY_CHARS = 1000
MAX_SUMMARY_CHARS = 200  # a found tool's description, as the result lists it

DEFINITION = ToolDefinition(
    NAME,
    "Find tools that are available but not listed. Describe what you need done in a few "
    "words (e.g. 'create github issue', 'post slack message'); the best matching tools are "
    "added to your tools and can be called from your next step on.",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words describing the tool you need."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    {"auto_approve": True, "primary_key": "query"},
)

Finder = Callable[[ToolContext], tuple[Sequence[Tool], int]]  # (the deferred tools, max results)


def tool(find: Finder) -> Tool:
    return Tool(DEFINITION, _Handler(find), source=SOURCE, version="")


def index(tools: Sequence[Tool]) -> Index[str]:
    """The BM25 index a search runs over: each tool's name and description."""
    return Index((t.name, f"{t.name} {t.definition.description}") for t in tools)


def document(tool: Tool) -> str:
    """A tool as a reranker reads it: its name, then its description."""
    return f"{tool.name}\n{tool.definition.description}".strip()


def summary(tool: Tool) -> str:
    lines = tool.definition.description.strip().splitlines()
    first = lines[0] if lines else ""
    return first if len(first) <= MAX_SUMMARY_CHARS else first[: MAX_SUMMARY_CHARS - 3] + "..."


def expanded(current: Sequence[str], names: Sequence[str]) -> list[str]:
    """A workstream's expanded tools with `names` added: never fewer, sorted."""
    return sorted(set(current) | set(names))


class _Handler:
    def __init__(self, find: Finder) -> None:
        self.find = find

    def prepare(self, args: dict[str, Any], ctx: ToolContext) -> Preparation:
        query = args.get("query")
        if not isinstance(query, str):
            return _refused(args, "query must be a string")
        if not query.strip():
            return _refused(args, "the query is empty: give a few words saying what the tool should do")
        if len(query) > MAX_QUERY_CHARS:
            return _refused(args, f"the query is longer than {MAX_QUERY_CHARS} characters; use a few words")
        return Preparation({"query": query}, header=f"{NAME} {query.strip()}", needs_approval=False)

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        query = args["query"]
        deferred, limit = self.find(ctx)
        by_name = {t.name: t for t in deferred}
        matches = index(deferred).search(query, max(limit, RERANK_BM25_POOL))
        pool = [by_name[name] for name, _score in matches]
        hits = retrieval.ordered(ctx.settings, query, pool, document)[:limit]
        if not hits:
            return ToolOutcome(
                f"No tool matches {query.strip()!r}; no tools were added. "
                "Try other words: what the tool does, or the service it belongs to."
            )
        _expand(ctx, [t.name for t in hits])
        found = "\n".join(f"- {t.name}: {summary(t)}" for t in hits)
        count = f"{len(hits)} tool{'s' if len(hits) > 1 else ''}"
        return ToolOutcome(f"Found {count}, now available to call:\n{found}")


def _refused(args: dict[str, Any], why: str) -> Preparation:
    return Preparation(args, header=NAME, error=f"Error: {NAME}: {why}")


def _expand(ctx: ToolContext, names: list[str]) -> None:
    """Store the found tools with the workstream (a row lock: two searches both count)."""
    if ctx.db is None:
        return
    with ctx.db.session() as s:
        ws = s.get(Workstream, ctx.ws_id, with_for_update=True)
        if ws is not None:
            ws.expanded_tools = expanded(ws.expanded_tools, names)
            s.add(ws)
