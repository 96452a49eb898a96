"""Claims and fencing: which attempt of a turn may run its current phase and write.

A task claims a turn's phase by bumping `attempt`; the claim succeeds only when
no other attempt holds a fresh heartbeat. Every later write re-checks the
attempt inside its own transaction, so a stale worker's writes are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, DateTime, Interval, Update, bindparam, case, or_, select, update
from sqlmodel import Session, col

from app.engine.publishing.outbox import wait_for_order
from app.engine.running.heartbeats import HeldClaim
from app.errors import StaleAttemptError
from app.events import Fence
from app.runtime import Runtime
from app.storage.database import Database
from app.storage.models import Turn, TurnStatus


class Claim(NamedTuple):
    """A phase taken by this task: its fence, how many times the phase has now been claimed,
    and how many of the attempts before this one raised."""

    fence: Fence
    claims: int
    failures: int


def claim(rt: Runtime, turn_id: str, phase: str, step: int) -> Claim | None:
    """Take the turn's `phase` at `step` for this task; None when that is not ours to run."""
    # One statement where the update returns the turn: on PostgreSQL it commits by itself.
    returning = rt.db.engine.dialect.update_returning
    with rt.db.one_statement() if returning else rt.db.session() as s:
        claimed = _claimed(rt, s, turn_id=turn_id, of_phase=phase, at_step=step)
        if claimed is None:
            return None
        fence, ws_id = Fence(turn_id, claimed.attempt), claimed.ws_id
    if rt.events.set_fence(fence, ws_id):  # the transition that sent this phase may be still
        wait_for_order(rt, ws_id)  # sending its events (`Outbox.on_commit`): ours come after
    return Claim(fence, claimed.step_claims, claimed.step_failures)


def count_failure(rt: Runtime, fence: Fence) -> None:
    """The attempt under `fence` raised: one more toward the poison guard (`phases.run_phase`)."""
    with rt.db.one_statement() as s:
        s.exec(
            update(Turn)
            .where(col(Turn.id) == fence.turn_id, col(Turn.attempt) == fence.attempt)
            .values(step_failures=Turn.step_failures + 1)
        )


def fenced_at(phase: str) -> list[ColumnElement[bool]]:
    """The conditions under which a transition run as statements of its own may write: its turn
    (the parameter `fenced_turn`) still under its fence (`fenced_attempt`), active, in `phase`
    at its step (`fenced_step`), with no cancel asked. `fenced_values` gives the parameters."""
    return [
        col(Turn.id) == bindparam("fenced_turn"),
        col(Turn.attempt) == bindparam("fenced_attempt"),
        col(Turn.status) == TurnStatus.ACTIVE,
        col(Turn.phase) == phase,
        col(Turn.step) == bindparam("fenced_step"),
        col(Turn.cancel_requested).is_(False),
    ]


def fenced_values(fence: Fence, step: int) -> dict[str, Any]:
    """The parameters of `fenced_at`'s conditions."""
    return {"fenced_turn": fence.turn_id, "fenced_attempt": fence.attempt, "fenced_step": step}


def handed_on(keep: bool, now: Any) -> dict[str, Any]:
    """The values of an UPDATE of the turn's row that hands it on to its next phase (its phase
    and step set beside them): claimed for this task when it `keep`s that phase
    (`TaskQueue.will_keep`), so that it starts without a claim of its own, else let go (no
    live claim left on it, its claims counted from zero); the phase's start and enqueue times.
    `now` is the lease clock as the statement has it.

    A claim made so is an ordinary one: should this worker die before its heartbeat starts,
    it goes stale and the sweeper sends the phase again; one that ends up sent instead of
    run (the worker began shutting down) is released first (`release`)."""
    return {
        "attempt": Turn.attempt + 1 if keep else Turn.attempt,
        "step_claims": 1 if keep else 0,
        "step_failures": 0,
        "heartbeat_at": now if keep else None,
        "phase_started_at": now,
        "enqueued_at": now,
    }


def let_go(turn: Turn) -> None:
    """Inside the transaction that parks or hands on `turn`: no live claim is left on it (no
    heartbeat), and its next phase's claims are counted from zero."""
    turn.heartbeat_at = None
    turn.step_claims = 0
    turn.step_failures = 0


def release(rt: Runtime, fence: Fence) -> None:
    """Let go of a claim no task of this worker will run, so that the task sent for its phase
    may take it at once (not a stale period later). It ran nothing, so it does not count
    against the phase's attempts."""
    with rt.db.one_statement() as s:
        s.exec(
            update(Turn)
            .where(col(Turn.id) == fence.turn_id, col(Turn.attempt) == fence.attempt)
            .values(heartbeat_at=None, step_claims=Turn.step_claims - 1)
        )


def beat(rt: Runtime, s: Session, fence: Fence) -> bool:
    """Refresh the claim's heartbeat; False once it is gone (superseded, or released by the
    phase's end: a beat after that must not look like a live claim to the next phase's task)."""
    result = s.exec(
        update(Turn)
        .where(
            col(Turn.id) == fence.turn_id,
            col(Turn.attempt) == fence.attempt,
            col(Turn.heartbeat_at).is_not(None),
        )
        .values(heartbeat_at=rt.db.now())
    )
    return bool(result.rowcount == 1)


