"""A tool batch: run a step's approved calls (each at most once), store results, go on."""

from __future__ import annotations

from app.engine import calls as call_store
from app.engine import turns
from app.engine.cancellation import CancelCheck
from app.engine.leases import fenced, run_phase
from app.engine.streaming import Coalescer
from app.events import EventType, Fence
from app.runtime import Runtime
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
from app.tools import images
from app.tools.base import ToolContext
from app.tools.ordering import lanes, paths_named
from app.tools.pipeline import PreparedCall, execute_call, run_calls


def run(rt: Runtime, turn_id: str, step: int) -> None:
    run_phase(rt, turn_id, TurnPhase.TOOLS, step, lambda fence, cancelled: _batch(rt, fence, step, cancelled))


def _batch(rt: Runtime, fence: Fence, step: int, cancelled: CancelCheck) -> None:
    with rt.db.session() as s:
        turn = s.get(Turn, fence.turn_id)
        assert turn is not None
        ws = s.get(Workstream, turn.ws_id)
        assert ws is not None
        rows = call_store.batch(s, turn.id, step)
    _interrupt_orphans(rt, fence, ws, rows)
    read_paths: set[str] = set(ws.read_paths)
    to_run = [r for r in rows if r.status == CallStatus.APPROVED]
    in_lanes = lanes(to_run, lambda row: paths_named(row.args, ws.working_dir))

    def run_lane(lane: list[ToolCall]) -> None:
        for row in lane:
            _run_one(rt, fence, ws, row, read_paths, cancelled)

    run_calls(in_lanes, run_lane)
    _advance(rt, fence, ws.id, step, read_paths)


def _interrupt_orphans(rt: Runtime, fence: Fence, ws: Workstream, rows: list[ToolCall]) -> None:
    """A call found running was started by a worker that died: never run it again."""
    for row in rows:
        if row.status != CallStatus.RUNNING:
            continue
        with fenced(rt, fence) as (s, _turn):
            stored = s.get(ToolCall, row.id, populate_existing=True)
            assert stored is not None
            stored.status = CallStatus.INTERRUPTED
            stored.output = call_store.INTERRUPTED_OUTPUT
            stored.is_error = True
            stored.finished_at = utcnow()
            s.add(stored)
        _announce_result(rt, fence, ws.id, stored)


def _run_one(
    rt: Runtime,
    fence: Fence,
    ws: Workstream,
    row: ToolCall,
    read_paths: set[str],
    cancelled: CancelCheck,
) -> None:
    with fenced(rt, fence) as (s, turn):
        stored = s.get(ToolCall, row.id, populate_existing=True)
        assert stored is not None
        if stored.status != CallStatus.APPROVED:
            return
        if turn.cancel_requested or cancelled():
            stored.status, stored.output, stored.is_error = (
                CallStatus.CANCELLED,
                call_store.CANCELLED_OUTPUT,
                True,
            )
        else:
            stored.status = CallStatus.RUNNING  # committed before it runs: at most once
            stored.started_at = utcnow()
        s.add(stored)
    if stored.status == CallStatus.CANCELLED:
        return _announce_result(rt, fence, ws.id, stored)
    chunks = Coalescer(
        lambda text: rt.events.publish(
            ws.id,
            EventType.TOOL_OUTPUT_CHUNK,
            turn_id=fence.turn_id,
            fence=fence,
            call_id=stored.call_id,
            text=text,
        )
    )
    ctx = ToolContext(
        ws_id=ws.id,
        working_dir=ws.working_dir,
        settings=rt.settings.tools,
        model=rt.settings.model(ws.model),
        is_cancelled=cancelled,
        emit_output=chunks.add,
        read_paths=read_paths,
        kind=ws.kind,
    )
    try:
        outcome = execute_call(rt.registry, _prepared(stored), ctx)
    finally:
        chunks.close()  # a call's pending output always goes out before its result
    with fenced(rt, fence) as (s, _turn):
        done = s.get(ToolCall, row.id, populate_existing=True)
        assert done is not None
        done.status = CallStatus.DONE
        done.output = outcome.output
        done.is_error = outcome.is_error
        done.finished_at = utcnow()
        s.add(done)
    _announce_result(rt, fence, ws.id, done)


def _advance(rt: Runtime, fence: Fence, ws_id: str, step: int, read_paths: set[str]) -> None:
    """Store every result as a tool message, then the next model step (or the cancelled end)."""
    with fenced(rt, fence) as (s, turn):
        for row in call_store.batch(s, turn.id, step):
            if row.status == CallStatus.APPROVED:  # cancelled before a thread picked it up
                row.status, row.output, row.is_error = CallStatus.CANCELLED, call_store.CANCELLED_OUTPUT, True
                s.add(row)
            s.add(
                Message(
                    ws_id=ws_id,
                    turn_id=turn.id,
                    role="tool",
                    tool_call_id=row.call_id,
                    name=row.func_name,
                    content=row.output or "",
                    is_error=row.is_error,
                )
            )
        if turn.feedback:
            s.add(Message(ws_id=ws_id, turn_id=turn.id, role="user", content=turn.feedback))
            turn.feedback = None
        ws = s.get(Workstream, ws_id, populate_existing=True)
        assert ws is not None
        ws.read_paths = sorted(set(ws.read_paths) | read_paths)
        s.add(ws)
        if turn.cancel_requested:
            state = turns.end_turn(rt, s, turn, TurnStatus.CANCELLED)
        else:
            turn.step = step + 1
            turn.phase = TurnPhase.MODEL
            turn.heartbeat_at = None
            turn.step_claims = 0
            turn.phase_started_at = turn.enqueued_at = utcnow()
            s.add(turn)
            turns.set_state(s, ws_id, WorkstreamState.THINKING)
            state = None
    if state is not None:
        return turns.announce_end(rt, turn, state, fence)
    rt.events.publish(
        ws_id, EventType.STATE_CHANGE, turn_id=turn.id, fence=fence, state=WorkstreamState.THINKING
    )
    rt.queue.model_step(turn.id, step + 1)


def _announce_result(rt: Runtime, fence: Fence, ws_id: str, row: ToolCall) -> None:
    rt.events.publish(
        ws_id,
        EventType.TOOL_RESULT,
        turn_id=fence.turn_id,
        fence=fence,
        call_id=row.call_id,
        name=row.func_name,
        output=images.summary(row.output or ""),  # clients get a line; the model gets the image
        is_error=row.is_error,
    )


def _prepared(row: ToolCall) -> PreparedCall:
    return PreparedCall(
        call_id=row.call_id,
        func_name=row.func_name,
        args=dict(row.args),
        header=row.header,
        preview=row.preview,
        needs_approval=row.needs_approval,
        error=row.error,
    )
