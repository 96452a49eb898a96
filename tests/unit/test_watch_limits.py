"""stop_on's limits: what an expression would build or make Python visit is measured before the
operation runs, so a hostile expression is refused in well under a second, having built nothing
big, at create time (before anyone is asked) and at every poll."""

from __future__ import annotations

import random
import time
import tracemalloc

import pytest

from app.watches.conditions import LimitError, PollResult, evaluate, validate
from app.watches.limits import MAX_VALUE_LENGTH
from app.watches.sizes import case_mapped_length, extent, printed_length

EMPTY = PollResult("", 0, None)
HELLO = PollResult("hello", 0, None)
QUICK = 5  # seconds: each takes well under one on an idle machine; the rest is room for a busy one
LARGEST = 9 * MAX_VALUE_LENGTH  # bytes: a list at the length limit takes 8 an element


def refusal(expression: str, result: PollResult) -> tuple[str, float]:
    """The LimitError's message and the seconds it took."""
    started = time.monotonic()
    with pytest.raises(LimitError) as refused:
        evaluate(expression, result)
    return str(refused.value), time.monotonic() - started


def peak_bytes(expression: str, result: PollResult) -> int:
    """The most memory allocated at once while the expression is evaluated (and refused)."""
    tracemalloc.start()
    try:
        with pytest.raises(LimitError):
            evaluate(expression, result)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("str([[[0] * 200] * 200] * 200)", EMPTY),  # 24 million characters printed
        ("str([output] * 999999) if output else False", HELLO),  # harmless on the empty trial
        ("str(['x', ('y',), 1.5, None, output] * 200000)", HELLO),
        ("('\u0390' * 999999).upper()", EMPTY),  # each character upper-cases to three
        ("(' ' * 1000000).split(' ')", EMPTY),  # a million and one pieces
        ("'\u20ac' * 999999 + output", HELLO),
    ],
)
def test_what_a_builtin_method_or_operator_would_build_is_refused_before_it_is_built(expression, result):
    message, seconds = refusal(expression, result)
    assert message == "stop_on would build a value longer than 1,000,000" and seconds < QUICK
    assert peak_bytes(expression, result) < LARGEST


@pytest.mark.parametrize(
    "expression",
    [
        "[[[[0] * 200] * 200] * 200] * 200 == [[[[0] * 200] * 200] * 200] * 200",
        "[[[[0] * 200] * 200] * 200] * 200 in [[[[[0] * 200] * 200] * 200] * 200]",
        "sorted([[[[[0] * 200] * 200] * 200] * 200, [[[[0] * 200] * 200] * 200] * 200]) != []",
        "max([[[[0] * 200] * 200] * 200] * 200, [[[[0] * 200] * 200] * 200] * 200) != 0",
        "[[[[[0] * 200] * 200] * 200] * 200].count([[[[0] * 200] * 200] * 200] * 200)",
        "isinstance(0, ((((list,) * 100,) * 100,) * 100,) * 100)",
        "dict([[((((0,) * 200,) * 200,) * 200,) * 200, 1]])",
        "dict([[1, 2]]).get(((((0,) * 200,) * 200,) * 200,) * 200)",
        "dict([[1, ((((0,) * 200,) * 200,) * 200,) * 200]]).items() - []",
    ],
)
def test_a_comparison_hash_or_sort_of_a_huge_shared_value_is_refused_at_once(expression):
    message, seconds = refusal(expression, EMPTY)
    assert message == "stop_on would compare, hash or search a value of more than 1,000,000 parts"
    assert seconds < QUICK


def test_strip_with_a_huge_set_of_characters_is_refused():
    message, seconds = refusal("('\U0001f600' * 99999).strip('b' * 99999 + '\U0001f600')", EMPTY)
    assert "strip() would look up 99,999 characters among 100,000" in message and seconds < QUICK


