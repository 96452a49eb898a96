"""Phases 1 and 3 of a tool call: prepare it (parse, validate, preview) and execute it.

Pure functions of a registry, a call and a `ToolContext`; neither ever raises. A
tool failure becomes data for the model ("Error: ..."), never a crash of the loop.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

from app.events import EventType
from app.nesting import is_too_deep
from app.tools.core import guard
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.tool import Tool
from app.tools.core.truncation import truncate
from app.tools.files import images

TOOL_POOL_SIZE = 4  # parallel calls of one batch

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


class ToolLookup(Protocol):
    """What prepare and execute resolve names with: the built-in registry, or a step's ToolSet."""

    def tool(self, name: str, kind: str) -> Tool | None: ...

    def offered_names(self, kind: str) -> list[str]: ...


class ArgumentsError(ValueError):
    """The raw arguments cannot be turned into an argument object."""


def parse_arguments(raw: str | None, primary_key: str | None) -> dict[str, Any]:
    """The argument object from the model's raw text.

    A bare string that is not JSON (`ls -la`, `[ -f x ] && echo yes`, `[0-9]+ errors`),
    a JSON string, or a bare word that JSON reads as a number, boolean or null
    (`bash("true")`, `search("404")`) becomes `{primary_key: string}`. Text that
    fails to parse and starts like a JSON object with a quoted key (`{"command": "ls`)
    was meant as arguments and is broken: taken as a bare string it would become a
    wrong argument, so it is refused; a complete object followed by stray text is kept.
    """
    text = (raw or "").strip()
    if not text:
        return {}
    if is_too_deep(text):
        raise ArgumentsError("arguments are nested too deeply")
    try:
        value = json.loads(text)
    except RecursionError:
        raise ArgumentsError("arguments are nested too deeply") from None
    except json.JSONDecodeError as exc:
        if is_object_attempt(text):
            value = _leading_object(text, exc)
        elif primary_key is None:
            raise ArgumentsError("arguments must be a JSON object") from None
        else:
            return {primary_key: raw}
    if primary_key is not None and isinstance(value, str):
        return {primary_key: value}
    if primary_key is not None and (value is None or isinstance(value, (bool, int, float))):
        return {primary_key: text}
    if not isinstance(value, dict):
        raise ArgumentsError(f"arguments must be a JSON object, not {type(value).__name__}")
    return value


# `{` (or `[{`, a list of them) and then a quoted key and its colon, or the end of the
# text (cut off there or inside the key). Bash's `{ echo a; }` and `[ -f x ]`, or a
# regex's `[0-9]` and `["']`, have no such key. Linear: no part of it can backtrack.
_OBJECT_START = re.compile(
    r"""\[?\s*\{\s*(?:\Z|"(?:[^"\\]|\\.)*(?:\\?\Z|"\s*(?::|\Z))|'[^'\n]*(?:\Z|'\s*(?::|\Z)))"""
)


def is_object_attempt(text: str) -> bool:
    """Whether `text` (stripped) starts like a JSON object: `{`, then a quoted key and its
    colon, or the end of the text before them."""
    return _OBJECT_START.match(text) is not None


def _leading_object(text: str, error: json.JSONDecodeError) -> dict[str, Any]:
    # Models sometimes add a stray brace or a remark after a complete object.
    try:
        value, _end = json.JSONDecoder().raw_decode(text)
    except RecursionError:
        raise ArgumentsError("arguments are nested too deeply") from None
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ArgumentsError(f"arguments are not valid JSON ({error}); send one JSON object")
    return value


def prepare_call(
    tools: ToolLookup, call_id: str, name: str, raw_arguments: str | None, ctx: ToolContext
) -> PreparedCall:
    """Phase 1: a prepared call, or an error item that will not be executed."""
    shown = _shown(name)

    def error_item(message: str, args: dict[str, Any] | None = None) -> PreparedCall:
        return PreparedCall(call_id, name, args or {}, header=shown, error=message)

    tool = tools.tool(name, ctx.kind)
    if tool is None:
        offered = ", ".join(tools.offered_names(ctx.kind)) or "none"
        return error_item(f"Unknown tool: {shown}. Available tools: {offered}")
    try:
        args = parse_arguments(raw_arguments, tool.definition.primary_key)
    except ArgumentsError as exc:
        return error_item(f"Error: {name}: {exc}")
    return prepare_arguments(tool, call_id, name, args, ctx)


