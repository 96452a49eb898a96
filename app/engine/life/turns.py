"""Turns: opening one per message, one active per workstream, the rest queued behind it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import cache, partial
from typing import Any

import sqlalchemy
from sqlalchemy import DateTime, Insert, bindparam, case, exists, insert, literal, null, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from app.coordination import waits
from app.engine.life.transition import Done, Ref, Step, Steps, run_alone
from app.engine.publishing.outbox import Defer, Outbox, ordered
from app.engine.subagents import fanin
from app.errors import ConflictError, NotFoundError, PayloadTooLargeError
from app.events import EventType, Fence
from app.metrics import recording
from app.runtime import Runtime
from app.storage.database import typed
from app.storage.models import (
    Message,
    NameOrigin,
    Turn,
    TurnPhase,
    TurnStatus,
    Workstream,
    WorkstreamState,
    utcnow,
)
from app.tools.core.tool import TASK

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
    their defaults)."""

    id: str
    ws_id: str
    message: str
    origin: str
    idempotency_key: str | None
    created_at: datetime
    attachments: list[dict[str, Any]] | None = None  # sent with the message (app/attachments)


def send(
    rt: Runtime,
    ws_id: str,
    message: str,
    origin: str = "user",
    idempotency_key: str | None = None,
    defer: Defer | None = None,
    attachments: list[dict[str, Any]] | None = None,
) -> Sent:
    """Store the message as a turn and, in the same transaction, start it if the workstream is
    idle with nothing queued; else it is queued behind the active one (or the oldest waiting).

    With an `idempotency_key`, a send repeated with the same key (a client's retry
    after a lost response) returns the turn the first one stored, and stores nothing.
    With `defer`, what follows the commit (the first step's task, the events) is handed to it
    (`outbox.ordered`): the caller answers first and runs it after. `attachments`
    (`app.attachments.for_message`) go to the model with the message.
    """
    check_size(rt, message)
    if idempotency_key is not None and (earlier := _turn_for_key(rt, ws_id, idempotency_key)):
        return Sent(earlier.id, TurnStatus(earlier.status))
    turn = _NewTurn(new_id(), ws_id, message, origin, idempotency_key, utcnow(), attachments)
    try:
        started = _store(rt, turn, defer)
    except IntegrityError:
        # The same key raced in from a second request: the one stored first is the answer.
        if idempotency_key is None or (earlier := _turn_for_key(rt, ws_id, idempotency_key)) is None:
            raise
        return Sent(earlier.id, TurnStatus(earlier.status))
    return Sent(turn.id, TurnStatus.ACTIVE if started else TurnStatus.QUEUED)


def check_size(rt: Runtime, message: str) -> None:
    """PayloadTooLargeError for a message past `max_message_bytes`."""
    if len(message.encode()) > rt.settings.max_message_bytes:
        raise PayloadTooLargeError(
            f"message is {len(message.encode())} bytes; the limit is {rt.settings.max_message_bytes}"
        )


def _store(rt: Runtime, turn: _NewTurn, defer: Defer | None) -> bool:
    """The new turn stored (`_SENDS`), started if the workstream is idle with nothing queued on
    it; whether it started. An idle workstream whose older turn still waits starts that one once
    this has committed (the oldest goes first)."""
    values = {
        **{f"new_{key}": value for key, value in asdict(turn).items()},
        "message_origin": _stored_origin(turn.origin),
        "now": utcnow(),
    }
    with ordered(rt, turn.ws_id, defer) as out:
        # An idempotency key's clash fails it whole.
        done = run_alone(rt.db, _SENDS, values)
        if done is None:
            _refuse(rt, turn.ws_id)
        assert done is not None
        if done.first("taken") is not None:
            recording.turn_started(None)
            _announce_start(out, turn.id, turn.message, turn.origin, turn.attachments)
            return True
        out.add(EventType.TURN_QUEUED, turn_id=turn.id, message=turn.message, **_sent_with(turn.attachments))
        stored = done.first("stored")
        assert stored is not None
        if stored["is_left_idle"]:
            ws_id = turn.ws_id
            out.after(lambda rt: activate_next(rt, ws_id))
        return False


def _refuse(rt: Runtime, ws_id: str) -> None:
    """Why a message was not stored: no such workstream, or a sub-agent's."""
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
    if ws is None:
        raise NotFoundError(f"no workstream {ws_id}")
    if ws.closed_at is not None:
        raise ConflictError(f"workstream {ws_id} is closed: it takes no more messages")
    raise ConflictError("a sub-agent's workstream takes no messages; message its parent")


