"""The watch tool: create (needs approval, as bash does: it runs commands), list and cancel a
workstream's watches. The polling itself is beat's (app/watches/poller.py)."""

from __future__ import annotations

from typing import Any

from app.events import EventType
from app.settings import MAX_NAME_CHARS
from app.storage.types import storable
from app.tools.bash import blocked_pattern, sanitized
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.watches import store
from app.watches.conditions import ConditionError, validate
from app.watches.intervals import IntervalError, describe, parse_interval
from app.watches.store import WatchError, WatchSpec

WATCH_DEFAULT_INTERVAL = "5m"
WATCH_DEFAULT_MAX_POLLS = 100
WATCH_MAX_POLLS = 10_000  # the most a model may ask for

ACTIONS = ("create", "list", "cancel")
HEADER_CHARS = 120


class _Refused(ValueError):
    pass


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    action = args.get("action")
    if action not in ACTIONS:
        shown = repr(action)[:40]
        return _refusal(args, f"Error: watch 'action' must be one of {', '.join(ACTIONS)}, not {shown}")
    try:
        if action == "create":
            return _prepare_create(args, ctx)
        if action == "cancel":
            ref = _text(args, "name", "the watch's name or id prefix", MAX_NAME_CHARS)
            return Preparation({"action": "cancel", "name": ref}, f"watch cancel {ref}", needs_approval=False)
    except _Refused as exc:
        return _refusal(args, str(exc))
    return Preparation({"action": "list"}, "watch list", needs_approval=False)


def _prepare_create(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    command = sanitized(_text(args, "command", "the shell command to poll", None))
    name = _text(args, "name", "a short name for the watch", MAX_NAME_CHARS)
    try:
        seconds = parse_interval(args.get("poll_every") or WATCH_DEFAULT_INTERVAL)
    except IntervalError as exc:
        raise _Refused(f"Error: {exc}") from None
    stop_on = args.get("stop_on")
    if stop_on is not None and stop_on != "":
        stop_on = _text(args, "stop_on", "an expression", None)
        try:
            validate(stop_on)
        except ConditionError as exc:
            raise _Refused(f"Error: {exc}") from None
    else:
        stop_on = None
    max_polls = _max_polls(args.get("max_polls"))
    spec = WatchSpec(name, command, seconds, stop_on, max_polls)
    clean: dict[str, Any] = {"action": "create", "name": name, "command": command}
    clean["poll_every"] = describe(seconds)
    clean.update({"stop_on": stop_on, "max_polls": max_polls})
    header = f"watch {name}: $ {_first_line(command)}"
    pattern = blocked_pattern(command)
    if pattern:
        return Preparation(clean, header, command, needs_approval=False, error=_blocked(pattern))
    if ctx.db is not None:
        _check_limits(ctx, spec)
    return Preparation(clean, header, _preview(spec), needs_approval=True)


def _blocked(pattern: str) -> str:
    return f"Blocked: command matches dangerous pattern '{pattern}'"


def _check_limits(ctx: ToolContext, spec: WatchSpec) -> None:
    """The limits as they stand now, so that a refused create never asks anyone; execute
    checks them again (another create may have come first)."""
    assert ctx.db is not None
    with ctx.db.reader() as s:
        active = store.active_watches(s, ctx.ws_id)
    try:
        store.check_room(active, spec.name)
    except WatchError as exc:
        raise _Refused(str(exc)) from None


def _text(args: dict[str, Any], key: str, what: str, limit: int | None) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _Refused(f"Error: watch {args.get('action')} needs '{key}' ({what}) as a non-empty string")
    if key != "command" and "\x00" in value:  # bash drops a command's NULs; elsewhere they mean harm
        raise _Refused(f"Error: '{key}' must not contain a NUL character")
    if storable(value.replace("\x00", "")) != value.replace("\x00", ""):
        raise _Refused(f"Error: '{key}' contains a lone surrogate (not valid Unicode)")
    value = value.strip() if key == "name" else value
    if limit is not None and len(value) > limit:
        raise _Refused(f"Error: '{key}' is {len(value)} characters; the limit is {limit}")
    return value


def _max_polls(value: Any) -> int:
    if value is None:
        return WATCH_DEFAULT_MAX_POLLS
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise _Refused(f"Error: 'max_polls' must be a whole number from 1 to {WATCH_MAX_POLLS}")
    if not 1 <= value <= WATCH_MAX_POLLS:
        raise _Refused(f"Error: 'max_polls' must be from 1 to {WATCH_MAX_POLLS}, not {int(value)}")
    return int(value)


def _first_line(command: str) -> str:
    lines = command.strip().splitlines() or [""]
    first = lines[0][:HEADER_CHARS] + ("..." if len(lines[0]) > HEADER_CHARS else "")
    return first + (" ..." if len(lines) > 1 else "")


def _preview(spec: WatchSpec) -> str:
    until = f"until {spec.stop_on}" if spec.stop_on else "until its output changes"
    return f"{spec.command}\n(every {describe(spec.poll_every)}, {until}, at most {spec.max_polls} polls)"


def _refusal(args: dict[str, Any], message: str) -> Preparation:
    return Preparation(dict(args), "watch", needs_approval=False, error=message)


# -- execute --------------------------------------------------------------------------------


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None:
        return ToolOutcome("Error: watches need the service's storage", True)
    try:
        if args["action"] == "create":
            return _create(args, ctx)
        if args["action"] == "cancel":
            return _cancel(args["name"], ctx)
    except WatchError as exc:
        return ToolOutcome(str(exc), True)
    return ToolOutcome(_list(ctx))


def _create(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    assert ctx.db is not None
    spec = WatchSpec(
        args["name"], args["command"], parse_interval(args["poll_every"]), args["stop_on"], args["max_polls"]
    )
    watch = store.create(ctx.db, ctx.ws_id, spec, created_by=ctx.call_id)
    ctx.publish(EventType.WATCH, {"watch": store.summary(watch)})
    until = f"`{spec.stop_on}` is true" if spec.stop_on else "its output changes"
    return ToolOutcome(
        f"Watch {spec.name!r} created (id {watch.id[:8]}): `{spec.command}` runs now and then every "
        f"{describe(spec.poll_every)}, up to {spec.max_polls} times, until {until}. Its result will "
        "arrive later as a message in this conversation; you need not wait for it."
    )


def _cancel(ref: str, ctx: ToolContext) -> ToolOutcome:
    assert ctx.db is not None
    watch = store.find_active(ctx.db, ctx.ws_id, ref)
    ended = store.cancel(ctx.db, watch.id)
    if ended is None:
        return ToolOutcome(f"Watch {watch.name!r} had already ended", True)
    ctx.publish(EventType.WATCH, {"watch": store.summary(ended)})
    return ToolOutcome(f"Watch {watch.name!r} (id {watch.id[:8]}) cancelled after {ended.polls} polls.")


def _list(ctx: ToolContext) -> str:
    assert ctx.db is not None
    with ctx.db.reader() as s:
        active = store.active_watches(s, ctx.ws_id)
    if not active:
        return "No active watches in this workstream."
    lines = [f"{len(active)} active watch{'es' if len(active) > 1 else ''}:"]
    for w in active:
        until = f"stop_on: {w.stop_on}" if w.stop_on else "until its output changes"
        lines.append(
            f"- {w.name} (id {w.id[:8]}): `{w.command}` every {describe(w.poll_every)}, "
            f"{w.polls}/{w.max_polls} polls, {until}"
            + (f" [last poll: {w.last_error}]" if w.last_error else "")
        )
    return "\n".join(lines)
