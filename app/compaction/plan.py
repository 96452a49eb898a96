"""What a compaction covers and what the model is sent after one: pure functions of the stored
rows. The oldest messages are covered; the newest `keep_last` stay whole, and a cut never falls
between an assistant's tool calls and their results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.providers.content import dumps, text_of
from app.storage.models import Message
from app.tools.files import images

SUMMARY = "summary"  # the role a summary message is stored with
CHARS_PER_TOKEN = 4  # the estimate every provider's tokeniser beats on prose and JSON alike
# An image as the providers count it: Anthropic's documented cost of a 1.15-megapixel image, the
# largest it takes unscaled (width x height / 750); OpenAI's high-detail tiles come to about as much.
IMAGE_TOKENS = 1_600
MIN_MESSAGE_CHARS = 400  # a covered message is cut to no less than this in the transcript
CUT_NOTICE = "\n[... {n} characters left out ...]\n"

Pair = tuple[Message, dict[str, Any]]  # a stored row and what the model is sent of it


@dataclass(frozen=True)
class Cover:
    """The rows a new summary stands for: the previous summary (if any) and the visible rows
    after it up to the cut."""

    previous: Message | None
    rows: list[Message]

    @property
    def first_id(self) -> int:
        if self.previous is not None and self.previous.covers_from is not None:
            return self.previous.covers_from
        return _id(self.rows[0])

    @property
    def last_id(self) -> int:
        return _id(self.rows[-1])

    @property
    def count(self) -> int:
        """How many original messages the new summary replaces, the previous one's included."""
        before = self.previous.covers_count or 0 if self.previous is not None else 0
        return before + len(self.rows)


def latest_summary(rows: Sequence[Message]) -> Message | None:
    """The summary the model is sent: the one covering the most (two written side by side, a
    person's and a step's, may cover different ranges), the newer of equals."""
    summaries = [row for row in rows if row.role == SUMMARY]
    return max(summaries, key=lambda row: (row.covers_to or 0, _id(row))) if summaries else None


def visible(pairs: Sequence[Pair]) -> list[dict[str, Any]]:
    """The entries the model is sent: the latest summary first, then every message it does not
    cover (other summaries are what it replaced)."""
    summary = latest_summary([row for row, _ in pairs])
    if summary is None:
        return [entry for _, entry in pairs]
    after = summary.covers_to or 0
    kept = [entry for row, entry in pairs if row.role != SUMMARY and _id(row) > after]
    return [_entry_of(pairs, summary), *kept]


def summary_entry(row: Message) -> dict[str, Any]:
    """A summary as the model reads it: a user message saying what it is."""
    return {
        "role": "user",
        "content": (
            f"[Summary of the {row.covers_count} earlier messages of this conversation, written when "
            f"they no longer fit the context window; the newest messages follow it.]\n\n{row.content or ''}"
        ),
    }


def cover(rows: Sequence[Message], keep_last: int) -> Cover | None:
    """The rows a compaction now would summarise, or None when there is nothing to add to the
    summary (too few messages past the newest `keep_last`, or no safe place to cut)."""
    previous = latest_summary(rows)
    after = previous.covers_to or 0 if previous is not None else 0
    shown = [row for row in rows if row.role != SUMMARY and _id(row) > after]
    cut = _safe_cut(shown, max(0, len(shown) - keep_last))
    return Cover(previous, shown[:cut]) if cut else None


def _safe_cut(rows: list[Message], limit: int) -> int:
    """The largest n <= `limit` such that rows[:n] answers every call it makes and rows[n] is no
    tool result: no call is ever separated from its result."""
    best, unanswered = 0, set[str]()
    for n, row in enumerate(rows[:limit], start=1):
        if row.role == "assistant":
            unanswered |= {str(call.get("id")) for call in row.tool_calls or [] if isinstance(call, dict)}
        elif row.role == "tool":
            unanswered.discard(str(row.tool_call_id))
        following = rows[n] if n < len(rows) else None
        if not unanswered and (following is None or following.role != "tool"):
            best = n
    return best


def estimate_tokens(history: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> int:
    """About how many tokens a request of `history` and `tools` is (no tokeniser: providers
    differ, and `reserve` absorbs the error). An image counts IMAGE_TOKENS, not its base64; an
    attached PDF its text (counted in the JSON) and IMAGE_TOKENS a page, as a model that reads
    PDFs is sent each page as text and as a picture."""
    found = [
        part
        for message in history
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") in ("image", "document")
    ]
    chars = len(dumps(list(history))) + len(dumps(list(tools))) - sum(len(p.get("data") or "") for p in found)
    pictures = sum(1 if p["type"] == "image" else p.get("pages") or 1 for p in found)
    return chars // CHARS_PER_TOKEN + IMAGE_TOKENS * pictures


def transcript(chosen: Cover, budget_chars: int) -> str:
    """The covered messages as text for the summariser, within about `budget_chars`: each one
    cut in its middle to its share (very long tool outputs shrink first), images as a line."""
    parts: list[str] = []
    if chosen.previous is not None:
        parts.append(f"[summary of the earlier part]\n{chosen.previous.content or ''}")
    lines = [_line(row) for row in chosen.rows]
    share = max(MIN_MESSAGE_CHARS, budget_chars // max(1, len(lines) + len(parts)))
    parts = [_cut(part, share * 2) for part in parts]  # the earlier summary weighs more
    parts.extend(_cut(line, share) for line in lines)
    return "\n\n".join(parts)


def _line(row: Message) -> str:
    if row.role == "tool":
        return f"[tool result of {row.name or 'a tool'}]\n{images.summary(row.content or '')}"
    if row.role == "assistant":
        functions = [call.get("function") or {} for call in row.tool_calls or [] if isinstance(call, dict)]
        calls = [f"(called {f.get('name')} with {f.get('arguments')})" for f in functions if f]
        return "\n".join([f"[assistant]\n{row.content or ''}", *calls])
    who = f"user, from {row.origin}" if row.origin else "user"
    sent = [
        f"(attached {item.get('filename')}: attachment:{item.get('attachment_id')})"
        for item in row.attachments or []
    ]
    return "\n".join([f"[{who}]\n{text_of(row.content)}", *sent])


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + CUT_NOTICE.format(n=len(text) - 2 * half) + text[-half:]


def _entry_of(pairs: Sequence[Pair], row: Message) -> dict[str, Any]:
    return next(entry for r, entry in pairs if r is row)


def _id(row: Message) -> int:
    assert row.id is not None, "a stored row"
    return row.id