def prepare_arguments(
    tool: Tool, call_id: str, name: str, args: dict[str, Any], ctx: ToolContext
) -> PreparedCall:
    """Phase 1 from an argument object: the model's, parsed, or a person's edit of them."""

    def error_item(message: str, args: dict[str, Any] | None = None) -> PreparedCall:
        return PreparedCall(call_id, name, args or {}, header=_shown(name), error=message)

    if unknown := _unknown_arguments(tool, args, ctx.kind):
        return error_item(unknown, args)
    try:
        prep = tool.handler.prepare(args, ctx)
        if not isinstance(prep, Preparation):
            raise TypeError(f"prepare() returned {type(prep).__name__}, not a Preparation")
    except Exception as exc:  # the tool boundary: a handler bug is a result, not a crash
        log.exception("preparing %s call %s failed", name, call_id)
        return error_item(f"Error: could not prepare {name}: {exc}", args)
    if prep.error is not None:
        return PreparedCall(call_id, name, prep.args, prep.header, prep.preview, False, prep.error)
    return PreparedCall(
        call_id, name, prep.args, prep.header, prep.preview, tool.needs_approval(prep, ctx.kind), None
    )


def _shown(name: str) -> str:
    return name if len(name) <= MAX_NAME_IN_ERROR else name[:MAX_NAME_IN_ERROR] + "..."


def _unknown_arguments(tool: Tool, args: dict[str, Any], kind: str) -> str | None:
    """An error naming arguments the tool does not take: dropping them quietly could
    change what the call does (a `cwd` for bash would be ignored, and the command run
    elsewhere than the model meant)."""
    definition = tool.definition
    unknown = definition.unknown_arguments(args, kind)
    if not unknown:
        return None
    takes = ", ".join(definition.parameters_for(kind).get("properties", {}))
    return f"Error: {tool.name} does not take {', '.join(map(repr, unknown))}; it takes: {takes}"


def execute_call(tools: ToolLookup | Tool | None, call: PreparedCall, ctx: ToolContext) -> ToolOutcome:
    """Phase 3: run an approved call; error items return their error unexecuted.

    `tools` is the tool itself (the batch resolved it), or a lookup to resolve it
    from; a call whose tool is gone is an error result, not a crash."""
    if call.error is not None:
        return ToolOutcome(call.error, is_error=True)
    tool = tools if isinstance(tools, Tool) or tools is None else tools.tool(call.func_name, ctx.kind)
    if tool is None:
        return ToolOutcome(f"Unknown tool: {call.func_name}", is_error=True)
    try:
        outcome = tool.handler.execute(call.args, ctx)
    except Exception as exc:  # the tool boundary
        log.exception("executing %s call %s failed", call.func_name, call.call_id)
        return ToolOutcome(f"Error: {exc}", is_error=True)
    if outcome.waiting_on is not None or images.image_content(outcome.output) is not None:
        # A waiting call has no output yet; cut in half, an image would be neither
        # image nor text (the marker's own cap bounds it).
        return outcome
    return ToolOutcome(
        truncate(_guarded(call.func_name, outcome.output, ctx), ctx.settings.truncation), outcome.is_error
    )


def _guarded(func_name: str, output: str, ctx: ToolContext) -> str:
    """The output as the model may read it (app/tools/core/guard.py), before it is cut to size (a
    credential the cut halved would no longer have its shape); what was done is an event."""
    done = guard.screen(output, ctx.settings, ctx.redacted)  # the tool's own, as its output streamed
    if done.warned:
        ctx.publish(
            EventType.OUTPUT_WARNING,
            {"name": func_name, "redacted": done.redacted, "signs": list(done.signs)},
        )
    return done.text


def run_calls(items: Sequence[T], fn: Callable[[T], R], max_workers: int = TOOL_POOL_SIZE) -> list[R]:
    """`fn` over `items`, results in input order: one runs on this thread, several
    on a pool."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items))) as pool:
        return list(pool.map(fn, items))