def sent_for_key(rt: Runtime, ws_id: str, key: str) -> Sent | None:
    """What the send with idempotency key `key` stored, if one did."""
    earlier = _turn_for_key(rt, ws_id, key)
    return Sent(earlier.id, TurnStatus(earlier.status)) if earlier is not None else None


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
    """`_STARTS` in an ordered transaction: the id of the turn it started. `_AlreadyStarted`
    (rolled back) when a racer moved the turn it picked; on PostgreSQL the pick locks that turn,
    so a racer has committed before it is read again."""
    with ordered(rt, ws_id) as out, rt.db.session() as s:
        done = _STARTS.run(s, {"start_ws": ws_id, "now": utcnow()})
        if done is None:
            return None  # nothing queued, or another turn is active: it starts when that ends
        started = done.first("started")
        if started is None:
            raise _AlreadyStarted(ws_id)  # rolls back the workstream's claim too
        recording.turn_started(s)
        _announce_start(out, started["id"], started["message"], started["origin"], started["attachments"])
        return str(started["id"])


def _taking(turn_id: Any, ws_id: Any, at_once: bool) -> Step:
    """The idle workstream `ws_id` takes `turn_id` as its active turn; with `at_once` (a send's
    new turn) only when it is no sub-agent's, not closed, and no turn is queued on it (the oldest
    goes first)."""
    idle = [col(Workstream.id) == ws_id, col(Workstream.active_turn_id).is_(None)]
    if at_once:
        idle += [
            col(Workstream.parent_call_row).is_(None),
            col(Workstream.closed_at).is_(None),
            ~exists(_queued(ws_id)),
        ]
    return Step(
        "taken",
        lambda ref: (
            update(Workstream)
            .where(*idle)
            .values(active_turn_id=turn_id(ref), state=WorkstreamState.THINKING, updated_at=bindparam("now"))
            .returning(col(Workstream.id), col(Workstream.active_turn_id))
        ),
        required=not at_once,
    )


def _saying(
    message: Callable[[Ref], Any], origin: Callable[[Ref], Any], attachments: Callable[[Ref], Any]
) -> Step:
    """The started turn's message joins the conversation (`taken`'s turn)."""
    names = ["ws_id", "turn_id", "role", "content", "origin", "attachments", "created_at", "is_error"]

    def said(ref: Ref) -> Any:
        ws_id, turn_id = ref("taken", "id"), ref("taken", "active_turn_id")
        row = sqlalchemy.select(
            ws_id,
            turn_id,
            literal("user"),
            message(ref),
            origin(ref),
            attachments(ref),
            bindparam("now", type_=DateTime()),
            literal(False),
        ).where(ws_id.is_not(None), turn_id.is_not(None))
        return insert(Message).from_select(names, row, include_defaults=False).returning(col(Message.id))

    return Step("said", said, required=False)


def _queued(ws_id: Any) -> Any:
    return select(Turn.id).where(col(Turn.ws_id) == ws_id, col(Turn.status) == TurnStatus.QUEUED).limit(1)


# A send: the workstream taken for the new turn at once where it may be, the turn stored (started
# if taken, else queued; not for a missing workstream or a sub-agent's), its message if started.
_NEW = ["id", "ws_id", "message", "origin", "idempotency_key", "created_at", "attachments"]


def _stored(ref: Ref) -> Any:
    started = ref("taken", "id").is_not(None)
    new_ws: Any = bindparam("new_ws_id")
    row = sqlalchemy.select(
        *(typed(Turn, column, f"new_{column}") for column in _NEW),
        case((started, TurnStatus.ACTIVE.value), else_=TurnStatus.QUEUED.value),
        case((started, TurnPhase.MODEL.value), else_=TurnPhase.WAITING.value),
        case((started, ref.clock), else_=null()),
        case((started, ref.clock), else_=null()),
        *(literal(0) for _ in range(4)),
        literal(False),
    ).where(
        exists(
            select(Workstream.id).where(
                col(Workstream.id) == new_ws,
                col(Workstream.parent_call_row).is_(None),
                col(Workstream.closed_at).is_(None),
            )
        )
    )
    columns = [
        *_NEW,
        "status",
        "phase",
        "started_at",
        "enqueued_at",
        "step",
        "attempt",
        "step_claims",
        "step_failures",
    ]
    stored = insert(Turn).from_select([*columns, "cancel_requested"], row, include_defaults=False)
    # Idle, yet not taken: an older turn waits, and starts first.
    idle = exists(
        select(Workstream.id).where(col(Workstream.id) == new_ws, col(Workstream.active_turn_id).is_(None))
    )
    return stored.returning(col(Turn.id), sqlalchemy.and_(~started, idle).label("is_left_idle"))


_SENDS = Steps(
    [
        _taking(lambda ref: bindparam("new_id"), bindparam("new_ws_id"), at_once=True),
        Step("stored", _stored),
        _saying(
            lambda ref: typed(Message, "content", "new_message"),
            lambda ref: typed(Message, "origin", "message_origin"),
            lambda ref: typed(Message, "attachments", "new_attachments"),
        ),
    ]
)


