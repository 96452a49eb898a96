"""A client for a Cohere/Jina-style rerank endpoint: `POST {url}` with a query and documents,
answered with a relevance score per document index.

The endpoint is the operator's own configuration (the reranker role's model definition), so it
is reached directly, not through the SSRF-guarded fetcher. Every failure is a `RerankError`; the
callers decide what falling back means (web_search keeps the backend's order).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.settings import RERANK_TIMEOUT_SECONDS, RerankerSettings

RERANK_CONNECT_TIMEOUT_SECONDS = 3.0

USER_AGENT = "turnstone-jobs/0.1 (rerank)"
_SURROGATE = re.compile("[\ud800-\udfff]")


class RerankError(Exception):
    """The endpoint gave no usable scores; the message says why (it never holds the key)."""


def wrap_query(query: str, instruction: str | None) -> str:
    """The query as an instruction-aware reranker (Qwen3-Reranker) expects it when the server
    does not apply the model's chat template itself."""
    if not instruction:
        return query
    return f"<Instruct>: {instruction}\n<Query>: {query}"


@dataclass(frozen=True)
class Reranker:
    """One rerank endpoint: `scores` for a query's documents, `order` best first."""

    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    instruction: str | None = None
    timeout: float = RERANK_TIMEOUT_SECONDS

    @classmethod
    def from_settings(cls, settings: RerankerSettings) -> Reranker:
        return cls(settings.url, settings.model, settings.api_key, settings.instruction, settings.timeout)

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in the documents' order; `RerankError` when there are none."""
        if not documents:
            return []
        payload = {
            "model": self.model,
            "query": encodable(wrap_query(query, self.instruction)),
            "documents": [encodable(document) for document in documents],
            "top_n": len(documents),
            "return_documents": False,
        }
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        import httpx  # on first use: see app/tools/web/fetch/__init__

        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, RERANK_CONNECT_TIMEOUT_SECONDS))
        try:
            response = httpx.post(self.url, json=payload, headers=headers, timeout=timeout)
        except httpx.TimeoutException:
            raise RerankError(f"the reranker did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise RerankError(f"the reranker could not be reached ({type(exc).__name__})") from None
        if response.status_code != 200:
            status = f"{response.status_code} {response.reason_phrase}".rstrip()
            raise RerankError(f"the reranker answered {status}")
        try:
            data = response.json()
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
            raise RerankError("the reranker's answer is not JSON") from None
        return parse_scores(data, len(documents))

    def order(self, query: str, documents: Sequence[str]) -> list[int]:
        """The documents' indices, most relevant first; ties keep the given order."""
        scores = self.scores(query, documents)
        return sorted(range(len(documents)), key=lambda index: -scores[index])


def encodable(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (from a search result's JSON, an MCP
    server's text) becomes U+FFFD instead of failing the request's encoding."""
    return _SURROGATE.sub("\ufffd", text)


def parse_scores(data: Any, count: int) -> list[float]:
    """Scores from `{"results": [{"index", "relevance_score"}]}` (Cohere, Jina, vLLM) or a bare
    list of `{"index", "score"}` (TEI). Every document must be scored exactly once."""
    items = data.get("results") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise RerankError("the reranker's answer has no list of results")
    scores: list[float | None] = [None] * count
    for item in items:
        if not isinstance(item, dict):
            raise RerankError("the reranker's answer has a result that is not an object")
        index = item.get("index")
        score = item.get("relevance_score", item.get("score"))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise RerankError(f"the reranker's answer has a result for no document (index {index!r})")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise RerankError(f"the reranker's answer has a score that is not a number ({score!r})")
        if scores[index] is not None:
            raise RerankError(f"the reranker's answer scores document {index} twice")
        scores[index] = float(score)
    missing = [index for index, score in enumerate(scores) if score is None]
    if missing:
        raise RerankError(f"the reranker's answer leaves {len(missing)} of {count} document(s) unscored")
    return [score for score in scores if score is not None]
