"""Cutting long tool output down to size: keep its beginning and its end."""

from __future__ import annotations


def truncate(text: str, limit: int) -> str:
    """`text` unchanged when it fits in `limit` characters; otherwise its first and
    last `limit / 2` characters with a notice of how many were cut between them."""
    if len(text) <= limit:
        return text
    head = max(limit, 0) // 2
    tail = max(limit, 0) - head
    cut = len(text) - head - tail
    notice = f"\n\n[... {cut:,} characters cut from the middle of this output ...]\n\n"
    return text[:head] + notice + (text[-tail:] if tail else "")