def test_the_audits_expressions_are_refused_at_create_time_or_at_the_poll():
    """The audit's `[[[0] * 999] * 999] * 999` prints 3 billion characters; `* 300` prints 81
    million, which the code before the limits built (it is run without them, once)."""
    started = time.monotonic()
    with pytest.raises(LimitError, match="would build"):
        validate("len(str([[[0] * 300] * 300] * 300)) > 0")  # before anyone is asked to approve
    assert time.monotonic() - started < QUICK
    validate("str([output] * 999999) if output else False")  # harmless on an empty trial output
    message, seconds = refusal("str([output] * 999999) if output else False", HELLO)
    assert "would build" in message and seconds < QUICK


def test_one_evaluation_does_a_bounded_amount_of_work_however_it_repeats_itself():
    repeated = " and ".join(["str([[0, ''] * 100] * 1000)"] * 13)  # each well within the limits
    message, seconds = refusal(repeated, EMPTY)
    assert message == "stop_on does too much work in one poll (over 2,000,000 parts); simplify it"
    assert seconds < QUICK


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("str(data) == \"{'a': [1, 'x', None]}\"", True),
        ("len(str([output] * 1000)) == 9000", True),
        ("sorted(output.split()) == ['a', 'b', 'c']", True),
        ("'-'.join(output.split()) == 'c-a-b'", True),
        ("output.upper().lower() == output", True),
        ("output.strip('cab ') == ''", True),
    ],
)
def test_ordinary_expressions_are_still_allowed(expression, expected):
    given = (
        PollResult("c a b", 0, None)
        if "data" not in expression
        else PollResult('{"a": [1, "x", null]}', 0, None)
    )
    assert evaluate(expression, given) is expected


# -- the measures -------------------------------------------------------------------------------

TEXTS = ["", "a", "it's", 'say "hi"', "both ' and \"", "back\\slash", "\x00\x01\t\n\x7f", "é", "\ud800",
         "\U0001f600", "'\"\x00é\\"]  # fmt: skip
SCALARS = [*TEXTS, 0, -12, 10**50, True, False, None, 1.5, float("inf"), float("nan"), len, str, list]


def shape(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice(SCALARS)
    if roll < 0.6:
        return [shape(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if roll < 0.75:
        return tuple(shape(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    keys = ["k", "'", 1, (1, "\x00"), None]
    made = {rng.choice(keys): shape(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return rng.choice([made, made.keys(), made.values(), made.items()])


def test_printed_length_is_what_str_prints_and_stops_past_its_limit():
    rng = random.Random(7)
    for value in [*SCALARS, *(shape(rng) for _ in range(2000))]:
        printed = len(str(value))
        assert printed_length(value, 10**9) == printed, value
        assert printed_length(value, printed) == printed
        if printed:
            assert printed_length(value, printed - 1) > printed - 1
    for text in ("é" * 70000 + "'\"", "\x00" * 70000, "a'" * 40000 + '"', "\ud800x" * 40000):
        for value in (text, [text], (text, 1)):
            assert printed_length(value, 10**9) == len(str(value))


def test_extent_counts_shared_parts_each_time_and_stops_past_its_limit():
    assert extent([[0] * 3] * 2, 100) == 1 + 2 * (1 + 3)
    assert extent(("ab", {"k": [1]}), 100) == 1 + 2 + 1 + 1 + 1 + 1  # a text: its characters
    assert extent("x" * MAX_VALUE_LENGTH, MAX_VALUE_LENGTH) == MAX_VALUE_LENGTH
    started = time.monotonic()
    assert extent([[[[0] * 999] * 999] * 999] * 999, MAX_VALUE_LENGTH) > MAX_VALUE_LENGTH
    assert time.monotonic() - started < QUICK


@pytest.mark.parametrize("method", ["lower", "upper", "casefold", "title", "capitalize"])
def test_a_case_mappings_length_is_bounded_before_it_is_mapped(method):
    for text in ("\u00df" * 400000, "\u0390a" * 200000, "\ufb01 x" * 150000, "\u0130" * 400000, "abc"):
        measured, mapped = case_mapped_length(text, method, MAX_VALUE_LENGTH), len(getattr(text, method)())
        assert measured >= mapped
        if mapped <= MAX_VALUE_LENGTH < measured:
            assert measured - mapped <= 4 * (len(text) // 65536 + 1)  # title()'s allowance per piece
