"""web_search's MCP backend (`[tools] web_search_backend = "mcp:SERVER:TOOL"`): the query goes
to that tool as `{"query": ...}`. An answer that reads as a list of results (JSON: a list, or an
object with a `results` list, of items with a `url`) becomes `Result`s, to be deduplicated,
reranked and cut like SearxNG's; any other answer is the tool's own text, passed on as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from app.tools.web.searxng import Result, SearchError

SNIPPET_KEYS = ("snippet", "content", "description", "text", "summary")


class MCPSearch:
    """One MCP tool, reached through the worker's MCP manager."""

    def __init__(self, manager: Any, server: str, tool: str, timeout: float) -> None:
        self.manager = manager
        self.server = server
        self.tool = tool
        self.timeout = timeout

    @property
    def name(self) -> str:
        return f"MCP tool {self.tool!r} of server {self.server!r}"

    def search(self, query: str, is_cancelled: Callable[[], bool]) -> list[Result] | str:
        """The results, or the tool's text when it is not a list of results; `SearchError`
        when the server cannot be reached or the tool answers with an error."""
        from app.mcp.manager import CallCancelledError
        from app.mcp.results import call_output
        from app.mcp.states import RequestTimeoutError, ServerGoneError

        if self.manager is None:
            raise SearchError(f"the search backend, {self.name}, is not reachable from here (no MCP manager)")
        try:
            arguments = {"query": query}
            result = self.manager.call_tool(self.server, self.tool, arguments, self.timeout, is_cancelled)
            text, is_error = call_output(result)
        except ServerGoneError as exc:
            raise SearchError(f"the search backend, {self.name}, is unavailable: {exc}") from None
        except RequestTimeoutError:
            waited = f"did not answer within {self.timeout:g} s"
            raise SearchError(f"the search backend, {self.name}, {waited}") from None
        except CallCancelledError:
            raise SearchError("cancelled") from None
        except Exception as exc:  # an MCP error answer (unknown tool, bad arguments) or a bad reply
            raise SearchError(f"the search backend, {self.name}, refused the query: {exc}") from None
        if is_error:
            raise SearchError(f"the search backend, {self.name}, answered with an error: {text}")
        return parsed(text)


def parsed(text: str) -> list[Result] | str:
    """Results, when `text` is JSON holding a list of them; else `text` unchanged."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser can take
        return text
    items = data.get("results") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        return text
    results = [r for r in (_result(item) for item in items) if r is not None]
    return results if len(results) == len(items) else text  # a list of something else: as it came


def _result(item: Any) -> Result | None:
    if not isinstance(item, dict):
        return None
    url = item.get("url") or item.get("link")
    if not isinstance(url, str) or not url.strip():
        return None
    snippet = next((item[k] for k in SNIPPET_KEYS if isinstance(item.get(k), str)), "")
    title = item["title"] if isinstance(item.get("title"), str) else ""
    return Result(" ".join(title.split()) or url.strip(), url.strip(), " ".join(snippet.split()))
