"""Poll intervals as a model writes them (`30s`, `5m`, `1h`) and as people read them."""

from __future__ import annotations

import re

WATCH_MIN_INTERVAL_SECONDS = 10
WATCH_MAX_INTERVAL_SECONDS = 24 * 3600


UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
MAX_INTERVAL_TEXT = 32  # longer text is not an interval, and is not echoed whole
_INTERVAL = re.compile(r"([0-9]{1,9}) ?([smh])")  # ASCII digits: int() would take any script's


class IntervalError(ValueError):
    """The text is not an interval this service accepts; the message says why."""


def parse_interval(text: object) -> int:
    """Seconds from `30s`, `5m`, `1h` (a bare number counts as seconds), within 10 s..24 h."""
    if not isinstance(text, str):
        raise IntervalError(f"poll_every must be a string such as '30s', '5m' or '1h', not {_kind(text)}")
    cleaned = text.strip().lower()
    if cleaned.isascii() and cleaned.isdigit():
        cleaned += "s"
    match = _INTERVAL.fullmatch(cleaned) if len(cleaned) <= MAX_INTERVAL_TEXT else None
    if match is None:
        shown = text if len(text) <= MAX_INTERVAL_TEXT else text[:MAX_INTERVAL_TEXT] + "..."
        raise IntervalError(f"poll_every {shown!r} is not a duration such as '30s', '5m' or '1h'")
    seconds = int(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if not WATCH_MIN_INTERVAL_SECONDS <= seconds <= WATCH_MAX_INTERVAL_SECONDS:
        raise IntervalError(
            f"poll_every {text.strip()!r} is out of range: the interval must be from "
            f"{describe(WATCH_MIN_INTERVAL_SECONDS)} to {describe(WATCH_MAX_INTERVAL_SECONDS)}"
        )
    return seconds


def describe(seconds: int) -> str:
    """The shortest exact form: 90 -> '90s', 300 -> '5m', 7200 -> '2h'."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _kind(value: object) -> str:
    return "a boolean" if isinstance(value, bool) else type(value).__name__
