"""Exact-text replacements on a string: finding, disambiguating and applying edit_file's edits.

Pure functions of text; every refusal is a `ReplacementError` whose message is
meant for the model. Lines are counted from 1 and end at "\\n".
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

MAX_LINES_LISTED = 20  # occurrences named in an "occurs N times" error
_SINGLE_HINT = ", add surrounding text to make it unique, or use replace_all to change every occurrence"


class ReplacementError(ValueError):
    """An edit cannot be applied to this text."""


@dataclass(frozen=True)
class Edit:
    old: str
    new: str
    near_line: int | None = None


@dataclass(frozen=True)
class Span:
    """Where one edit applies in the original text: `text[start:end]` becomes `new`."""

    start: int
    end: int
    new: str
    line: int  # the line the replaced text starts on
    index: int  # which edit of the batch it came from


class LineIndex:
    """Line numbers of character offsets, found by bisection over newline offsets."""

    def __init__(self, text: str) -> None:
        self._newlines = occurrences(text, "\n")

    def line_of(self, offset: int) -> int:
        return bisect_right(self._newlines, offset - 1) + 1


def occurrences(text: str, old: str) -> list[int]:
    """Every offset where `old` starts, overlapping ones included ("aa" twice in "aaa")."""
    found = []
    at = text.find(old)
    while at != -1:
        found.append(at)
        at = text.find(old, at + 1)
    return found


def plan(text: str, edits: list[Edit], shown: str, batch: bool = False) -> list[Span]:
    """Where each edit applies in the original `text`, checked not to overlap.

    In a `batch` (the `edits` list), errors name the edit they are about.
    """
    lines = _LazyIndex(text)
    spans = [_locate(text, edit, n, batch, shown, lines) for n, edit in enumerate(edits)]
    ordered = sorted(spans, key=lambda s: (s.start, s.end))
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.start < before.end:  # touching (after.start == before.end) is fine
            raise ReplacementError(
                f"Error: edits {before.index + 1} and {after.index + 1} overlap in {shown} "
                f"(lines {before.line} and {after.line}); merge them into one edit"
            )
    return ordered


def apply(text: str, spans: list[Span]) -> str:
    """`text` with every span replaced; spans go in from the last one back, so the
    offsets of the earlier ones stay true."""
    for span in sorted(spans, key=lambda s: s.start, reverse=True):
        text = text[: span.start] + span.new + text[span.end :]
    return text


def replace_all(text: str, old: str, new: str, shown: str) -> tuple[str, int]:
    """`text` with every (non-overlapping) occurrence of `old` replaced, and how many."""
    count = text.count(old)
    if not count:
        raise ReplacementError(_not_found(shown, None))
    return text.replace(old, new), count


def _locate(text: str, edit: Edit, n: int, batch: bool, shown: str, lines: _LazyIndex) -> Span:
    where = f"edit {n + 1}: " if batch else ""
    found = occurrences(text, edit.old)
    if not found:
        raise ReplacementError(_not_found(shown, where))
    if len(found) == 1:
        start = found[0]
    elif edit.near_line is None:
        listed = [lines.get().line_of(at) for at in found[:MAX_LINES_LISTED]]
        more = f" and {len(found) - len(listed)} more" if len(found) > len(listed) else ""
        raise ReplacementError(
            f"Error: {where}old_string occurs {len(found)} times in {shown}, at lines "
            f"{', '.join(map(str, listed))}{more}; pass near_line to pick one"
            + (" or add surrounding text to make it unique" if batch else _SINGLE_HINT)
        )
    else:
        start = _nearest(found, edit, lines.get())
    return Span(start, start + len(edit.old), edit.new, lines.get().line_of(start), n)


def _nearest(found: list[int], edit: Edit, lines: LineIndex) -> int:
    """The occurrence whose lines come closest to `near_line`; ties go to the earlier."""
    assert edit.near_line is not None
    extra_lines = edit.old.count("\n")

    def distance(at: int) -> int:
        first = lines.line_of(at)
        last = first + extra_lines
        return max(first - edit.near_line, edit.near_line - last, 0)  # type: ignore[operator]

    return min(found, key=lambda at: (distance(at), at))


def _not_found(shown: str, where: str | None) -> str:
    return (
        f"Error: {where or ''}old_string was not found in {shown}; it must match the file exactly, "
        "whitespace and indentation included (read_file shows the current text)"
    )


class _LazyIndex:
    """A `LineIndex` built only when a line number is needed (a 5 MB file has many newlines)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._index: LineIndex | None = None

    def get(self) -> LineIndex:
        if self._index is None:
            self._index = LineIndex(self._text)
        return self._index
