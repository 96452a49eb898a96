"""Which rule decides a call, and what is recorded of it.

A rule matches a call when its tool glob matches the tool's name and, if it has a command glob,
the call has a `command` argument that matches: a deny or ask rule when the whole command or any
of its simple commands matches (`rm -rf /*` catches `cd /tmp && rm -rf /`), an allow rule only
when every simple command does (`git status*` must not allow `git status; rm -rf ~`).

Precedence: a user's own rules come before their groups', and those before everyone's (an admin
may trust one person or one team more, or less, than the rest); among the rules of one scope
that match, deny beats ask beats allow, and among equals the oldest is the one recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.policies import patterns
from app.policies.patterns import Glob


class Effect(StrEnum):
    ALLOW = "allow"  # runs without a person, whatever the tool or workstream would ask
    DENY = "deny"  # never runs; the model is told which rule refused it
    ASK = "ask"  # waits for a person, even under auto-approve or "always"


_STRICTNESS = {Effect.DENY: 0, Effect.ASK: 1, Effect.ALLOW: 2}
DECIDED_BY = "policy"  # a call a rule decided is stored as decided by this, how `RULE_HOW`
RULE_HOW = "rule"


@dataclass(frozen=True)
class Rule:
    id: str
    effect: Effect
    tool: Glob
    command: Glob | None
    user_id: str | None
    reason: str | None
    user: str | None = None  # the user's name, for the record
    group: str | None = None  # a group's rule: the group's name

    def matches(self, func_name: str, args: Any) -> bool:
        if not self.tool.matches(func_name):
            return False
        if self.command is None:
            return True
        command = args.get("command") if isinstance(args, dict) else None
        if not isinstance(command, str):
            return False
        parts = patterns.simple_commands(command)
        if self.effect == Effect.ALLOW:
            short = len(command) <= patterns.MAX_ALLOWED_COMMAND_CHARS
            return short and bool(parts) and all(self.command.matches(p) for p in parts)
        return self.command.matches(patterns.normal(command)) or any(self.command.matches(p) for p in parts)

    def describe(self) -> str:
        """The rule in a line, as the model and a person read it."""
        said = f"{self.effect} {self.tool.text}"
        if self.command is not None:
            said += f' command "{self.command.text}"'
        if self.user is not None:
            said += f" for {self.user}"
        if self.group is not None:
            said += f" for group {self.group}"
        return said

    def record(self) -> dict[str, Any]:
        """What a call stores of the rule that decided it (ToolCall.policy_rule)."""
        return {
            "id": self.id,
            "effect": str(self.effect),
            "tool": self.tool.text,
            "command": self.command.text if self.command is not None else None,
            "user": self.user,
            "group": self.group,
            "reason": self.reason,
        }


def denial_text(rule: Rule) -> str:
    text = f"Denied by policy rule {rule.id} ({rule.describe()})"
    return f"{text}: {rule.reason}" if rule.reason else text


@dataclass(frozen=True)
class Book:
    """The rules that apply to one workstream's owner, oldest first (`load` in store.py)."""

    own: tuple[Rule, ...] = ()
    everyone: tuple[Rule, ...] = ()
    groups: tuple[Rule, ...] = ()  # the rules of the owner's groups

    def rule_for(self, func_name: str, args: Any) -> Rule | None:
        for scope in (self.own, self.groups, self.everyone):
            found = _strictest(r for r in scope if r.matches(func_name, args))
            if found is not None:
                return found
        return None


EMPTY = Book()


def _strictest(matching: Iterable[Rule]) -> Rule | None:
    best = None
    for rule in matching:  # oldest first: a later equal never replaces it
        if best is None or _STRICTNESS[rule.effect] < _STRICTNESS[best.effect]:
            best = rule
    return best


def is_asked(record: dict[str, Any] | None) -> bool:
    """Whether a call's stored rule makes it wait for a person (nothing else may decide it)."""
    return bool(record) and record.get("effect") == Effect.ASK  # type: ignore[union-attr]
