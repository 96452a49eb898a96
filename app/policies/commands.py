"""`turnstone-jobs policy list | add | delete`: the admin's tool policy rules from the command
line, written to the database the service reads at every model step (no restart)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.errors import ServiceError, check_text
from app.policies import store
from app.policies.rules import Effect
from app.users.principal import OPERATOR_NAME
from app.users.store import Store


def add_parsers(sub: Any) -> None:
    policy = sub.add_parser("policy", help="manage tool policy rules (docs/policies.md)").add_subparsers(
        dest="policy_command", required=True
    )
    policy.add_parser("list", help="list the rules, oldest first")
    add = policy.add_parser("add", help="add a rule")
    add.add_argument("effect", choices=[e.value for e in Effect])
    add.add_argument("tool", help="a glob on the tool's name: bash, mcp__git__*, web_*")
    add.add_argument("--command", dest="pattern", help="a glob on the call's command: 'git push*'")
    scope = add.add_mutually_exclusive_group()
    scope.add_argument("--user", help="only this user's workstreams (default: everyone's)")
    scope.add_argument("--group", help="only the workstreams of this group's members (`user groups`)")
    add.add_argument("--reason", help="said to the model when the rule denies a call")
    delete = policy.add_parser("delete", help="delete a rule by its id (see `policy list`)")
    delete.add_argument("rule_id")


def run(rt: Store, args: argparse.Namespace) -> int:
    """The parsed command; a refusal is one line on stderr and exit status 1."""
    try:
        if args.policy_command == "list":
            for rule in store.list_all(rt.db):
                print(_line(rule))
        elif args.policy_command == "add":
            given = {"command": args.pattern, "user": args.user, "group": args.group, "reason": args.reason}
            for name, value in (("tool", args.tool), *given.items()):
                if value is not None:  # from argv: a byte that is not UTF-8 is a lone surrogate
                    check_text(name, value, None)
            rule = store.create(rt.db, args.effect, args.tool, created_by=OPERATOR_NAME, **given)
            print(f"added {_line(rule)}")
        else:
            check_text("rule id", args.rule_id, 64)
            store.delete(rt.db, args.rule_id)
            print(f"deleted policy rule {args.rule_id}")
    except ServiceError as exc:
        print(f"turnstone-jobs: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _line(rule: dict[str, Any]) -> str:
    command = f'\tcommand "{rule["command"]}"' if rule["command"] else "\t-"
    reason = f"\t{rule['reason']}" if rule["reason"] else ""
    scope = rule["user"] or (f"group {rule['group']}" if rule.get("group") else "everyone")
    return f"{rule['id']}\t{rule['effect']}\t{rule['tool']}{command}\t{scope}{reason}"
