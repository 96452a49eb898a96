"""Phases 1 and 3 of a tool call: prepare it (parse, validate, preview) and execute it.

Pure functions of a registry, a call and a `ToolContext`; neither ever raises. A
tool failure becomes data for the model ("Error: ..."), never a crash of the loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from app.settings import TOOL_POOL_SIZE
from app.tools import images
from app.tools.base import Preparation, ToolContext, ToolOutcome
from app.tools.registry import TASK, Registry
from app.tools.truncation import truncate

log = logging.getLogger(__name__)

MAX_NAME_IN_ERROR = 80  # a model can invent a name of any length

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class PreparedCall:
    """One prepared call, as stored between the prepare and execute phases."""

    call_id: str
    func_name: str
    args: dict[str, Any] = field(default_factory=dict)
    header: str = ""
    preview: str = ""
    needs_approval: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreparedCall:
        return cls(
            call_id=data["call_id"],
            func_name=data["func_name"],
            args=dict(data.get("args") or {}),
            header=data.get("header", ""),
            preview=data.get("preview", ""),
            needs_approval=bool(data.get("needs_approval", False)),
            error=data.get("error"),
        )


class ArgumentsError(ValueError):
    """The raw arguments cannot be turned into an argument object."""


def parse_arguments(raw: str | None, primary_key: str) -> dict[str, Any]:
    """The argument object from the model's raw text.

    A bare string that is not JSON (`ls -la`), a JSON string, or a bare word
    that JSON reads as a number, boolean or null (`bash("true")`,
    `search("404")`) becomes `{primary_key: string}`. Text that tries to be an
    object or array but is broken cannot be rescued that way: it would become
    a wrong argument.
    """
    text = (raw or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if text[0] in "{[":
            value = _leading_object(text, exc)
        else:
            return {primary_key: raw}
    if isinstance(value, str):
        return {primary_key: value}
    if value is None or isinstance(value, (bool, int, float)):
        return {primary_key: text}
    if not isinstance(value, dict):
        raise ArgumentsError(f"arguments must be a JSON object, not {type(value).__name__}")
    return value


def _leading_object(text: str, error: json.JSONDecodeError) -> Any:
    # Models sometimes add a stray brace or a remark after a complete object.
    try:
        value, _end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        raise ArgumentsError(f"arguments are not valid JSON ({error}); send one JSON object") from None
    return value


def prepare_call(
    registry: Registry, call_id: str, name: str, raw_arguments: str | None, ctx: ToolContext
) -> PreparedCall:
    """Phase 1: a prepared call, or an error item that will not be executed."""
    shown = name if len(name) <= MAX_NAME_IN_ERROR else name[:MAX_NAME_IN_ERROR] + "..."

    def error_item(message: str, args: dict[str, Any] | None = None) -> PreparedCall:
        return PreparedCall(call_id, name, args or {}, header=shown, error=message)

    if not registry.is_offered(name, ctx.kind):
        offered = ", ".join(registry.offered_names(ctx.kind)) or "none"
        return error_item(f"Unknown tool: {shown}. Available tools: {offered}")
    try:
        args = parse_arguments(raw_arguments, registry.primary_key_map[name])
    except ArgumentsError as exc:
        return error_item(f"Error: {name}: {exc}")
    if unknown := _unknown_arguments(registry, name, args, ctx.kind):
        return error_item(unknown, args)
    try:
        prep = registry.handler(name).prepare(args, ctx)
        if not isinstance(prep, Preparation):
            raise TypeError(f"prepare() returned {type(prep).__name__}, not a Preparation")
    except Exception as exc:  # the tool boundary: a handler bug is a result, not a crash
        log.exception("preparing %s call %s failed", name, call_id)
        return error_item(f"Error: could not prepare {name}: {exc}", args)
    if prep.error is not None:
        return PreparedCall(call_id, name, prep.args, prep.header, prep.preview, False, prep.error)
    return PreparedCall(
        call_id, name, prep.args, prep.header, prep.preview, _needs_approval(registry, name, prep, ctx), None
    )


def _unknown_arguments(registry: Registry, name: str, args: dict[str, Any], kind: str) -> str | None:
    """An error naming arguments the tool does not take: dropping them quietly could
    change what the call does (a `cwd` for bash would be ignored, and the command run
    elsewhere than the model meant)."""
    definition = registry.definition(name)
    unknown = definition.unknown_arguments(args, kind) if definition is not None else []
    if definition is None or not unknown:
        return None
    takes = ", ".join(definition.parameters_for(kind).get("properties", {}))
    return f"Error: {name} does not take {', '.join(map(repr, unknown))}; it takes: {takes}"


def _needs_approval(registry: Registry, name: str, prep: Preparation, ctx: ToolContext) -> bool:
    # A task sub-agent skips confirmation for TASK_AUTO_TOOLS (the schema's
    # auto_approve), even where an interactive session would ask (web_fetch).
    if ctx.kind == TASK and name in registry.task_auto_tools:
        return False
    return prep.needs_approval


def execute_call(registry: Registry, call: PreparedCall, ctx: ToolContext) -> ToolOutcome:
    """Phase 3: run an approved call; error items return their error unexecuted."""
    if call.error is not None:
        return ToolOutcome(call.error, is_error=True)
    if not registry.has_handler(call.func_name):
        return ToolOutcome(f"Unknown tool: {call.func_name}", is_error=True)
    try:
        outcome = registry.handler(call.func_name).execute(call.args, ctx)
    except Exception as exc:  # the tool boundary
        log.exception("executing %s call %s failed", call.func_name, call.call_id)
        return ToolOutcome(f"Error: {exc}", is_error=True)
    if images.image_content(outcome.output) is not None:
        # Cut in half, an image would be neither image nor text; the marker's own cap bounds it.
        return outcome
    output = truncate(outcome.output, ctx.settings.truncation)
    return ToolOutcome(output, outcome.is_error)


def run_calls(items: Sequence[T], fn: Callable[[T], R], max_workers: int = TOOL_POOL_SIZE) -> list[R]:
    """`fn` over `items`, results in input order: one runs on this thread, several
    on a pool."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items))) as pool:
        return list(pool.map(fn, items))
