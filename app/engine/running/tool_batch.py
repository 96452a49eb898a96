"""A tool batch: run a step's approved calls (each at most once), store results, go on.

A call that ends its execute phase `waiting` leaves the batch incomplete: the turn
is parked `awaiting` and whatever finishes the call hands the batch back
(`calls.finish_waiting`); the batch then runs again, finds nothing left to run,
and moves on to the next model step.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import bindparam, exists, update
from sqlmodel import Session, col, select

from app.coordination.reach import Coordination
from app.engine.life import calls, turns
from app.engine.life.calls import RUNNER, StartedCall
from app.engine.life.transition import Step, Steps, run_alone
from app.engine.publishing.outbox import Outbox, ordered
from app.engine.publishing.streaming import Coalescer
from app.engine.running import leases
from app.engine.running.handoff import Handoff, hand_on, will_keep
from app.engine.running.leases import fenced, let_go
from app.engine.running.phases import run_phase
from app.engine.running.stop_check import CancelCheck
from app.engine.subagents import family
from app.events import EventType, Fence
from app.runtime import Runtime
from app.sandbox.reach import Roots
from app.storage.database import typed
from app.storage.models import (
    CallStatus,
    ToolCall,
    Turn,
    TurnPhase,
    TurnStatus,
    Workstream,
    WorkstreamState,
    utcnow,
)
from app.taskqueue import MODEL_STEP_TASK
from app.tools import client_tools
from app.tools.core import toolset as toolsets
from app.tools.core.base import ToolContext, ToolOutcome
from app.tools.core.ordering import lanes, paths_named
from app.tools.core.pipeline import PreparedCall, execute_call, prepare_arguments, run_calls
from app.tools.core.tool import COORDINATOR

Ran = tuple[ToolCall, ToolOutcome]  # a call that ran, and what came of it
# How many times a batch's end is tried again because what held it back ended meanwhile.
MAX_ENDS = 5


def run(rt: Runtime, turn_id: str, step: int, handed: Handoff | None = None) -> None:
    """The batch, as its task (`handed`: kept by the model step before it, which may have
    started its one call)."""
    started: StartedCall | None = handed.started if handed else None

    def body(fence: Fence, cancelled: CancelCheck) -> None:
        if started is not None:
            _run_started(rt, fence, step, cancelled, started)
        else:
            _batch(rt, fence, step, cancelled)

    run_phase(rt, turn_id, TurnPhase.TOOLS, step, body, handed.claim if handed else None)


def _run_started(rt: Runtime, fence: Fence, step: int, cancelled: CancelCheck, started: StartedCall) -> None:
    """A batch whose one call its hand-off stored running: run it, nothing read or written
    first. A cancel raised since the hand-off committed (asked of Redis now, not at the cancel
    check's next look) leaves it unrun, as `_start` would have."""
    ws, row = started.ws, started.row
    read_paths: set[str] = set(ws.read_paths)
    if cancelled.now():
        with fenced(rt, fence) as (s, _turn):
            ended = calls.cancel_unstarted(s, row, leaving=CallStatus.RUNNING)
        if ended:
            calls.announce(rt, row, fence)
        return _advance(rt, fence, ws, step, read_paths)
    ran = _run_one(rt, fence, ws, row, read_paths, cancelled, hold_result=True, started=True)
    _advance(rt, fence, ws, step, read_paths, ran)


def _batch(rt: Runtime, fence: Fence, step: int, cancelled: CancelCheck) -> None:
    # Read under the fence: the common batch, one call to run and nothing else to sort out,
    # starts that call in the same transaction (committed before it runs, as always).
    with fenced(rt, fence) as (s, turn):
        ws = s.get(Workstream, turn.ws_id)
        assert ws is not None
        rows = calls.batch(s, turn.id, step)
        to_run = [r for r in rows if r.status == CallStatus.APPROVED]
        alone = len(to_run) == 1 and not any(r.status == CallStatus.RUNNING for r in rows)
        started = alone and not (turn.cancel_requested or cancelled()) and calls.start(s, to_run[0], RUNNER)
    if not started:
        _interrupt_orphans(rt, fence, rows)
    read_paths: set[str] = set(ws.read_paths)
    in_lanes = lanes(to_run, lambda row: paths_named(row.args, ws.working_dir))

    def run_lane(lane: list[ToolCall]) -> None:
        for row in lane:
            _run_one(rt, fence, ws, row, read_paths, cancelled)

    if len(to_run) == 1:  # its result is stored in the transaction that ends the batch
        ran = _run_one(rt, fence, ws, to_run[0], read_paths, cancelled, hold_result=True, started=started)
        return _advance(rt, fence, ws, step, read_paths, ran)
    run_calls(in_lanes, run_lane)
    _advance(rt, fence, ws, step, read_paths)


def _interrupt_orphans(rt: Runtime, fence: Fence, rows: list[ToolCall]) -> None:
    """A call found running was started by a worker that died: never run it again."""
    for row in rows:
        if row.status != CallStatus.RUNNING:
            continue
        with fenced(rt, fence) as (s, _turn):
            interrupted = calls.interrupt(s, row)
        if interrupted:
            calls.announce(rt, row, fence)


def _run_one(
    rt: Runtime,
    fence: Fence,
    ws: Workstream,
    row: ToolCall,
    read_paths: set[str],
    cancelled: CancelCheck,
    hold_result: bool = False,
    started: bool = False,
) -> Ran | None:
    """Run one approved call (`started`: the caller's transaction marked it running) and store
    its result, or with `hold_result` hand back a finished call's result for the caller's
    next transaction to store (a waiting call is stored now)."""
    if not started and not _start(rt, fence, row, cancelled):
        return None
    # Live output is a courtesy: a Redis fault must not stop the command or lose its
    # result, which is stored whole and announced by tool_result.
    chunks = Coalescer(
        lambda text: rt.events.publish_best_effort(
            ws.id,
            EventType.TOOL_OUTPUT_CHUNK,
            turn_id=fence.turn_id,
            fence=fence,
            call_id=row.call_id,
            text=text,
        )
    )
    ctx = _context(rt, fence, ws, row, read_paths, cancelled, chunks.add)
    try:
        outcome = _execute(rt, ws, row, ctx)
    finally:
        chunks.close()  # a call's pending output always goes out before its result
    if hold_result and outcome.waiting_on is None:
        return row, outcome
    with fenced(rt, fence) as (s, _turn):
        if outcome.waiting_on is not None:
            calls.wait(s, row, outcome.waiting_on)
            return None
        finished = _finish(s, row, outcome)
    if finished:
        calls.announce(rt, row, fence)
    return None


def _start(rt: Runtime, fence: Fence, row: ToolCall, cancelled: CancelCheck) -> bool:
    """Mark the call running, committed before it runs (at most once); False when the turn
    was cancelled first (the call is cancelled, unstarted) or something else moved it."""
    with fenced(rt, fence) as (s, turn):
        if turn.cancel_requested or cancelled():
            if calls.cancel_unstarted(s, row):
                calls.announce(rt, row, fence)
            return False
        return calls.start(s, row, RUNNER)


def _finish(s: Session, row: ToolCall, outcome: ToolOutcome) -> bool:
    """The call's result, unless something else ended it meanwhile (a failing attempt's
    clean-up): then that end stands, and was announced by whoever made it."""
    return calls.finish(s, row, outcome.output, outcome.is_error, leaving=[CallStatus.RUNNING])


def _execute(rt: Runtime, ws: Workstream, row: ToolCall, ctx: ToolContext) -> ToolOutcome:
    """Phase 3 with the tool the model saw (its recorded catalog version), or why it is gone."""
    sources: list[Any] = list(rt.tool_sources)
    if client_tools.is_client_call(row.catalog_version):
        with rt.db.reader() as s:
            sources = client_tools.sources(sources, s, ws, row.turn_id)
    tool = toolsets.resolve(rt.registry, sources, row.func_name, ws.kind, row.catalog_version)
    if isinstance(tool, str):
        return ToolOutcome(tool, is_error=True)
    call = _prepared(row)
    if row.original_args is not None:  # a person's edit: prepared as the model's arguments were
        call = prepare_arguments(tool, row.call_id, row.func_name, dict(row.args), ctx)
    return execute_call(tool, call, ctx)


def _context(
    rt: Runtime,
    fence: Fence,
    ws: Workstream,
    row: ToolCall,
    read_paths: set[str],
    cancelled: CancelCheck,
    emit: Callable[[str], None],
) -> ToolContext:
    def publish(type_: str, fields: dict[str, object]) -> None:
        rt.events.publish(ws.id, type_, turn_id=fence.turn_id, fence=fence, call_id=row.call_id, **fields)

    return ToolContext(
        ws_id=ws.id,
        working_dir=ws.working_dir,
        settings=rt.settings.tools,
        model=rt.settings.model(ws.model),
        is_cancelled=cancelled,
        emit_output=emit,
        read_paths=read_paths,
        kind=ws.kind,
        workstream=ws,
        turn_id=fence.turn_id,
        call_id=row.call_id,
        db=rt.db,
        publish=publish,
        fetcher=rt.fetcher,
        sandbox=rt.sandbox,
        network=ws.network,
        roots=Roots.from_settings(rt.settings),
        mcp=rt.mcp.manager if rt.mcp is not None else None,
        start_task=lambda prompt: family.start(rt, ws, fence.turn_id, row, prompt),
        note_process=lambda group: calls.note_process(rt, row, group),
        coordination=Coordination(rt, ws) if ws.kind == COORDINATOR else None,
    )


def _advance(
    rt: Runtime,
    fence: Fence,
    ws: Workstream,
    step: int,
    read_paths: set[str],
    ran: Ran | None = None,
) -> None:
    """Store every result as a tool message (`ran`: a call's result not yet stored), then the
    next model step (or the cancelled end); with calls still waiting, park the turn until they
    finish. `ws` is the workstream as the batch read it."""
    with ordered(rt, ws.id) as out:
        handed = _hand_on(rt, out, fence, ws, step, read_paths, ran)
        for _ in range(MAX_ENDS):
            if handed is not None or not _stop_or_park(rt, out, fence, ws, step, read_paths, ran):
                break
            ran = None  # stored by `_stop_or_park`
            handed = _hand_on(rt, out, fence, ws, step, read_paths, ran)
        else:
            if handed is None:  # what held the batch back kept coming back: a bug
                raise RuntimeError(f"turn {fence.turn_id}: its batch could not end")
    if handed is not None:
        hand_on(rt, MODEL_STEP_TASK, fence.turn_id, handed.step, handed.claim)


class HandedOn(NamedTuple):
    """The batch has ended and its turn gone on to `step`; `claim` when this task runs it next."""

    step: int
    claim: Fence | None


def _hand_on(
    rt: Runtime,
    out: Outbox,
    fence: Fence,
    ws: Workstream,
    step: int,
    read_paths: set[str],
    ran: Ran | None,
) -> HandedOn | None:
    """The batch's end when it goes on (`_ENDS`): None, with nothing written, when the fence
    is gone, a cancel was asked or a call still waits."""
    keep = will_keep(rt, fence.turn_id, MODEL_STEP_TASK)
    grown = not read_paths <= set(ws.read_paths)
    row, outcome = ran if ran is not None else (None, None)
    result = calls.finished(outcome.output, outcome.is_error) if outcome is not None else {}
    values = {
        **leases.fenced_values(fence, step),
        "next_step": step + 1,
        "now": utcnow(),
        "call_row": row.id if row is not None else None,
        **{f"call_{key}": result.get(key) for key in calls.finished("", False)},
        "ws_read_paths": sorted(set(ws.read_paths) | read_paths),
    }
    done = run_alone(rt.db, _ends(keep, grown, row is not None), values)
    if done is None:
        return None
    if row is not None and done.first("finished") is not None:
        calls.moved(None, row, result)  # committed already
        calls.announce(rt, row, fence, out)
    out.add(EventType.STATE_CHANGE, turn_id=fence.turn_id, fence=fence, state=WorkstreamState.THINKING)
    return HandedOn(step + 1, Fence(fence.turn_id, fence.attempt + 1) if keep else None)


@cache  # built when first run, for the cases a worker meets
def _ends(keep: bool, grown: bool, ran: bool) -> Steps:
    """A batch's end, going on to the next model step: the turn locked under its fence at this
    batch, with no cancel asked and no call waiting; the call it `ran` (`call_row`) finished,
    if still running; a tool message for every ended call with none yet, then the turn's
    feedback; the turn handed on (`keep`: claimed for this task); the workstream `thinking`
    (`grown`: with the read paths the batch's calls added).

    On PostgreSQL the calls are read as the statement began, and a writer that ended the call
    (`calls.finish_waiting`, a failing attempt's clean-up) may commit while the statement waits
    for the turn: the call is then no longer running, nothing is written, and the caller reads
    the batch again (`_stop_or_park`)."""
    waiting = exists().where(
        col(ToolCall.turn_id) == col(Turn.id),
        col(ToolCall.step) == bindparam("fenced_step"),
        col(ToolCall.status) == CallStatus.WAITING,
    )
    held = Step(
        "held",
        lambda ref: (
            select(col(Turn.id), col(Turn.ws_id), col(Turn.feedback))
            .where(*leases.fenced_at(TurnPhase.TOOLS), ~waiting)
            .with_for_update()
        ),
    )
    finished = [Step("finished", lambda ref: calls.finishing(ref("held", "id")))] if ran else []
    answered = Step(
        "answered",
        lambda ref: calls.answering(
            ref("held", "id"),
            bindparam("fenced_step"),
            ref("finished", "id") if ran else None,
            ref("held", "feedback"),
            after=ref("finished", "id") if ran else ref("held", "id"),
        ),
        required=False,
    )
    handed = Step(
        "handed",
        lambda ref: (
            update(Turn)
            .where(
                col(Turn.id) == ref("held", "id"), *leases.fenced_at(TurnPhase.TOOLS)
            )  # the state it leaves
            .values(
                phase=TurnPhase.MODEL,
                step=bindparam("next_step"),
                feedback=None,
                **leases.handed_on(keep, ref.clock),
            )
            .returning(col(Turn.id), col(Turn.ws_id))
        ),
    )
    paths = {"read_paths": typed(Workstream, "read_paths", "ws_read_paths")} if grown else {}
    thinking = Step(
        "thinking",
        lambda ref: (
            update(Workstream)
            .where(col(Workstream.id) == ref("handed", "ws_id"))
            .values(state=WorkstreamState.THINKING, updated_at=bindparam("now"), **paths)
            .returning(col(Workstream.id))
        ),
    )
    return Steps([held, *finished, answered, handed, thinking])


def _stop_or_park(
    rt: Runtime,
    out: Outbox,
    fence: Fence,
    ws: Workstream,
    step: int,
    read_paths: set[str],
    ran: Ran | None,
) -> bool:
    """Where the batch does not go on: its result stored, then the turn ends cancelled (every
    call not yet ended ends now), or parks while a call waits. True when neither holds any more
    (what held the batch back ended meanwhile): the caller hands it on after all."""
    with fenced(rt, fence) as (s, turn):
        if ran is not None and _finish(s, *ran):
            calls.announce(rt, ran[0], fence, out)
        if turn.cancel_requested:
            for row in calls.close_open(s, calls.batch(s, turn.id, step), by="cancel"):
                calls.announce(rt, row, fence, out)
            calls.answer(s, turn, step)
            _keep_read_paths(s, ws, read_paths)
            turns.end_turn(s, out, turn, TurnStatus.CANCELLED, fence=fence)
            return False
        if calls.has_waiting(s, turn.id, step):
            _park(rt, s, turn, ws, read_paths)
            return False
    return True


def _park(rt: Runtime, s: Session, turn: Turn, ws: Workstream, read_paths: set[str]) -> None:
    """Some call finishes later: no worker holds the turn until the last one does."""
    _keep_read_paths(s, ws, read_paths)
    turn.phase = TurnPhase.AWAITING
    let_go(turn)
    turn.phase_started_at = turn.enqueued_at = rt.db.now()
    s.add(turn)


def _keep_read_paths(s: Session, read: Workstream, read_paths: set[str]) -> None:
    """Paths the batch's calls read join the workstream's (as it now is); when they read
    none that it had not when the batch began, there is nothing to store."""
    if read_paths <= set(read.read_paths):
        return
    ws = s.get(Workstream, read.id, populate_existing=True)
    assert ws is not None
    ws.read_paths = sorted(set(ws.read_paths) | read_paths)
    s.add(ws)


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
