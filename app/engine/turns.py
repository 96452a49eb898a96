"""Turns: opening one per message, one active per workstream, the rest queued behind it."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy
from sqlalchemy import Insert, bindparam, exists, func, insert, literal, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from app.engine import fanin
from app.engine.outbox import Defer, Outbox, ordered
from app.engine.steps import Done, Step, Steps
from app.errors import ConflictError, NotFoundError, PayloadTooLargeError
from app.events import EventType, Fence
from app.metrics import recording
from app.runtime import Runtime
from app.storage.database import Database, insert_row, typed, update_rows
from app.storage.models import (
    Message,
    Turn,
    TurnPhase,
    TurnStatus,
    Workstream,
    WorkstreamState,
    utcnow,
)
from app.tools.tool import TASK

MAX_ACTIVATION_RACES = 5


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Sent:
    """What a send stored: the turn, and whether it started or waits (or, for a repeated
    idempotency key, how the turn the first send stored stands)."""

    id: str
    status: TurnStatus


@dataclass(frozen=True)
class _NewTurn:
    """A message about to be stored as a turn: the columns it is stored with (the rest take
    their defaults). A turn row is made of it only where the ORM needs one."""

    id: str
    ws_id: str
    message: str
    origin: str
    idempotency_key: str | None
    created_at: datetime

    def row(self) -> Turn:
        return Turn(**asdict(self))


def send(
    rt: Runtime,
    ws_id: str,
    message: str,
    origin: str = "user",
    idempotency_key: str | None = None,
    defer: Defer | None = None,
) -> Sent:
    """Store the message as a turn and, in the same transaction, start it if the workstream is
    idle; else it is queued behind the active one.

    With an `idempotency_key`, a send repeated with the same key (a client's retry
    after a lost response) returns the turn the first one stored, and stores nothing.
    With `defer`, what follows the commit (the first step's task, the events) is handed to it
    (`outbox.ordered`): the caller answers first and runs it after.
    """
    if len(message.encode()) > rt.settings.max_message_bytes:
        raise PayloadTooLargeError(
            f"message is {len(message.encode())} bytes; the limit is {rt.settings.max_message_bytes}"
        )
    if idempotency_key is not None and (earlier := _turn_for_key(rt, ws_id, idempotency_key)):
        return Sent(earlier.id, TurnStatus(earlier.status))
    turn = _NewTurn(new_id(), ws_id, message, origin, idempotency_key, utcnow())
    for attempt in range(MAX_ACTIVATION_RACES + 1):
        try:
            # The last attempt only stores the turn: the sweeper starts whatever stays queued.
            started = _store(rt, turn, start=attempt < MAX_ACTIVATION_RACES, defer=defer)
        except _AlreadyStarted:
            continue  # rolled back, this turn with it: store it again
        except IntegrityError:
            # The same key raced in from a second request: the one stored first is the answer.
            if idempotency_key is None or (earlier := _turn_for_key(rt, ws_id, idempotency_key)) is None:
                raise
            return Sent(earlier.id, TurnStatus(earlier.status))
        return Sent(turn.id, TurnStatus.ACTIVE if started == turn.id else TurnStatus.QUEUED)
    raise AssertionError("unreachable: the last attempt never starts a turn")


def _store(rt: Runtime, turn: _NewTurn, start: bool, defer: Defer | None) -> str | None:
    """One transaction: the new turn, and the start of the workstream's oldest queued turn if
    none is active (this one, unless an older one waits); the id of the turn it started."""
    with ordered(rt, turn.ws_id, defer) as out:
        if start and rt.db.is_postgresql and _start_in_one_statement(rt, out, turn):
            return turn.id
        with rt.db.session() as s:
            if start and not rt.db.is_postgresql and _start_at_once(rt, s, out, turn):
                return turn.id
            return _store_in(rt, s, out, turn, start)


def _store_in(rt: Runtime, s: Session, out: Outbox, turn: _NewTurn, start: bool) -> str | None:
    """In the caller's transaction, any case: a workstream that is busy, has turns queued, is a
    sub-agent's or is not there; the id of the turn it started."""
    ws = s.get(Workstream, turn.ws_id)
    if ws is None:
        raise NotFoundError(f"no workstream {turn.ws_id}")
    if ws.parent_call_row is not None:  # its one turn is its parent's task
        raise ConflictError("a sub-agent's workstream takes no messages; message its parent")
    s.add(turn.row())
    s.flush()  # an idempotency key's clash shows here, before anything else is done
    started = _start_oldest(rt, s, out, turn.ws_id) if start else None
    if started != turn.id:
        out.add(EventType.TURN_QUEUED, turn_id=turn.id, message=turn.message)
    return started


def _start_at_once(rt: Runtime, s: Session, out: Outbox, turn: _NewTurn) -> bool:
    """The common case on SQLite, in fewer statements: an idle workstream with nothing queued
    (not a sub-agent's) takes `turn` as its active one, and the turn is stored started. False,
    with nothing written, for any other case: the general path sorts it out (and says what is
    wrong)."""
    if not _take(s, turn.ws_id, turn.id, at_once=True):
        return False
    # Its start times are the lease clock's (`Database.now_bound`); an idempotency key's
    # clash shows here.
    s.connection().execute(_started_insert(rt.db), {**asdict(turn), "now": rt.db.now()})
    _begin(s, out, turn)
    return True


def _start_in_one_statement(rt: Runtime, out: Outbox, turn: _NewTurn) -> bool:
    """`_start_at_once` on PostgreSQL, as one statement that commits by itself: a round trip
    where a transaction of three statements took five. Each step of it takes the row the one
    before returned, so nothing is written unless the workstream was taken; an idempotency
    key's clash fails it whole."""
    # No key named as a workstream's column: an UPDATE takes such a parameter as a value to set.
    values = {
        "ws_id": turn.ws_id,
        "turn_id": turn.id,
        "now": utcnow(),
        "message": turn.message,
        "origin": turn.origin,
        "idempotency_key": turn.idempotency_key,
        "created": turn.created_at,
        "message_origin": _stored_origin(turn),
    }
    with rt.db.one_statement() as s:
        taken = s.execute(_START_IN_ONE_STATEMENT, values).first()
    if taken is None:
        return False
    recording.turn_started(None)
    _announce_start(out, turn)
    return True


def _started_insert(db: Database) -> Insert:
    built = _STARTED_INSERTS.get(db.is_postgresql)
    if built is None:
        now = db.now_bound()
        built = _STARTED_INSERTS[db.is_postgresql] = insert(Turn).values(
            status=TurnStatus.ACTIVE, phase=TurnPhase.MODEL, started_at=now, enqueued_at=now
        )
    return built


_STARTED_INSERTS: dict[bool, Insert] = {}


def _turn_for_key(rt: Runtime, ws_id: str, key: str) -> Turn | None:
    with rt.db.session() as s:
        return s.exec(select(Turn).where(Turn.ws_id == ws_id, Turn.idempotency_key == key)).first()


class _AlreadyStarted(Exception):
    """The queued turn picked was started by a racing activator: roll back, pick again."""


def activate_next(rt: Runtime, ws_id: str) -> str | None:
    """Start the oldest queued turn when no turn is active; the started turn's id."""
    for _ in range(MAX_ACTIVATION_RACES):
        try:
            turn_id = _activate_oldest(rt, ws_id)
        except _AlreadyStarted:
            continue
        return turn_id
    return None  # the sweeper starts whatever is still queued


def _activate_oldest(rt: Runtime, ws_id: str) -> str | None:
    with ordered(rt, ws_id) as out, rt.db.session() as s:
        return _start_oldest(rt, s, out, ws_id)


def _start_oldest(rt: Runtime, s: Session, out: Outbox, ws_id: str) -> str | None:
    """Inside the caller's ordered transaction: start the workstream's oldest queued turn if no
    turn is active; its id. `_AlreadyStarted` (the caller rolls back) if a racer started it."""
    turn = s.exec(
        select(Turn)
        .where(Turn.ws_id == ws_id, Turn.status == TurnStatus.QUEUED)
        .order_by(col(Turn.created_at), col(Turn.id))
        .limit(1)
    ).first()
    if turn is None:
        return None
    if not _take(s, ws_id, turn.id):
        return None  # another turn is active; this one starts when it ends
    now = rt.db.now()
    started = s.exec(
        update(Turn)
        .where(col(Turn.id) == turn.id, col(Turn.status) == TurnStatus.QUEUED)
        .values(status=TurnStatus.ACTIVE, phase=TurnPhase.MODEL, started_at=now, enqueued_at=now)
    )
    if started.rowcount != 1:
        raise _AlreadyStarted(turn.id)  # rolls back the workstream's claim too
    _begin(s, out, turn)
    return turn.id


def _take(s: Session, ws_id: str, turn_id: str, at_once: bool = False) -> bool:
    """The idle workstream takes `turn_id` as its active turn; with `at_once` (a send's new
    turn) only when it is no sub-agent's and no turn is queued on it (the oldest goes first)."""
    params = {"ws_id": ws_id, "turn_id": turn_id, "now": utcnow()}
    return bool(s.connection().execute(_TAKE_AT_ONCE if at_once else _TAKE, params).rowcount == 1)


# Built once, as every send and every turn's end runs them, and run on the session's connection
# without the ORM (about half the CPU): nothing pending is flushed first, and a workstream the
# session loaded is not updated, which no caller reads after.
_TAKE = (
    update(Workstream)
    .where(col(Workstream.id) == bindparam("ws_id"), col(Workstream.active_turn_id).is_(None))
    .values(active_turn_id=bindparam("turn_id"), state=WorkstreamState.THINKING, updated_at=bindparam("now"))
)
_QUEUED = (
    select(Turn.id).where(col(Turn.ws_id) == bindparam("ws_id"), Turn.status == TurnStatus.QUEUED).limit(1)
)
_TAKE_AT_ONCE = _TAKE.where(col(Workstream.parent_call_row).is_(None), ~exists(_QUEUED))


def message_stored(
    role: str, ws_id: Any, turn_id: Any, is_error: str | None = None, **parameters: str
) -> Insert:
    """A message inserted by a transition's step, for the row a step before it returned (`ws_id`
    and `turn_id` are that step's columns; none when it returned none); each column in `parameters` takes the
    statement's parameter of that name. No error, unless `is_error` names the parameter that says."""
    names = ["ws_id", "turn_id", "role", *parameters, "is_error"]
    values = [typed(Message, column, name) for column, name in parameters.items()]
    error = typed(Message, "is_error", is_error) if is_error else literal(False)
    taken = sqlalchemy.select(ws_id, turn_id, literal(role), *values, error).where(
        ws_id.is_not(None), turn_id.is_not(None)
    )
    # The column defaults of a nested INSERT are not filled in: every column it needs is named.
    stored = insert(Message).from_select(names, taken, include_defaults=False)
    return stored.returning(col(Message.id))


# `_start_at_once` as one statement (PostgreSQL): the workstream taken, then the turn stored
# started for the workstream that returned, then its message for the turn that returned; the
# start times are the server's clock, as `Database.now_bound` gives them there.
_TAKEN = _TAKE_AT_ONCE.returning(col(Workstream.id)).cte("taken")
_STARTED = (
    insert(Turn)
    .from_select(
        ["id", "ws_id", "message", "origin", "idempotency_key", "created_at"]
        + [
            "status",
            "phase",
            "started_at",
            "enqueued_at",
            "step",
            "attempt",
            "step_claims",
            "cancel_requested",
        ],
        sqlalchemy.select(
            typed(Turn, "id", "turn_id"),
            _TAKEN.c.id,
            typed(Turn, "message"),
            typed(Turn, "origin"),
            typed(Turn, "idempotency_key"),
            typed(Turn, "created_at", "created"),
            literal(TurnStatus.ACTIVE.value),
            literal(TurnPhase.MODEL.value),
            func.clock_timestamp(),
            func.clock_timestamp(),
            literal(0),
            literal(0),
            literal(0),
            literal(False),
        ),
        include_defaults=False,  # the column defaults of a nested INSERT are not filled in
    )
    .returning(col(Turn.id), col(Turn.ws_id))
    .cte("started")
)
_STORED = message_stored(
    "user",
    _STARTED.c.ws_id,
    _STARTED.c.id,
    content="message",
    origin="message_origin",
    created_at="created",
).cte("stored")
# A SELECT on top, so that a session runs it as it is (an INSERT on top takes its ORM bulk path).
_START_IN_ONE_STATEMENT = sqlalchemy.select(_STORED.c.id)
# What a turn's end leads to, in one read: whether it answers a parent's call (a sub-agent's),
# sub-agents it started (to stop), a turn queued next.
_AFTER_END = select(
    col(Workstream.kind),
    col(Workstream.parent_call_row),
    exists(select(Workstream.id).where(col(Workstream.parent_turn_id) == bindparam("turn_id"))),
    exists(_QUEUED),
).where(col(Workstream.id) == bindparam("ws_id"))


def _begin(s: Session, out: Outbox, turn: Turn | _NewTurn) -> None:
    """Inside the transaction that starts `turn`: its message joins the conversation, and its
    first step is sent as soon as the transaction commits (its claim waits for these events)."""
    recording.turn_started(s)
    message = {"role": "user", "content": turn.message, "origin": _stored_origin(turn)}
    insert_row(s, Message, ws_id=turn.ws_id, turn_id=turn.id, **message)
    _announce_start(out, turn)


def _stored_origin(turn: Turn | _NewTurn) -> str | None:
    """A turn that something other than a person started (a watch) says so, stored and shown."""
    return turn.origin if turn.origin != "user" else None


def _announce_start(out: Outbox, turn: Turn | _NewTurn) -> None:
    """A started turn's events, and its first step sent once its start has committed."""
    origin = _stored_origin(turn)
    marked: dict[str, Any] = {"origin": origin} if origin else {}
    out.add(EventType.MESSAGE, turn_id=turn.id, role="user", content=turn.message, **marked)
    out.add(EventType.STATE_CHANGE, turn_id=turn.id, state=WorkstreamState.THINKING)
    turn_id = turn.id
    out.on_commit(lambda rt: rt.queue.model_step(turn_id, 0))


def end_turn(
    s: Session,
    out: Outbox,
    turn: Turn,
    status: TurnStatus,
    error: str | None = None,
    fence: Fence | None = None,
    answer: dict[str, Any] | None = None,
) -> WorkstreamState:
    """Inside the caller's (fenced, ordered) transaction: close the turn (with its step's
    `answer` stored, when given: content, reasoning, usage, server_blocks) and free the
    workstream; the oldest queued turn, if one waits, is started once the events are out."""
    s.flush()  # what the session holds is written first, as an ORM update would
    done = _ends(answer is not None, fenced=False).run(
        s, _end_values(turn.id, turn.ws_id, status, error, answer)
    )
    if done is None:
        raise ConflictError(f"turn {turn.id} is not active")
    ended = done.first("ended")
    assert ended is not None
    for key in ("status", "phase", "ended_at", "heartbeat_at", "error"):
        set_committed_value(turn, key, ended[key])
    return _ended(s, out, turn.id, turn.ws_id, status, error, fence, done)


def end_with_answer(rt: Runtime, out: Outbox, fence: Fence, ws: Workstream, answer: dict[str, Any]) -> bool:
    """A step's answer without tool calls, stored and ending its turn as done, as a transition
    of its own (`end_turn`'s steps under the fence: on PostgreSQL one statement that commits by
    itself, one round trip where a fenced transaction took six). False, with nothing written,
    where the fence is gone or a cancel was asked, or for a sub-agent's turn, whose answer is
    recorded for its parent in the same transaction: the caller ends the turn in a fenced
    transaction, which says what is wrong."""
    if ws.kind == TASK and ws.parent_call_row is not None:
        return False
    values = {
        **_end_values(fence.turn_id, ws.id, TurnStatus.DONE, None, answer),
        "fenced_attempt": fence.attempt,
    }
    with rt.db.one_statement() as s:
        done = _ends(True, fenced=True).run(s, values)
        if done is None:
            s.rollback()
            return False
        _ended(None, out, fence.turn_id, ws.id, TurnStatus.DONE, None, fence, done, s)
    return True


def _end_values(
    turn_id: str, ws_id: str, status: TurnStatus, error: str | None, answer: dict[str, Any] | None
) -> dict[str, Any]:
    # No key named as a column of a table the steps update: an UPDATE takes one as a value to set.
    state = WorkstreamState.ERROR if status == TurnStatus.ERROR else WorkstreamState.IDLE
    values = {
        "end_turn": turn_id,
        "end_ws": ws_id,
        "end_status": status,
        "end_state": state,
        "end_error": error,
        "now": utcnow(),
    }
    return {**values, **{f"answer_{key}": value for key, value in (answer or {}).items()}}


def _ended(
    s: Session | None,
    out: Outbox,
    turn_id: str,
    ws_id: str,
    status: TurnStatus,
    error: str | None,
    fence: Fence | None,
    done: Done,
    reader: Session | None = None,
) -> WorkstreamState:
    """What follows a turn's end (`_ends`), in its transaction `s` (None: it has committed;
    `reader` then asks what follows, if the turn no longer held its workstream)."""
    state = WorkstreamState.ERROR if status == TurnStatus.ERROR else WorkstreamState.IDLE
    if error is not None:
        out.add(EventType.ERROR, turn_id=turn_id, fence=fence, message=error)
    if status == TurnStatus.CANCELLED:
        out.add(EventType.CANCELLED, turn_id=turn_id, fence=fence)
    out.add(EventType.STATE_CHANGE, turn_id=turn_id, state=state, fence=fence)
    # A queued turn is looked for under the workstream's ordering lock: a send that stores a
    # turn after this commits finds the workstream idle and starts its turn itself.
    freed = done.first("freed")
    if freed is None:  # this turn no longer held the workstream: asked apart
        asking = s if s is not None else reader
        assert asking is not None
        row = asking.connection().execute(_AFTER_END, {"turn_id": turn_id, "ws_id": ws_id}).one()
        freed = dict(zip(("kind", "parent_call_row", "has_children", "has_queued"), row, strict=True))
    answers_parent = freed["kind"] == TASK and freed["parent_call_row"] is not None
    if answers_parent:
        assert s is not None  # `end_with_answer` leaves a sub-agent's turn to a transaction
        fanin.record_end(s, out, turn_id, ws_id, status, error)
    if freed["has_children"]:
        fanin.stop_children_after(out, turn_id)
    recording.turn_finished(s, status)
    if freed["has_queued"]:
        out.after(lambda rt: activate_next(rt, ws_id))
    return state


@cache  # built when first run: a worker builds only its database's, and only those it runs
def _ends(with_answer: bool, fenced: bool) -> Steps:
    """A turn's end: the turn closed if active (`fenced`: under the fence's attempt, with no
    cancel asked), then the workstream it holds freed, saying what follows (a parent to
    answer, sub-agents to stop, a queued turn), then the step's answer stored, when given."""
    held = [col(Turn.attempt) == bindparam("fenced_attempt"), col(Turn.cancel_requested).is_(False)]
    ended = Step(
        "ended",
        lambda ref: (
            update(Turn)
            .where(
                col(Turn.id) == bindparam("end_turn"),
                col(Turn.status) == TurnStatus.ACTIVE,
                *(held if fenced else []),
            )
            .values(
                status=bindparam("end_status"),
                phase=TurnPhase.FINISHED,
                ended_at=bindparam("now"),
                heartbeat_at=None,
                error=bindparam("end_error"),
            )
            .returning(
                col(Turn.id),
                col(Turn.ws_id),
                col(Turn.status),
                col(Turn.phase),
                col(Turn.ended_at),
                col(Turn.heartbeat_at),
                col(Turn.error),
            )
        ),
    )
    freed = Step(
        "freed",
        lambda ref: (
            update(Workstream)
            .where(
                col(Workstream.id) == ref("ended", "ws_id"),
                col(Workstream.active_turn_id) == ref("ended", "id"),
            )
            .values(active_turn_id=None, state=bindparam("end_state"), updated_at=bindparam("now"))
            .returning(
                col(Workstream.kind),
                col(Workstream.parent_call_row),
                exists(select(_CHILD.c.id).where(_CHILD.c.parent_turn_id == ref("ended", "id"))).label(
                    "has_children"
                ),
                # named by the step's row, not `workstreams.id`: SQLite writes RETURNING's
                # columns unqualified, and `id` in the subquery would be the turn's
                exists(
                    select(Turn.id).where(
                        col(Turn.ws_id) == ref("ended", "ws_id"), col(Turn.status) == TurnStatus.QUEUED
                    )
                ).label("has_queued"),
            )
        ),
        required=False,
    )
    answered = Step(
        "answered",
        lambda ref: message_stored(
            "assistant",
            ref("ended", "ws_id"),
            ref("ended", "id"),
            content="answer_content",
            reasoning="answer_reasoning",
            usage="answer_usage",
            server_blocks="answer_server_blocks",
            created_at="now",
        ),
    )
    return Steps([ended, freed, *([answered] if with_answer else [])])


# A table alias, not the ORM's `aliased` (which made 1.2 MiB of attribute proxies, in every
# process that imports this module).
_CHILD = Workstream.__table__.alias("child")  # type: ignore[attr-defined]


def with_workstream(s: Session, turn_id: str) -> tuple[Turn, Workstream]:
    """A turn and its workstream, read in one statement (a phase begins with both)."""
    found = s.exec(_WITH_WORKSTREAM, params={"turn_id": turn_id}).one()
    return found[0], found[1]


_WITH_WORKSTREAM = (
    select(Turn, Workstream)
    .join(Workstream, col(Workstream.id) == col(Turn.ws_id))
    .where(col(Turn.id) == bindparam("turn_id"))
)


def set_state(s: Session, ws_id: str, state: WorkstreamState) -> None:
    """The workstream's state, in the caller's transaction; an object of it that the session
    holds keeps its old state (the caller reads it no more)."""
    changed = update(Workstream).where(col(Workstream.id) == ws_id).values(state=state, updated_at=utcnow())
    update_rows(s, changed)
