"""stop_on: what an expression may say, what it evaluates to, and what hostile ones get."""

from __future__ import annotations

import time

import pytest

from app.watches.conditions import (
    MAX_EXPRESSION_CHARS,
    ConditionError,
    LimitError,
    PollResult,
    check,
    evaluate,
    validate,
)

MERGED = PollResult('{"state": "MERGED", "mergedAt": "2026-12-03", "checks": [1, 2]}', 0, None)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('data["state"] == "MERGED"', True),
        ('data["state"] == "OPEN"', False),
        ('"error" in output', False),
        ("exit_code != 0", False),
        ('changed and "ready" in output.lower()', False),
        ('data.get("mergedAt") is not None', True),
        ('data.get("closedAt") is None', True),
        ("len(data['checks']) >= 2 and all(data['checks'])", True),
        ("isinstance(data, dict) and isinstance(data['checks'], list)", True),
        ("max(data['checks']) + min(data['checks']) == 3", True),
        ("sorted(data['checks'], reverse=True)[0] == 2", True),
        ("output.startswith('{') and output[-1:] == '}'", True),
        ("prev_output is None", True),
        ("int('42') * 2 == 84 and abs(-3) == 3 and float('1.5') > 1", True),
        ("any([exit_code, False]) or not bool(0)", True),
        ("'MERGED' if changed else 'x'", True),  # a non-empty string is true
        ("str(exit_code) in ('0', '1')", True),
        ("2 ** 10 == 1024", True),
        ('data.get("pr", {}).get("state") is None', True),  # a dict literal, as a default
        ('{"a": 1, "b": [2]}["b"][0] == 2 and {} == {}', True),
    ],
)
def test_expressions_of_the_spec_and_its_builtins(expression, expected):
    assert evaluate(expression, MERGED) is expected


def test_changed_compares_with_the_previous_poll():
    assert evaluate("changed", PollResult("b", 0, "a")) is True
    assert evaluate("changed", PollResult("a", 0, "a")) is False
    assert evaluate("changed", PollResult("a", 0, None)) is False  # the first poll has nothing to differ from
    assert evaluate("data is None", PollResult("not json", 0, None)) is True


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os')", "may not call '__import__'"),
        ("__import__('os').system('id')", "may not use the attribute 'system'"),
        ("output.__class__", "attribute '__class__'"),
        ("().__class__.__bases__[0].__subclasses__()", "attribute"),
        ("data.get.__self__", "attribute '__self__'"),
        ("output.lower", "only as a method call"),
        ("lambda: 1", "lambda"),
        ("[c for c in output]", "comprehensions"),
        ("{c: 1 for c in output}", "comprehensions"),
        ("any(c for c in output)", "generator expressions"),
        ("(x := 1)", "assignment"),
        ("f'{output}'", "f-strings"),
        ("'{0.__class__}'.format(output)", "attribute 'format'"),
        ("open('/etc/passwd')", "may not call 'open'"),
        ("eval('1')", "may not call 'eval'"),
        ("exec('1')", "may not call 'exec'"),
        ("getattr(output, 'upper')", "may not call 'getattr'"),
        ("getattr(output, 'upper')()", "may call only the safe functions"),
        ("globals()", "may not call 'globals'"),
        ("os", "may not use the name 'os'"),
        ("max(output, key=len)", "keyword arguments"),
        ("len(*output)", "unpack"),
        ("{**data}", "unpack a dict"),
        ("{'a': 1, **data}", "unpack a dict"),
        ("{{1}: 1}", "set literals"),
        ("{[1]: 1}", "dict keys must be"),
        ("output = 1", "not a valid expression"),
        ("import os", "not a valid expression"),
        ("", "non-empty"),
    ],
)
def test_anything_else_is_refused_at_create_time_with_the_reason(expression, reason):
    with pytest.raises(ConditionError) as refused:
        validate(expression)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    "expression",
    [
        "2 ** 10 ** 10",
        "10 ** 5000 > 1",
        "'a' * 10 ** 10",
        "[0] * 10 ** 9",
        "10 ** 9 * 'ab'",
        "('a' * 999999).join(['x', 'y', 'z'])",
        "('x' * 500000).replace('x', 'yyyy')",
    ],
)
def test_huge_numbers_and_strings_are_refused_without_being_built(expression):
    started = time.monotonic()
    with pytest.raises(LimitError):
        validate(expression)
    assert time.monotonic() - started < 1


def test_a_dict_literals_key_is_hashed_only_within_the_bounds():
    # a small shared structure whose hash would visit 8,000,000 parts: refused, never hashed
    with pytest.raises(LimitError, match="compare, hash or search"):
        validate("len({(((0,) * 200,) * 200,) * 200: 1}) == 1")


def test_a_bound_that_depends_on_the_output_is_enforced_at_poll_time():
    validate("output * 100000 == ''")  # fine on an empty poll
    big = PollResult("x" * 1000, 0, None)
    with pytest.raises(LimitError):
        evaluate("output * 100000 == ''", big)


@pytest.mark.parametrize(
    "expression",
    ["(" * 300 + "1" + ")" * 300, "[" * 300 + "]" * 300, "not " * 240 + "True", "-" * 900 + "1"],
)
def test_deep_nesting_is_refused_or_evaluated_never_a_crash(expression):
    try:
        validate(expression)
    except ConditionError:
        return
    assert evaluate(expression, MERGED) in (True, False)


def test_long_and_binary_expressions_are_refused():
    with pytest.raises(ConditionError, match=f"the limit is {MAX_EXPRESSION_CHARS}"):
        check("1 == 1 and " * 200 + "True")
    with pytest.raises(ConditionError, match="NUL"):
        check("output == '\x00'")
    with pytest.raises(ConditionError):
        check("b'bytes' in output")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ('data["state"]', "not NoneType"),  # data is None: the output was not JSON
        ("output[10**6]", "IndexError"),
        ("1 / 0", "ZeroDivisionError"),
        ("int('x')", "ValueError"),
        ("int('9' * 5000) > 0", "ValueError"),  # past Python's digit limit
        ("output.count()", "TypeError"),
        ("exit_code.real", "attribute 'real'"),
        ("len(1)", "TypeError"),
    ],
)
def test_a_failure_on_real_output_is_an_error_naming_it(expression, message):
    with pytest.raises(ConditionError) as failed:
        evaluate(expression, PollResult("plain text", 0, None))
    assert message in str(failed.value)


def test_methods_are_checked_against_the_receivers_type():
    with pytest.raises(ConditionError, match=r"may not call .get\(\) on a str"):
        evaluate("output.get('x')", MERGED)
    with pytest.raises(ConditionError, match=r"may not call .join\(\) on a type"):
        evaluate("str.join('', [])", MERGED)
    assert evaluate("data.keys() and 'state' in list(data.keys())", MERGED) is True
