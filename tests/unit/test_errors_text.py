"""app.errors.unstorable: the one walk that says where a JSON value holds what no stored text may
(a NUL, a lone surrogate), keys included, for run metadata, client tool schemas and call edits."""

from __future__ import annotations

import pytest

from app.errors import unstorable


@pytest.mark.parametrize(
    "value,found",
    [
        ({"a": "x\x00"}, "m.a: must not contain a NUL character"),
        ({"a": ["ok", {"b": "\ud800"}]}, "m.a[1].b: contains a lone surrogate (not valid Unicode)"),
        ({"\x00": 1}, "m: must not contain a NUL character"),
        ({"k\udfff": 1}, "m: contains a lone surrogate (not valid Unicode)"),
        ("\x00", "m: must not contain a NUL character"),
    ],
)
def test_the_first_unstorable_place_is_named(value, found):
    assert unstorable("m", value) == found


@pytest.mark.parametrize(
    "value",
    [
        {"note": "\\u0000 is how JSON writes a NUL"},  # a backslash, then u0000: ordinary text
        {"pattern": "^[^\\u0000]*$"},
        {"emoji": "😀", "n": 1, "f": 1.5, "b": True, "none": None, "list": [[], {}]},
        {},
        "",
    ],
)
def test_ordinary_json_is_storable(value):
    assert unstorable("m", value) is None


def test_a_deep_value_is_walked_to_its_end():
    deep: object = "\x00"
    for _ in range(200):
        deep = {"k": deep}
    assert unstorable("m", deep) == "m" + ".k" * 200 + ": must not contain a NUL character"
