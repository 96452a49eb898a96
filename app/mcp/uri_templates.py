"""Whether a URI falls under an MCP resource template (RFC 6570: `db://{table}`, `file:///{+path}`,
`repo://{owner}/{repo}/contents{/path*}`, `search://items{?q,limit}`, ...).

Each expression stands for the run of characters its operator can produce: a simple `{x}`
stays within one path segment, `{+x}` may span `/`, `{/x*}` is zero or more `/segments`,
`{?x}` a query, and so on. Values are not checked beyond that (nor `{x:3}`'s length): the
answer only says which server to ask, and the server has the last word. The URI is
walked as bit sets of positions, so matching takes time linear in the URI whatever the
template: no regular expression is built from a server's text, nothing backtracks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_TEMPLATE_CHARS = 2_000  # a longer "template" matches nothing
_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_RESERVED_OPERATORS = "=,!@|"  # RFC 6570 keeps them for later extensions: such a template matches nothing


@dataclass(frozen=True)
class _Expression:
    lead: str  # the character its expansion starts with; "" for none (then it is not empty)
    stops: str  # characters its expansion cannot contain


_OPERATORS = {
    "": _Expression("", "/"),
    "+": _Expression("", ""),
    "#": _Expression("#", ""),
    ".": _Expression(".", "/?#"),
    "/": _Expression("/", "?#"),
    ";": _Expression(";", "/?#"),
    "?": _Expression("?", "#"),
    "&": _Expression("&", "#"),
}


def matches(template: str, uri: str) -> bool:
    """`uri` is one that `template` (with at least one expression) can expand to."""
    parts = _parts(template)
    if parts is None:
        return False
    positions = _positions(uri)
    reach = 1  # bit i set: the template so far can end at position i of the URI (before uri[i])
    for part in parts:
        reach = positions.after(reach, part)
        if not reach:
            return False
    return bool(reach >> len(uri) & 1)


@lru_cache(maxsize=1024)
def _parts(template: str) -> tuple[str | _Expression, ...] | None:
    """The template's literals and expressions; None if it is no template (malformed, too long,
    a reserved operator, or no expression at all: an exact URI is compared as a string)."""
    if len(template) > MAX_TEMPLATE_CHARS:
        return None
    parts: list[str | _Expression] = []
    end = 0
    for m in _EXPRESSION.finditer(template):
        parts.append(template[end : m.start()])
        body = m.group(1)
        operator = body[:1] if body[:1] in _OPERATORS else ""
        if body[:1] in _RESERVED_OPERATORS or not all(body[len(operator) :].split(",")):
            return None
        parts.append(_OPERATORS[operator])
        end = m.end()
    parts.append(template[end:])
    literals = [p for p in parts if isinstance(p, str)]
    if len(literals) == len(parts) or any("{" in p or "}" in p for p in literals):
        return None  # no expression, or a brace outside one (nested, unclosed, stray)
    return tuple(p for p in parts if p)


class _Positions:
    """A URI's characters as bit sets: bit i stands for position i, just before uri[i]."""

    def __init__(self, uri: str) -> None:
        self.before_any = (1 << len(uri)) - 1
        self._before: dict[str, int] = {}
        for i, char in enumerate(uri):
            self._before[char] = self._before.get(char, 0) | 1 << i

    def before(self, chars: str) -> int:
        """The positions just before one of `chars`."""
        out = 0
        for char in chars:
            out |= self._before.get(char, 0)
        return out

    def after(self, reach: int, part: str | _Expression) -> int:
        """Where a match can be once `part` follows any position in `reach`."""
        if isinstance(part, str):
            for offset, char in enumerate(part):
                reach &= self.before(char) >> offset
            return reach << len(part)
        allowed = self.before_any & ~self.before(part.stops)
        if not part.lead:
            return _runs(allowed, (reach & allowed) << 1)  # one character at least
        return reach | _runs(allowed, (reach & self.before(part.lead)) << 1)  # absent, or lead + run


def _runs(allowed: int, starts: int) -> int:
    """`starts` and every position reached from one of them through characters in `allowed`."""
    # Adding a start to `allowed` carries through the rest of its run of allowed characters
    # and stops just past it; the XOR with `allowed` then sets the whole stretch.
    return starts | ((allowed + (starts & allowed)) ^ allowed)


@lru_cache(maxsize=16)
def _positions(uri: str) -> _Positions:
    return _Positions(uri)
