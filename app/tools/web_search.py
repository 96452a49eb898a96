"""The web_search tool: a query sent to the operator's SearxNG (or an MCP tool, `[tools]
web_search_backend`), the results given back as numbered `[title](url)` lines with their
extracts. Offered only when a backend is configured. With a reranker selected, the backend's
whole pool is reordered by relevance before the top results are cut; a reranker that fails
changes nothing. An MCP answer that is not a list of results is passed on as its text.
"""

from __future__ import annotations

import logging
from typing import Any

from app.reranking.client import Reranker, RerankError
from app.settings import RERANK_DOCUMENT_CHARS, ToolSettings, web_search_mcp_target
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.web.mcp_backend import MCPSearch
from app.tools.web.searxng import CATEGORIES, Result, SearchError, SearxNG

WEB_SEARCH_DEFAULT_RESULTS = 5
WEB_SEARCH_MAX_RESULTS = 20
WEB_SEARCH_SNIPPET_CHARS = 400  # one result's extract, at most

TOOL = "web_search"
log = logging.getLogger(__name__)
NO_BACKEND = (
    "Error: web_search has no search backend: set [tools] searxng_url or TURNSTONE_SEARXNG_URL, "
    'or [tools] web_search_backend = "mcp:SERVER:TOOL"'
)


def is_available(settings: ToolSettings) -> bool:
    """Offered only with a backend: a tool that could only fail is not worth the model's attention."""
    return web_search_mcp_target(settings.web_search_backend) is not None or bool(settings.searxng_url)


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return _refused(args, "Error: web_search needs 'query', a non-empty string")
    clean: dict[str, Any] = {"query": " ".join(query.split())}
    header = f"{TOOL} {clean['query']}"
    count = args.get("max_results", WEB_SEARCH_DEFAULT_RESULTS)
    # bool is an int to Python, never to the model's schema
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= WEB_SEARCH_MAX_RESULTS:
        error = f"Error: max_results must be a whole number from 1 to {WEB_SEARCH_MAX_RESULTS}, not {count!r}"
        return _refused(clean, error, header)
    category = args.get("category", "general")
    if category not in CATEGORIES:
        error = f"Error: category must be one of {', '.join(CATEGORIES)}, not {category!r}"
        return _refused(clean, error, header)
    clean.update(max_results=count, category=category)
    if not is_available(ctx.settings):
        return _refused(clean, NO_BACKEND, header)
    preview = f"Search: {clean['query']}\nCategory: {category}; at most {count} result(s)"
    if target := web_search_mcp_target(ctx.settings.web_search_backend):
        preview += f"\nBackend: MCP server {target[0]!r}, tool {target[1]!r}"
    return Preparation(clean, header, preview=preview, needs_approval=True)


def _refused(args: dict[str, Any], error: str, header: str = TOOL) -> Preparation:
    return Preparation(dict(args), header, needs_approval=False, error=error)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if not is_available(ctx.settings):
        return ToolOutcome(NO_BACKEND, is_error=True)
    try:
        results = _search(args, ctx)
    except SearchError as exc:
        return ToolOutcome(f"Error: web_search failed: {exc}", is_error=True)
    if isinstance(results, str):  # an MCP tool's own text: it chose what to say
        return ToolOutcome(results)
    pool = _reranked(args["query"], _distinct(results), ctx.settings)
    shown = pool[: args.get("max_results", WEB_SEARCH_DEFAULT_RESULTS)]
    if not shown:
        return ToolOutcome(f"No results for {args['query']!r}.")
    return ToolOutcome("\n".join(_line(n, result) for n, result in enumerate(shown, 1)))


def _search(args: dict[str, Any], ctx: ToolContext) -> list[Result] | str:
    target = web_search_mcp_target(ctx.settings.web_search_backend)
    if target is None:
        assert ctx.settings.searxng_url is not None
        return SearxNG(ctx.settings.searxng_url).search(args["query"], args.get("category", "general"))
    backend = MCPSearch(ctx.mcp, *target, timeout=float(ctx.settings.mcp_call_timeout))
    return backend.search(args["query"], ctx.is_cancelled)


def _distinct(results: list[Result]) -> list[Result]:
    """One result per address: SearxNG merges engines, but not every duplicate."""
    seen: set[str] = set()
    kept = []
    for result in results:
        if result.url not in seen:
            seen.add(result.url)
            kept.append(result)
    return kept


def _reranked(query: str, results: list[Result], settings: ToolSettings) -> list[Result]:
    """The pool in the reranker's order, or as the backend gave it when there is no reranker
    or it fails: reranking may improve a search, never break one."""
    if settings.reranker is None or not settings.rerank_web_search or len(results) < 2:
        return results
    # An engine's snippet has no bound of its own: the endpoint gets as much as any retrieval sends.
    documents = [f"{result.title}\n{result.snippet}".strip()[:RERANK_DOCUMENT_CHARS] for result in results]
    try:
        order = Reranker.from_settings(settings.reranker).order(query, documents)
    except RerankError as exc:
        log.warning("web_search keeps the backend's order: %s", exc)
        return results
    return [results[index] for index in order]


def _line(number: int, result: Result) -> str:
    title = result.title.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    url = result.url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    line = f"{number}. [{title}]({url})"
    snippet = result.snippet
    if len(snippet) > WEB_SEARCH_SNIPPET_CHARS:
        snippet = snippet[: WEB_SEARCH_SNIPPET_CHARS - 1].rstrip() + "…"
    return f"{line}\n   {snippet}" if snippet else line
