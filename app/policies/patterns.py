"""The glob a policy rule matches with, and how a shell command is cut into the simple commands
it is matched against.

Globs, not regular expressions: an admin writes `git push*` or `mcp__git__*` and means it
literally, and a glob has no syntax a hostile or careless pattern can make slow. `*` matches any
run of characters (spaces and `/` included), `?` one character; everything else is itself, and
the whole text must match. A glob is matched in one left-to-right pass: its `*`s cut it into
fixed-length pieces, each found at its leftmost place after the one before (the leftmost place is
always as good as any later one), so a match costs about the text's length times the pattern's,
never more, whatever the pattern holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TOOL_PATTERN_CHARS = 200  # a stored tool name's length
MAX_COMMAND_PATTERN_CHARS = 1000
MAX_STARS = 32
TOOL_PATTERN = r"^[A-Za-z0-9_.*?-]{1,200}$"  # the characters of tool names, and the two wildcards
TOOL_PATTERN_RULE = "1-200 letters, digits, '_', '-', '.', with '*' (any run) and '?' (one character)"
# A command longer than this is never *allowed* by a command rule (a deny or ask still matches).
MAX_ALLOWED_COMMAND_CHARS = 100_000

_SPACE = re.compile(r"\s+")


class PatternError(ValueError):
    """A pattern a rule may not have (the message says why, for a 422)."""


@dataclass(frozen=True)
class Glob:
    text: str
    _pieces: tuple[re.Pattern[str], ...]
    _lengths: tuple[int, ...]

    @classmethod
    def compile(cls, text: str, max_chars: int) -> Glob:
        if not text or len(text) > max_chars:
            raise PatternError(f"a pattern of 1 to {max_chars} characters")
        if text.count("*") > MAX_STARS:
            raise PatternError(f"at most {MAX_STARS} '*' in a pattern")
        pieces = text.split("*")
        compiled = tuple(re.compile(_piece(p), re.S) for p in pieces)
        return cls(text, compiled, tuple(len(p) for p in pieces))

    def matches(self, text: str) -> bool:
        pieces, lengths = self._pieces, self._lengths
        if len(pieces) == 1:
            return len(text) == lengths[0] and pieces[0].fullmatch(text) is not None
        first, last = lengths[0], lengths[-1]
        end = len(text) - last
        if end < first or not pieces[0].match(text, 0, first) or not pieces[-1].match(text, end):
            return False
        pos = first
        for piece, length in zip(pieces[1:-1], lengths[1:-1], strict=True):
            found = piece.search(text, pos, end)
            if found is None:
                return False
            pos = found.start() + length
        return True


def _piece(text: str) -> str:
    """A fixed-length piece between `*`s as a regular expression: `?` any one character."""
    return "".join("." if c == "?" else re.escape(c) for c in text)


def tool_glob(text: str) -> Glob:
    if not re.fullmatch(TOOL_PATTERN, text):
        raise PatternError(f"tool: {TOOL_PATTERN_RULE}")
    return Glob.compile(text, MAX_TOOL_PATTERN_CHARS)


def command_glob(text: str) -> Glob:
    """Spaces in a command pattern are one space, as they are in the commands it is matched with."""
    return Glob.compile(normal(text), MAX_COMMAND_PATTERN_CHARS)


def normal(command: str) -> str:
    return _SPACE.sub(" ", command).strip()


# Where one simple command ends and the next begins: ; && || | & (not the & of 2>&1 or &>),
# newlines, and the openings of subshells and substitutions.
_SEPARATOR = re.compile(r"\|\||&&|\|&|(?<![<>])&(?!>)|[;|\n(){}`]|\$\(")
# What may stand before the command itself: variable assignments, and words that run the rest.
_LEAD = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+|(?:sudo|exec|command|nohup|time|env|builtin|!)\s+)+")


def simple_commands(command: str) -> list[str]:
    """The simple commands of a shell script, each as a rule sees it: spaces made one, leading
    assignments and wrappers (`sudo`, `env`, `nohup`...) taken off. A guard rail, not a parser:
    quoting is not understood, so a separator inside quotes cuts there too (which only ever
    makes a deny or ask rule see more commands, and an allow rule allow less)."""
    out = []
    for part in _SEPARATOR.split(command):
        part = normal(part)
        part = _LEAD.sub("", part + " ").strip() if part else part
        if part:
            out.append(part)
    return out
