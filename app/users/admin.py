"""The operator's commands: `turnstone-jobs user ...`, `token ...` and `approve` (a decision
taken at the command line, recorded as such)."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import Any

from app.errors import ServiceError, check_text
from app.users import accounts, tokens
from app.users.passwords import PasswordError
from app.users.principal import OPERATOR_NAME
from app.users.store import Store
from app.web.requests import path_id


def add_parsers(sub: Any) -> None:
    user = sub.add_parser("user", help="manage users").add_subparsers(dest="user_command", required=True)
    create = user.add_parser("create", help="create a user; the password is asked for, or read from stdin")
    create.add_argument("name")
    create.add_argument("--admin", action="store_true", help="may see and steer every workstream")
    user.add_parser("list", help="list users")
    disable = user.add_parser("disable", help="refuse the user's sign-in and tokens from now on")
    disable.add_argument("name")
    enable = user.add_parser("enable", help="let a disabled user sign in again; their live tokens work again")
    enable.add_argument("name")
    groups = user.add_parser("groups", help="set the groups a user belongs to (all of them; none: no groups)")
    groups.add_argument("name")
    groups.add_argument("groups", nargs="*", help="group names; a group's policy rules apply to its members")

    token = sub.add_parser("token", help="manage API tokens").add_subparsers(
        dest="token_command", required=True
    )
    tcreate = token.add_parser("create", help="create a token for a user; it is printed once")
    tcreate.add_argument("user")
    tcreate.add_argument(
        "--scopes", help="comma-separated: read,write,approve,admin (default: all the user may have)"
    )
    tcreate.add_argument("--expires", help="a lifetime such as 30d, 12h or 90m (default: never)")
    tcreate.add_argument("--name", default="cli token", help="a label to tell tokens apart")
    tlist = token.add_parser("list", help="list tokens (never their secrets)")
    tlist.add_argument("--user", help="only this user's")
    revoke = token.add_parser("revoke", help="revoke a token by its id (see `token list`)")
    revoke.add_argument("token_id", type=int)

    approve = sub.add_parser("approve", help="decide the pending tool calls of a workstream")
    approve.add_argument("ws_id")
    approve.add_argument("--call", dest="call_id", help="only this call (default: every pending one)")
    approve.add_argument("--deny", action="store_true")
    approve.add_argument("--always", action="store_true", help="and approve this tool from now on")
    approve.add_argument("--feedback")
    approve.add_argument("--as", dest="as_user", help="the user recorded as deciding (default: operator)")


def run(rt: Store, args: argparse.Namespace) -> int:
    """Runs the parsed command; a refusal is one line on stderr and exit status 1."""
    handlers: dict[tuple[str, str | None], Callable[[Store, argparse.Namespace], None]] = {
        ("user", "create"): _user_create,
        ("user", "list"): _user_list,
        ("user", "disable"): _user_disable,
        ("user", "enable"): _user_enable,
        ("user", "groups"): _user_groups,
        ("token", "create"): _token_create,
        ("token", "list"): _token_list,
        ("token", "revoke"): _token_revoke,
        ("approve", None): _approve,
    }
    sub = getattr(args, f"{args.command}_command", None)
    try:
        handlers[(args.command, sub)](rt, args)
    except (ServiceError, PasswordError) as exc:
        print(f"turnstone-jobs: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 1
    return 0


def _read_password() -> str:
    if not sys.stdin.isatty():  # piped: the first line is the password
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Password: ")
    if getpass.getpass("Again: ") != first:
        raise PasswordError("the two passwords differ")
    return first


def _user_create(rt: Store, args: argparse.Namespace) -> None:
    user = accounts.create(rt, args.name.strip().lower(), _read_password(), is_admin=args.admin)
    print(f"created user {user.name}{' (admin)' if user.is_admin else ''}")


def _user_list(rt: Store, args: argparse.Namespace) -> None:
    for user in accounts.list_all(rt):
        flags = [f for f, on in (("admin", user.is_admin), ("disabled", user.disabled_at)) if on]
        groups = ",".join(user.groups or []) or "-"
        print(f"{user.name}\t{','.join(flags) or '-'}\t{groups}\t{user.created_at:%Y-%m-%d %H:%M}")


def _user_disable(rt: Store, args: argparse.Namespace) -> None:
    accounts.disable(rt, args.name.strip().lower())
    print(f"disabled user {args.name}")


def _user_enable(rt: Store, args: argparse.Namespace) -> None:
    accounts.set_disabled(rt, args.name.strip().lower(), False)
    print(f"enabled user {args.name}")


def _user_groups(rt: Store, args: argparse.Namespace) -> None:
    for name, value in (("name", args.name), *(("groups", g) for g in args.groups)):
        check_text(name, value, None)  # from argv: a byte that is not UTF-8 is a lone surrogate
    user = accounts.set_groups(rt, args.name.strip().lower(), args.groups)
    print(f"user {user.name}: groups {', '.join(user.groups or []) or '(none)'}")


def _token_create(rt: Store, args: argparse.Namespace) -> None:
    user = accounts.get(rt, args.user.strip().lower())
    scopes = tokens.requested_scopes(args.scopes) if args.scopes else None
    expires_in = tokens.parse_duration(args.expires) if args.expires else None
    raw, _ = tokens.create(rt, user, args.name, scopes, expires_in)
    print(raw)  # the one time it is seen: only its hash is stored


def _token_list(rt: Store, args: argparse.Namespace) -> None:
    user_id = accounts.get(rt, args.user.strip().lower()).id if args.user else None
    for t in tokens.list_for(rt, user_id):
        state = "active" if t["active"] else ("revoked" if t["revoked_at"] else "expired")
        expires = t["expires_at"] or "never"
        print(
            f"{t['token_id']}\t{t['user']}\t{t['name']}\t{','.join(t['scopes'])}\t{state}\texpires {expires}"
        )


def _token_revoke(rt: Store, args: argparse.Namespace) -> None:
    tokens.owner_of(rt, args.token_id)  # NotFoundError for an unknown id
    tokens.revoke(rt, args.token_id)
    print(f"revoked token {args.token_id}")


def _approve(store: Store, args: argparse.Namespace) -> None:
    """Needs the whole runtime: a decision publishes events and may enqueue the tool batch."""
    from app.engine.life import approvals
    from app.runtime import Runtime
    from app.web.commands import checked_feedback

    user = accounts.get(store, args.as_user.strip().lower()) if args.as_user else None
    if args.feedback:  # from argv: a byte that is not UTF-8 arrives as a lone surrogate
        check_text("feedback", args.feedback, None)
    rt = Runtime.create(store.settings)
    try:
        decision = approvals.Decision(
            approved=not args.deny,
            feedback=checked_feedback(rt, args.feedback),
            always=args.always,
            call_id=args.call_id,
            by=user.name if user else OPERATOR_NAME,
            by_id=user.id if user else None,
            via="cli",
        )
        result = approvals.decide(rt, path_id("workstream", args.ws_id), decision)
    finally:
        rt.close()
    verb = "denied" if args.deny else "approved"
    decided, pending = ", ".join(result.decided) or "nothing", ", ".join(result.pending) or "none"
    print(f"{verb}: {decided}; still pending: {pending}")