# An activation: the workstream's oldest queued turn picked (and locked), the workstream taken
# for it if idle, the turn started if still queued, its message.
def _oldest(ref: Ref) -> Any:
    return (
        select(Turn.id)
        .where(col(Turn.ws_id) == bindparam("start_ws"), col(Turn.status) == TurnStatus.QUEUED)
        .order_by(col(Turn.created_at), col(Turn.id))
        .limit(1)
        .with_for_update()
    )


def _started(ref: Ref) -> Any:
    return (
        update(Turn)
        .where(col(Turn.id) == ref("taken", "active_turn_id"), col(Turn.status) == TurnStatus.QUEUED)
        .values(status=TurnStatus.ACTIVE, phase=TurnPhase.MODEL, started_at=ref.clock, enqueued_at=ref.clock)
        .returning(col(Turn.id), col(Turn.message), col(Turn.origin), col(Turn.attachments))
    )


def _said_origin(ref: Ref) -> Any:
    origin = ref("started", "origin")
    return case((origin == "user", null()), else_=origin)


_STARTS = Steps(
    [
        Step("oldest", _oldest),
        _taking(lambda ref: ref("oldest", "id"), bindparam("start_ws"), at_once=False),
        Step("started", _started, required=False),
        _saying(
            lambda ref: ref("started", "message"), _said_origin, lambda ref: ref("started", "attachments")
        ),
    ]
)


def message_stored(
    role: str, ws_id: Any, turn_id: Any, is_error: str | None = None, **parameters: str
) -> Insert:
    """A message inserted by a transition's step, for the row a step before it returned (`ws_id`
    and `turn_id` are that step's columns; none when it returned none); each column in
    `parameters` takes the statement's parameter of that name. No error, unless `is_error` names
    the parameter that says."""
    names = ["ws_id", "turn_id", "role", *parameters, "is_error"]
    values = [typed(Message, column, name) for column, name in parameters.items()]
    error = typed(Message, "is_error", is_error) if is_error else literal(False)
    taken = sqlalchemy.select(ws_id, turn_id, literal(role), *values, error).where(
        ws_id.is_not(None), turn_id.is_not(None)
    )
    # The column defaults of a nested INSERT are not filled in: every column it needs is named.
    stored = insert(Message).from_select(names, taken, include_defaults=False)
    return stored.returning(col(Message.id))


# What a turn's end leads to, in one read: whether it answers a parent's call (a sub-agent's),
# sub-agents it started (to stop), a turn queued next.
_AFTER_END = sqlalchemy.select(
    col(Workstream.kind),
    col(Workstream.parent_call_row),
    exists(select(Workstream.id).where(col(Workstream.parent_turn_id) == bindparam("turn_id"))),
    exists(_queued(bindparam("ws_id"))),
    col(Workstream.parent_id),
    col(Workstream.name_origin),
).where(col(Workstream.id) == bindparam("ws_id"))


def _stored_origin(origin: str) -> str | None:
    """A turn that something other than a person started (a watch) says so, stored and shown."""
    return origin if origin != "user" else None


def _sent_with(attachments: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An event's `attachments`, when the message has some."""
    return {"attachments": attachments} if attachments else {}


def _announce_start(
    out: Outbox,
    turn_id: str,
    message: str,
    origin: str | None,
    attachments: list[dict[str, Any]] | None = None,
) -> None:
    """A started turn's events, and its first step sent once its start has committed."""
    said = _stored_origin(origin) if origin else None
    marked: dict[str, Any] = {"origin": said} if said else {}
    out.add(
        EventType.MESSAGE, turn_id=turn_id, role="user", content=message, **marked, **_sent_with(attachments)
    )
    out.add(EventType.STATE_CHANGE, turn_id=turn_id, state=WorkstreamState.THINKING)
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
        freed = dict(zip(_FREED, row, strict=True))
    answers_parent = freed["kind"] == TASK and freed["parent_call_row"] is not None
    if answers_parent:
        assert s is not None  # `end_with_answer` leaves a sub-agent's turn to a transaction
        fanin.record_end(s, out, turn_id, ws_id, status, error)
    if freed["has_children"]:
        fanin.stop_children_after(out, turn_id)
    if freed["parent_id"] is not None and freed["kind"] != TASK:  # a coordinator's child
        waits.settle_after(out, freed["parent_id"])
    recording.turn_finished(s, status)
    if freed["has_queued"]:
        out.after(lambda rt: activate_next(rt, ws_id))
    if status == TurnStatus.DONE and freed["name_origin"] == NameOrigin.DEFAULT:
        out.after(partial(_titled, ws_id=ws_id))  # app/titles.py
    return state


def _titled(rt: Runtime, ws_id: str) -> None:
    """A workstream whose first turn ended well is titled, unless titles are off."""
    if rt.settings.titles:
        rt.queue.title(ws_id)


_FREED = ("kind", "parent_call_row", "has_children", "has_queued", "parent_id", "name_origin")  # `_ends`


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
                col(Workstream.parent_id),
                col(Workstream.name_origin),
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
            model="answer_model",
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
