"""Column types that store any text a model or a tool produced, whatever the database.

PostgreSQL refuses NUL characters in text and cannot encode lone surrogates;
either would turn a command's odd output into a failed turn. SafeText and SafeJSON
escape a NUL as the four characters `\\x00` and replace a lone surrogate with U+FFFD
on the way in, so what is stored is what was produced, save those. ExactText gives
back exactly what was stored, those included, for text that is compared again.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import JSON, Text
from sqlalchemy.types import TypeDecorator

# What these types rewrite: NUL and lone surrogates (callers that must refuse them use this too).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` with NULs escaped and lone surrogates replaced (a no-op for ordinary text)."""
    if not UNSTORABLE.search(text):
        return text
    return UNSTORABLE.sub(lambda m: "\\x00" if m.group() == "\x00" else "\ufffd", text)


def storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]
    return value


_MARK = "\ufdd0"  # a noncharacter: Unicode keeps it for a program's own use, never for text
_ESCAPED = re.compile(r"[\\\x00\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4})")


def encode_exact(text: str) -> str:
    """`text` as ExactText stores it: itself when it is storable (and does not start with the
    mark), else the mark and `text` with backslashes doubled and NULs and lone surrogates
    written `\\uXXXX`."""
    if not UNSTORABLE.search(text) and not text.startswith(_MARK):
        return text
    return _MARK + _ESCAPED.sub(lambda m: "\\\\" if m.group() == "\\" else f"\\u{ord(m.group()):04x}", text)


def decode_exact(stored: str) -> str:
    """The text `encode_exact` stored."""
    if not stored.startswith(_MARK):
        return stored
    return _ESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)), stored[1:])


class SafeText(TypeDecorator[str]):
    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else storable(value)


class SafeJSON(TypeDecorator[Any]):
    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return storable_json(value)


class ExactText(TypeDecorator[str]):
    """Text read back exactly as it was written, NULs and lone surrogates included."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else encode_exact(value)

    def process_result_value(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else decode_exact(value)
