"""A model step: stream the model's answer, store it, prepare its tool calls, park or go on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.engine import calls as call_items
from app.engine import conversation, turns
from app.engine.cancellation import CancelCheck
from app.engine.leases import fenced, run_phase
from app.engine.streaming import Coalescer
from app.events import EventType, Fence
from app.providers import ModelError, stream_reply
from app.runtime import Runtime
from app.settings import ModelSettings
from app.storage.models import (
    CallStatus,
    Message,
    ToolCall,
    Turn,
    TurnPhase,
    TurnStatus,
    Workstream,
    WorkstreamState,
    utcnow,
)
from app.tools.base import ToolContext
from app.tools.pipeline import PreparedCall, prepare_call

RESTART_NOTICE = "The worker streaming this answer stopped; the answer is being generated again."


@dataclass
class Reply:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[Any] = field(default_factory=list)  # providers' ToolCallRequest


def run(rt: Runtime, turn_id: str, step: int) -> None:
    run_phase(rt, turn_id, TurnPhase.MODEL, step, lambda fence, cancelled: _step(rt, fence, step, cancelled))


def _step(rt: Runtime, fence: Fence, step: int, cancelled: CancelCheck) -> None:
    with rt.db.session() as s:
        turn = s.get(Turn, fence.turn_id)
        assert turn is not None
        ws = s.get(Workstream, turn.ws_id)
        assert ws is not None
        history = conversation.for_model(ws, conversation.messages(s, ws.id))
    publish = _publisher(rt, ws.id, fence)
    if turn.cancel_requested or cancelled():
        return _finish(rt, fence, TurnStatus.CANCELLED)
    if turn.step_claims > 1:
        publish(EventType.STREAM_END, step=step, discard=True, reason=RESTART_NOTICE)
    model = rt.settings.model(ws.model)
    if model is None:
        return _fail(
            rt,
            fence,
            f"model {ws.model or rt.settings.default_model!r} is not configured: "
            "set TURNSTONE_MODEL (e.g. openai:gpt-4.1) or add [models.NAME] to config.toml",
        )
    tools = rt.registry.model_tools(ws.kind, ws.working_dir, rt.settings.tools.workspace_dir)
    try:
        reply = _stream(rt, model, history, tools, publish, step, cancelled)
    except ModelError as exc:
        publish(EventType.STREAM_END, step=step)
        return _fail(rt, fence, str(exc))
    publish(EventType.STREAM_END, step=step)
    if cancelled():  # keep what was said; calls it had begun to ask for are dropped
        said = Reply(content=reply.content, reasoning=reply.reasoning)
        return _store_reply(rt, fence, ws, said, step, TurnStatus.CANCELLED)
    _store_reply(rt, fence, ws, reply, step)


Publish = Callable[..., int | None]


def _stream(
    rt: Runtime,
    model: ModelSettings,
    history: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    publish: Publish,
    step: int,
    cancelled: CancelCheck,
) -> Reply:
    reply = Reply()
    content = Coalescer(lambda text: publish(EventType.CONTENT, step=step, text=text))
    reasoning = Coalescer(lambda text: publish(EventType.REASONING, step=step, text=text))
    try:
        for event in stream_reply(
            model,
            history,
            tools,
            should_stop=cancelled,
            retries=rt.settings.model_retries,
            backoff_seconds=rt.settings.model_backoff_seconds,
            timeout_seconds=rt.settings.model_timeout_seconds,
        ):
            if event.kind == "content":
                reply.content.append(event.text)
                content.add(event.text)
            elif event.kind == "reasoning":
                reply.reasoning.append(event.text)
                reasoning.add(event.text)
            elif event.kind == "tool_call":
                reply.tool_calls.append(event.tool_call)
    finally:
        reasoning.close()
        content.close()
    return reply


def _store_reply(
    rt: Runtime,
    fence: Fence,
    ws: Workstream,
    reply: Reply,
    step: int,
    end_as: TurnStatus = TurnStatus.DONE,
) -> None:
    """Store the answer; without tool calls the turn ends (`end_as`), else its calls park or run."""
    prepared, read_paths = _prepare_all(rt, ws, reply.tool_calls)
    with fenced(rt, fence) as (s, turn):
        fresh = s.get(Workstream, ws.id, populate_existing=True)
        assert fresh is not None
        ws = fresh
        s.add(
            Message(
                ws_id=ws.id,
                turn_id=turn.id,
                role="assistant",
                content="".join(reply.content),
                reasoning="".join(reply.reasoning) or None,
                tool_calls=[_as_message_call(p, c) for p, c in prepared] or None,
            )
        )
        if not prepared:
            state = turns.end_turn(rt, s, turn, end_as)
            ended = True
        else:
            rows = [_row(ws, turn, step, n, p) for n, (p, _c) in enumerate(prepared)]
            s.add_all(rows)
            waiting = any(r.status == CallStatus.PENDING for r in rows)
            turn.phase = TurnPhase.APPROVAL if waiting else TurnPhase.TOOLS
            turn.heartbeat_at = None
            turn.step_claims = 0
            turn.phase_started_at = turn.enqueued_at = utcnow()
            s.add(turn)
            ws.read_paths = sorted(set(ws.read_paths) | read_paths)
            state = WorkstreamState.ATTENTION if waiting else WorkstreamState.RUNNING
            ws.state = state
            s.add(ws)
            ended = False
    if ended:
        return turns.announce_end(rt, turn, state, fence)
    publish = _publisher(rt, ws.id, fence)
    items = [call_items.item(r) for r in rows]
    publish(EventType.APPROVE_REQUEST if waiting else EventType.TOOL_INFO, step=step, items=items)
    for r in rows:
        if r.status == CallStatus.ERROR:
            publish(EventType.TOOL_RESULT, call_id=r.call_id, name=r.func_name, output=r.error, is_error=True)
    publish(EventType.STATE_CHANGE, state=state)
    if not waiting:
        rt.queue.tool_batch(turn.id, step)


def _prepare_all(
    rt: Runtime, ws: Workstream, requested: list[Any]
) -> tuple[list[tuple[PreparedCall, Any]], set[str]]:
    """Phase 1 for every call; also the read set as the calls left it (read_file marks at prepare)."""
    read_paths: set[str] = set(ws.read_paths)
    ctx = ToolContext(
        ws_id=ws.id,
        working_dir=ws.working_dir,
        settings=rt.settings.tools,
        model=rt.settings.model(ws.model),
        read_paths=read_paths,
        kind=ws.kind,
    )
    seen: set[str] = set()
    out = []
    for n, call in enumerate(requested):
        # Local models may repeat or omit ids; a result must name exactly one call.
        call_id = call.id if call.id and call.id not in seen else f"call_{n}_{turns.new_id()[:8]}"
        seen.add(call_id)
        out.append((prepare_call(rt.registry, call_id, call.name, call.arguments, ctx), call))
    return out, read_paths


def _row(ws: Workstream, turn: Turn, step: int, position: int, p: PreparedCall) -> ToolCall:
    if p.error:
        status, how = CallStatus.ERROR, None
    elif not p.needs_approval:
        status, how = CallStatus.APPROVED, None
    elif ws.auto_approve or p.func_name in ws.auto_approve_tools:
        status, how = CallStatus.APPROVED, "auto"
    else:
        status, how = CallStatus.PENDING, None
    return ToolCall(
        ws_id=ws.id,
        turn_id=turn.id,
        step=step,
        position=position,
        call_id=p.call_id,
        func_name=p.func_name,
        args=p.args,
        header=p.header,
        preview=p.preview,
        needs_approval=status == CallStatus.PENDING,
        error=p.error,
        status=status,
        decided_how=how,
        output=p.error,
        is_error=bool(p.error),
    )


def _as_message_call(p: PreparedCall, requested: Any) -> dict[str, Any]:
    return {
        "id": p.call_id,
        "type": "function",
        "function": {"name": requested.name, "arguments": requested.arguments},
    }


def _fail(rt: Runtime, fence: Fence, message: str) -> None:
    with fenced(rt, fence) as (s, turn):
        ws_id = turn.ws_id
        state = turns.end_turn(rt, s, turn, TurnStatus.ERROR, error=message)
    rt.events.publish(ws_id, EventType.ERROR, turn_id=turn.id, fence=fence, message=message)
    turns.announce_end(rt, turn, state, fence)


def _finish(rt: Runtime, fence: Fence, status: TurnStatus) -> None:
    with fenced(rt, fence) as (s, turn):
        state = turns.end_turn(rt, s, turn, status)
    turns.announce_end(rt, turn, state, fence)


def _publisher(rt: Runtime, ws_id: str, fence: Fence) -> Publish:
    def publish(type_: str, **fields: Any) -> int | None:
        return rt.events.publish(ws_id, type_, turn_id=fence.turn_id, fence=fence, **fields)

    return publish
