"""Unified diffs of two texts, as diff_file returns them and edit_file and write_file preview them."""

from __future__ import annotations

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"
NOTE_ROOM = 100  # characters kept free under the limit for the closing note


def unified_diff(old: str, new: str, old_label: str, new_label: str, context: int = 3, limit: int = 0) -> str:
    """The diff from `old` to `new`, or "" when they are the same.

    With a `limit` above 0 a longer diff stops at a line (difflib yields it piece by
    piece, so a huge diff is never built whole) and says so on its last line. The
    whole stays within `limit`, so the cut of long tool results never takes a
    second bite out of its middle.
    """
    pieces: list[str] = []
    size = 0
    budget = limit - NOTE_ROOM
    lines = difflib.unified_diff(_lines(old), _lines(new), old_label, new_label, n=context)
    for line in lines:
        pieces.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
        size += len(pieces[-1])
        if limit and size > limit:
            while pieces and size > budget:  # make room for the note
                size -= len(pieces.pop())
            pieces.append(f"[... diff stopped here: it is longer than {limit:,} characters ...]\n")
            break
    return "".join(pieces)


def _lines(text: str) -> list[str]:
    # Split on "\n" only, as edit_file counts lines; a "\r" stays with its line.
    lines = text.split("\n")
    last = lines.pop()
    lines = [line + "\n" for line in lines]
    if last:
        lines.append(last)
    return lines
