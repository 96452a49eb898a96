"""Reranked retrieval (`[tools] rerank_bm25`): BM25 finds the memories, tools or skills that
match, the reranker orders the best of them. Off, or with an endpoint that fails, the caller
keeps BM25's order: reranking may improve a retrieval, never break one.

Scores are remembered per process (`RERANK_CACHE_*`), keyed by a digest of all that was sent.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TypeVar

from app.reranking.client import Reranker, RerankError
from app.settings import RERANK_BM25_POOL, RERANK_DOCUMENT_CHARS, RerankerSettings, ToolSettings

RERANK_QUERY_CHARS = 2_000  # the query (a user's message, a search) as the reranker gets it, at most
# The memory block is built at every model step of a turn: the same message and the same memories
# are scored once per process and remembered (a failure too, more briefly, so that a reranker that
# is down costs a step its timeout once, not at every step).
RERANK_CACHE_ENTRIES = 256
RERANK_CACHE_SECONDS = 600.0
RERANK_FAILURE_CACHE_SECONDS = 60.0

T = TypeVar("T")
log = logging.getLogger(__name__)
# key -> (when it expires, the scores or None for a failure); oldest use first
_cache: OrderedDict[str, tuple[float, list[float] | None]] = OrderedDict()
_lock = threading.Lock()  # a batch's tool calls run on a pool of threads


def is_active(tools: ToolSettings) -> bool:
    return tools.rerank_bm25 and tools.reranker is not None


def reranked(
    tools: ToolSettings, query: str, candidates: Sequence[T], text: Callable[[T], str], floor: float = 0.0
) -> list[T] | None:
    """`candidates` (BM25's, best first) with the best `RERANK_BM25_POOL` in the reranker's
    order (ties keep BM25's) and the rest after them as they were; with a `floor` above 0, only
    the scored ones that reach it. None when reranking is off or the endpoint fails."""
    if not is_active(tools):
        return None
    assert tools.reranker is not None
    pool = list(candidates[:RERANK_BM25_POOL])
    if len(pool) < 2 and floor <= 0:
        return list(candidates)  # nothing to order and nothing to judge: no request
    documents = [text(candidate)[:RERANK_DOCUMENT_CHARS] for candidate in pool]
    scores = _scores(tools.reranker, query[:RERANK_QUERY_CHARS], documents)
    if scores is None:
        return None
    order = sorted(range(len(pool)), key=lambda index: -scores[index])
    if floor > 0:
        return [pool[index] for index in order if scores[index] >= floor]
    return [pool[index] for index in order] + list(candidates[RERANK_BM25_POOL:])


def ordered(tools: ToolSettings, query: str, candidates: Sequence[T], text: Callable[[T], str]) -> list[T]:
    """`candidates` reranked (no floor: the model asked for them), or as they are."""
    order = reranked(tools, query, candidates, text)
    return list(candidates) if order is None else order


def forget() -> None:
    """Drop every remembered score (tests; an endpoint known to have changed)."""
    with _lock:
        _cache.clear()


def _scores(settings: RerankerSettings, query: str, documents: list[str]) -> list[float] | None:
    key = _key(settings, query, documents)
    now = time.monotonic()
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] > now:
            _cache.move_to_end(key)
            return hit[1]
    scores: list[float] | None
    try:
        scores = Reranker.from_settings(settings).scores(query, documents)
    except RerankError as exc:
        log.warning("reranked retrieval keeps BM25's order: %s", exc)
        scores = None
    lasts = RERANK_CACHE_SECONDS if scores is not None else RERANK_FAILURE_CACHE_SECONDS
    with _lock:
        _cache[key] = (time.monotonic() + lasts, scores)
        _cache.move_to_end(key)
        while len(_cache) > RERANK_CACHE_ENTRIES:
            _cache.popitem(last=False)
    return scores


def _key(settings: RerankerSettings, query: str, documents: list[str]) -> str:
    """A digest of the endpoint, its model and instruction, the query and every document: any
    change to a candidate's text is another key. ASCII JSON carries a lone surrogate escaped."""
    sent = [settings.url, settings.model, settings.instruction, query, documents]
    return hashlib.sha256(json.dumps(sent, ensure_ascii=True).encode("ascii")).hexdigest()
