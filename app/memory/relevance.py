"""The system prompt's memories: those relevant to the turn's message, in a delimited block.

Relevance is BM25 over each memory's name, description and content against the user's
message with common English words left out (they would make every note look relevant).
At most `[memory] inject_max` pass `inject_threshold`; newest first among equals. With
`[tools] rerank_bm25`, the reranker orders BM25's matches instead, and `rerank_bm25_threshold`
is the floor; BM25's share gate is what holds whenever the reranker gives no answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.bm25 import K1, tokens, without_punctuation
from app.memory import store
from app.reranking import retrieval
from app.settings import MemorySettings, ToolSettings
from app.storage.models import Memory

MEMORY_INJECT_CHARS = 2_000  # one memory's content in the system prompt, at most

if TYPE_CHECKING:
    from app.engine.conversation.prompt_context import PromptContext

_COMMON = (
    "a an and are as at be but by can could did do does for from had has have how i if in into is it its "
    "me my no not of on or our please should so that the their them then there these they this to us "
    "was we what when where which who why will with would you your"
)
STOPWORDS = frozenset(_COMMON.split())
OPEN, CLOSE = "<memories>", "</memories>"


def chosen(memories: list[Memory], message: str, memory: MemorySettings, tools: ToolSettings) -> list[Memory]:
    """The memories to inject: as the reranker orders them when it is on and answers, else
    those that pass BM25's share gate."""
    picked = reranked(memories, message, tools, memory.inject_max)
    if picked is not None:
        return picked
    return relevant(memories, message, memory.inject_threshold, memory.inject_max)


def reranked(memories: list[Memory], message: str, tools: ToolSettings, most: int) -> list[Memory] | None:
    """Every memory BM25 matches at all, its best ones scored by the reranker against the
    message; those reaching `rerank_bm25_threshold`, at most `most`, best first. None when
    reranking is off or the endpoint fails."""
    if not retrieval.is_active(tools):
        return None
    terms = _terms(message)
    if not terms or most <= 0 or not memories:
        return []
    found = [m for _score, m in store.ranked(memories, " ".join(sorted(terms)))]
    order = retrieval.reranked(tools, message, found, store.document, tools.rerank_bm25_threshold)
    return None if order is None else order[:most]


def relevant(memories: list[Memory], message: str, threshold: float, most: int) -> list[Memory]:
    """The memories whose BM25 score, as a share of the message's whole weight (the sum of
    its words' IDFs), reaches `threshold`: a share, so that one word every memory shares
    still counts when it is all the message says, and one word among thirty does not."""
    terms = _terms(message)
    if not terms or most <= 0 or not memories:
        return []
    index = store.index_of(memories)
    weight = sum(index.idf(t) for t in terms)
    ranked = store.ranked(memories, " ".join(sorted(terms)), index)
    # Lucene's scores leave out BM25's constant (k1 + 1); restored, a share is the classic one.
    return [m for score, m in ranked if score * (K1 + 1) / weight >= threshold][:most]


def _terms(message: str) -> set[str]:
    return {t for t in tokens(without_punctuation(message)) if t not in STOPWORDS}


def section(ctx: PromptContext) -> str | None:
    """The block of relevant memories, or None when none is."""
    if ctx.db is None or not ctx.message:
        return None
    view = store.View(ctx.workstream.owner_id, ctx.workstream.id)  # the step's own read of it
    with ctx.db.reader() as s:
        memories = store.visible(s, view)
    picked = chosen(memories, ctx.message, ctx.settings.memory, ctx.settings.tools)
    if not picked:
        return None
    intro = (
        "Notes saved in earlier conversations (the memory tool) that look relevant to the "
        "user's message. They may be out of date; what the user says now comes first."
    )
    return "\n".join([OPEN, intro, *(_entry(m) for m in picked), CLOSE])


def _entry(m: Memory) -> str:
    content = (
        m.content if len(m.content) <= MEMORY_INJECT_CHARS else m.content[:MEMORY_INJECT_CHARS] + " [...]"
    )
    about = f" - {m.description}" if m.description else ""
    text = f"## {m.name} ({m.type}, {m.scope}, {m.updated_at:%Y-%m-%d}){about}\n{content}"
    # A note cannot close the block early and go on as the system prompt.
    return text.replace(CLOSE, "</ memories>")
