"""JSON nesting is measured before parsing, so every Python refuses the same input alike."""

from __future__ import annotations

import pytest

from app.nesting import MAX_JSON_DEPTH, is_too_deep
from app.tools.core.pipeline import ArgumentsError, parse_arguments


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * (MAX_JSON_DEPTH + 1), True),  # unclosed: never parses, still too deep
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), True),
        ('{"a": ' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1), True),
        ("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, False),
        ('"' + "[" * 5000 + '"', False),  # brackets inside a string are text
        ('["\\"' + "[" * 5000 + '"]', False),  # an escaped quote does not end the string
        ('["\\\\"' + ", [" * (MAX_JSON_DEPTH + 1), True),  # an escaped backslash does not escape the quote
        ("[]" * 5000, False),  # many, side by side
        (b"[" * (MAX_JSON_DEPTH + 1), True),
    ],
)
def test_depth_is_counted_outside_strings(text, deep):
    assert is_too_deep(text) is deep


@pytest.mark.parametrize("raw", ["[" * 5000, '{"command": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_tool_arguments_nested_too_deeply_are_refused_by_name(raw):
    with pytest.raises(ArgumentsError, match="nested too deeply"):
        parse_arguments(raw, "command")