def check(rt: Runtime, s: Session, fence: Fence) -> Turn:
    """Inside a write transaction: the turn, locked, or StaleAttemptError.

    The heartbeat is refreshed only while it is held: a phase that has released its
    claim (parked, handed on) must not look claimed again to the next phase's task."""
    turn = _updated(rt, s, _CHECK, turn_id=fence.turn_id, fenced_attempt=fence.attempt)
    if turn is None:
        raise StaleAttemptError(fence.turn_id)
    return turn


class _Leased:
    """An update of one turn's lease, built once per kind of database (building one cost more
    than running it, on every claim and every fenced write): `where` and `values` make its
    clauses from the lease clock's `now` and `stale` (see `_updated`); it takes `turn_id` and
    the parameters its clauses name (not a column's name: an update keeps those for itself)."""

    def __init__(
        self,
        where: Callable[[Any, Any], list[Any]],
        values: Callable[[Any, Any], dict[str, Any]],
        returns: tuple[Any, ...] = (Turn,),
    ) -> None:
        self._where, self._values, self._returns = where, values, returns
        self._built: dict[tuple[bool, bool], Update] = {}

    def statement(self, db: Database, returning: bool) -> Update:
        built = self._built.get((db.is_postgresql, returning))
        if built is None:
            now = db.now_bound()
            stale: Any
            if db.is_postgresql:
                stale = now - bindparam("stale_after", type_=Interval())
            else:  # typed as the lease columns are (SQLModel's datetime)
                stale = bindparam("stale", type_=DateTime())
            statement = (
                update(Turn)
                .where(col(Turn.id) == bindparam("turn_id"), *self._where(now, stale))
                .values(**self._values(now, stale))
            )
            built = statement.returning(*self._returns) if returning else statement
            self._built[db.is_postgresql, returning] = built
        return built


# What a claim needs of the turn: read as a row, not loaded into the ORM (a claim starts every
# phase, and loading the whole turn cost more than the statement).
_CLAIMED = (col(Turn.attempt), col(Turn.step_claims), col(Turn.step_failures), col(Turn.ws_id))
_CLAIM = _Leased(
    lambda now, stale: [
        col(Turn.status) == TurnStatus.ACTIVE,
        col(Turn.phase) == bindparam("of_phase"),
        col(Turn.step) == bindparam("at_step"),
        or_(col(Turn.heartbeat_at).is_(None), col(Turn.heartbeat_at) < stale),
    ],
    lambda now, stale: {
        "attempt": Turn.attempt + 1,
        "step_claims": Turn.step_claims + 1,
        "heartbeat_at": now,
    },
    returns=_CLAIMED,
)
_CHECK = _Leased(
    lambda now, stale: [col(Turn.attempt) == bindparam("fenced_attempt")],
    lambda now, stale: {"heartbeat_at": case((col(Turn.heartbeat_at).is_(None), None), else_=now)},
)


def _updated(rt: Runtime, s: Session, leased: _Leased, **params: Any) -> Turn | None:
    """Run an update of one turn, the first statement of `s`; the turn as it now is, or None
    when no row matched. Where the database returns rows from an update (PostgreSQL, SQLite
    3.35+) that is one statement."""
    _with_lease_clock(rt, params)
    # Nothing is loaded in `s` yet: no object for the ORM to bring up to date in Python.
    options = {"synchronize_session": False}
    if s.get_bind().dialect.update_returning:
        returning = leased.statement(rt.db, returning=True)
        return s.scalars(returning, params, execution_options={**options, "populate_existing": True}).first()
    updated = s.exec(leased.statement(rt.db, returning=False), params=params, execution_options=options)
    if updated.rowcount != 1:
        return None
    return s.get(Turn, params["turn_id"], populate_existing=True)


class _Claimed(NamedTuple):
    attempt: int
    step_claims: int
    step_failures: int
    ws_id: str


def _claimed(rt: Runtime, s: Session, **params: Any) -> _Claimed | None:
    """`_CLAIM` run: the turn's `_CLAIMED` columns as they now are, or None when it was not
    ours to take."""
    _with_lease_clock(rt, params)
    conn = s.connection()
    if conn.dialect.update_returning:
        row = conn.execute(_CLAIM.statement(rt.db, returning=True), params).first()
    elif conn.execute(_CLAIM.statement(rt.db, returning=False), params).rowcount != 1:
        return None
    else:
        row = conn.execute(select(*_CLAIMED).where(col(Turn.id) == params["turn_id"])).first()
    return None if row is None else _Claimed(*row)


def _with_lease_clock(rt: Runtime, params: dict[str, Any]) -> None:
    """The lease clock's parameters: on PostgreSQL the statement reads the server's clock and
    takes the stale period; elsewhere `now` and `stale` are this machine's, passed in."""
    stale_after = timedelta(seconds=rt.settings.stale_after_seconds)
    if rt.db.is_postgresql:
        params["stale_after"] = stale_after
    else:
        now = rt.db.now()
        params.update(now=now, stale=now - stale_after)


@contextmanager
def fenced(rt: Runtime, fence: Fence) -> Iterator[tuple[Session, Turn]]:
    with rt.db.session() as s:
        yield s, check(rt, s, fence)


@contextmanager
def kept_alive(rt: Runtime, fence: Fence) -> Iterator[HeldClaim]:
    """Keep the claim fresh while the block (a phase) runs: the runtime's one heartbeat thread
    refreshes it (`app.engine.running.heartbeats`); `superseded` once it is found gone."""

    def refresh(held: Fence) -> bool:
        with rt.db.one_statement() as s:
            return beat(rt, s, held)

    with rt.heartbeats.holding(fence, refresh, rt.settings.heartbeat_seconds) as held:
        yield held
