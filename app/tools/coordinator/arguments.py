"""What the coordinator tools share: their arguments checked, and a call run against the
coordinator's reach with its answer as JSON (a refusal as an `Error:` result)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from app.errors import ServiceError, check_text
from app.settings import MAX_ID_CHARS, MAX_NAME_CHARS
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

MAX_PROMPT_CHARS = 100_000  # a child's task, as task_agent's: long material goes in a file
HEADER_CHARS = 100


class ArgumentError(ValueError):
    """An argument the tool cannot take; its text is the call's result."""


def text(args: dict[str, Any], key: str, max_chars: int, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise ArgumentError(f"'{key}' is required")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise ArgumentError(f"'{key}' must be a non-empty string")
    try:
        check_text(key, value, max_chars)
    except ServiceError as exc:
        raise ArgumentError(exc.message) from None
    return value


def ws_id(args: dict[str, Any], key: str = "ws_id", required: bool = True) -> str | None:
    return text(args, key, MAX_ID_CHARS, required)


def name(args: dict[str, Any], key: str = "name") -> str | None:
    return text(args, key, MAX_NAME_CHARS)


def choice(
    args: dict[str, Any], key: str, allowed: tuple[str, ...], default: str | None = None
) -> str | None:
    value = args.get(key)
    if value is None:
        value = default
    if value is not None and value not in allowed:
        raise ArgumentError(f"'{key}' must be one of {', '.join(allowed)}")
    return value


def prepared(
    tool: str,
    args: dict[str, Any],
    check: Callable[[dict[str, Any]], dict[str, Any]],
    needs_approval: bool,
    subject: Callable[[dict[str, Any]], str] = lambda a: str(a.get("ws_id", "")),
) -> Preparation:
    """The checked arguments (`check`), or the refusal naming the argument at fault."""
    try:
        checked = check(args)
    except ArgumentError as exc:
        return Preparation(dict(args), tool, needs_approval=False, error=f"Error: {tool}: {exc}")
    said = " ".join(str(subject(checked)).split())
    header = f"{tool} {said[:HEADER_CHARS]}{'…' if len(said) > HEADER_CHARS else ''}".rstrip()
    return Preparation(checked, header, preview=json.dumps(checked, indent=1), needs_approval=needs_approval)


def run(tool: str, ctx: ToolContext, action: Callable[[Any], dict[str, Any]]) -> ToolOutcome:
    if ctx.coordination is None:
        return ToolOutcome(f"Error: {tool} works only in a coordinator workstream", is_error=True)
    try:
        return ToolOutcome(json.dumps(action(ctx.coordination), indent=1, ensure_ascii=False))
    except ServiceError as exc:
        return ToolOutcome(f"Error: {exc.message}", is_error=True)
