"""Reading a streamed event's JSON as the SDK decoded it: each field the reply is made of is
checked for the type its wire format gives it. A wrong one makes the event malformed, a
broken stream like any other (tried again); fields nobody reads are not looked at."""

from __future__ import annotations

from typing import Any

from app.providers.base import malformed_failure
from app.providers.failure import AttemptFailedError


def malformed(detail: str) -> AttemptFailedError:
    return AttemptFailedError(malformed_failure(detail))


def obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise malformed(f"{what} is {_kind(value)}, not an object")
    return value


def optional_obj(value: Any, what: str) -> dict[str, Any] | None:
    return None if value is None else obj(value, what)


def text(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise malformed(f"{what} is {_kind(value)}, not a string")
    return value


def index(value: Any, what: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise malformed(f"{what} is {_kind(value)}, not an integer")
    return value


def items(value: Any, what: str) -> list[Any]:
    """A list (None: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise malformed(f"{what} is {_kind(value)}, not a list")
    return value


def count(value: Any) -> int | None:
    """A token count; anything else is left out (usage is a report, not part of the reply)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
