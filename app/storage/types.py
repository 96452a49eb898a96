"""Column types that store any text a model or a tool produced, whatever the database.

PostgreSQL refuses NUL characters in text and cannot encode lone surrogates;
either would turn a command's odd output into a failed turn. These types escape a
NUL as the four characters `\\x00` and replace a lone surrogate with U+FFFD on the
way in, so what is stored is what was produced, save those.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import JSON, Text
from sqlalchemy.types import TypeDecorator

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` with NULs escaped and lone surrogates replaced (a no-op for ordinary text)."""
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "\\x00" if m.group() == "\x00" else "\ufffd", text)


def storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]
    return value


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
