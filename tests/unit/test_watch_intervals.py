"""poll_every: `30s`, `5m`, `1h`, within 10 s..24 h."""

from __future__ import annotations

import pytest

from app.watches.intervals import IntervalError, describe, parse_interval


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h", 3600), ("10s", 10), ("24h", 86400), ("1440m", 86400), (" 2M ", 120),
     ("45", 45), ("90 s", 90)],
)  # fmt: skip
def test_durations(text, seconds):
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["9s", "0s", "25h", "86401s", "1441m"])
def test_out_of_range_is_refused_naming_the_limits(text):
    with pytest.raises(IntervalError, match="from 10s to 24h"):
        parse_interval(text)


@pytest.mark.parametrize(
    "value",
    ["", "5", "5 minutes", "1d", "-5m", "1.5h", "5m5s", "x" * 10_000, "5m\x00", "\ud800", "٥m", "1e3s"],
)
def test_anything_else_is_not_a_duration(value):
    if value == "5":  # a bare number counts as seconds: 5 s is below the floor
        with pytest.raises(IntervalError, match="out of range"):
            parse_interval(value)
        return
    with pytest.raises(IntervalError) as refused:
        parse_interval(value)
    assert len(str(refused.value)) < 200  # a huge value is not echoed whole


@pytest.mark.parametrize("value", [5, 5.0, True, None, ["5m"], {"m": 5}])
def test_wrong_types_are_refused(value):
    with pytest.raises(IntervalError, match="must be a string"):
        parse_interval(value)


def test_describe_gives_the_shortest_exact_form():
    assert [describe(s) for s in (10, 90, 300, 3600, 5400, 86400)] == ["10s", "90s", "5m", "1h", "90m", "24h"]
