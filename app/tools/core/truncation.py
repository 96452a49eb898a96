"""Cutting long tool output down to size: keep its beginning and its end, with one notice of
how much was cut between them, counting what was never kept as well."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# Text, or (an int) how many characters are missing at that point: left out as they were produced.
Piece = str | int

_NOTICE = "\n\n[... {:,} characters cut from the middle of this output ...]\n\n"
_NOTICE_AT = re.compile(
    r"\n\n\[\.\.\. \d{1,3}(?:,\d{3})* characters cut from the middle of this output \.\.\.\]\n\n"
)
_NOTICE_MAX = len(_NOTICE.format(10**30))


def truncate(text: str, limit: int) -> str:
    """`text` unchanged when it fits in `limit` characters; otherwise its first and
    last `limit / 2` characters with a notice of how many were cut between them.

    Text already cut to `limit` (by this module) is left as it is: cutting it again
    would count only the second cut, where a tool that cut its own output (bash, which
    keeps only so much while a command runs) has counted everything."""
    if len(text) <= limit or is_truncated(text, limit):
        return text
    return truncate_pieces([text], limit)


def truncate_pieces(pieces: Sequence[Piece], limit: int) -> str:
    """The text made of `pieces` (strings, and counts of characters missing between them), cut
    as `truncate` cuts: whole when it fits and lacks nothing; otherwise as much of its first and
    last `limit / 2` characters as was kept (the head stops at the first gap, the tail at the
    last), around one notice counting every character between them, the missing ones too."""
    missing = sum(p for p in pieces if isinstance(p, int))
    size = missing + sum(len(p) for p in pieces if isinstance(p, str))
    if not missing and size <= limit:
        return "".join(p for p in pieces if isinstance(p, str))
    head_room = max(limit, 0) // 2
    head = "".join(_leading(pieces, head_room))
    tail = "".join(reversed(_trailing(reversed(pieces), max(limit, 0) - head_room)))
    return head + _NOTICE.format(size - len(head) - len(tail)) + tail


def is_truncated(text: str, limit: int) -> bool:
    """Whether `text` is what this module makes of a longer text for `limit`: at most `limit / 2`
    characters, a notice, and at most the rest of `limit` after it."""
    if len(text) > limit + _NOTICE_MAX:
        return False
    head_room = max(limit, 0) // 2
    for found in _NOTICE_AT.finditer(text, 0, head_room + _NOTICE_MAX):
        if found.start() <= head_room and len(text) - found.end() <= max(limit, 0) - head_room:
            return True
    return False


def _leading(pieces: Iterable[Piece], room: int) -> list[str]:
    """Up to `room` characters from the start of `pieces`, stopping at the first gap."""
    taken: list[str] = []
    for piece in pieces:
        if room <= 0 or (isinstance(piece, int) and piece > 0):
            break
        if isinstance(piece, str):
            taken.append(piece[:room])
            room -= len(taken[-1])
    return taken


def _trailing(pieces: Iterable[Piece], room: int) -> list[str]:
    """Up to `room` characters from the end of `pieces` (given last first), stopping at the
    last gap; last first."""
    taken: list[str] = []
    for piece in pieces:
        if room <= 0 or (isinstance(piece, int) and piece > 0):
            break
        if isinstance(piece, str) and piece:
            taken.append(piece[-room:])
            room -= len(taken[-1])
    return taken
