"""How deep JSON text nests, measured before it is parsed: the same limit on every Python.

Python 3.11 and 3.12 raise RecursionError on JSON nested some thousand levels deep; 3.13 parses
it. Input that people or models send (request bodies, tool arguments) is held to one limit
instead, far deeper than any real value and far below any interpreter's.
"""

from __future__ import annotations

import re

MAX_JSON_DEPTH = 100
_SIGNIFICANT = re.compile(r'[\[\]{}"\\]')


def is_too_deep(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON `text` opens more than `limit` arrays or objects inside one another (brackets
    inside strings do not count). Linear; text with few brackets is not scanned at all."""
    if isinstance(text, bytes):  # UTF-8 (or -16/-32): these characters are single bytes in it
        text = text.decode("latin-1")
    if text.count("[") + text.count("{") <= limit:
        return False
    return _scan(text, limit)


def _scan(text: str, limit: int) -> bool:
    depth, in_string, escape_end = 0, False, -1
    for match in _SIGNIFICANT.finditer(text):
        char, at = match.group(), match.start()
        if in_string:
            if at == escape_end:  # the character a backslash escapes
                continue
            if char == "\\":
                escape_end = at + 1
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
