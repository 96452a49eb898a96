"""A run's status and how the API shows it, read from what is stored: the run's row, its turn,
the turn's calls and messages. Nothing here is kept in a process, so a worker killed at any point
changes only when the run's end is seen, never whether it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlmodel import Session, col, select

from app.engine.life import calls as call_store
from app.engine.life.workstreams import total_usage
from app.engine.subagents import family
from app.jobs import tool_outputs
from app.jobs.contract import RUN_KEY_PREFIX, Policy
from app.policies.rules import is_asked
from app.storage.models import Message, Run, ToolCall, Turn, TurnPhase, TurnStatus

# A run stored with no turn this long after its creation was never sent: the request that
# made it stopped between the two writes (it answered no 202), and nothing will send it now.
UNSENT_AFTER = timedelta(seconds=60)


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    REQUIRES_ACTION = "requires_action"  # a client tool's calls wait for the caller's outputs
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


FINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT})


class EndReason(StrEnum):
    """Why the service ended a run (stored before the cancel that ends it)."""

    TIMED_OUT = "timed_out"
    POLICY = "policy"


def status(run: Run, turn: Turn | None, needs_person: bool, needs_outputs: bool = False) -> RunStatus:
    """`needs_person`: a call of the turn (or of a sub-agent it started) waits for a decision;
    `needs_outputs`: a client tool's call waits for the caller's output."""
    if turn is None:
        age = datetime.now(UTC) - aware(run.created_at)
        return RunStatus.FAILED if age > UNSENT_AFTER else RunStatus.QUEUED
    if turn.status == TurnStatus.QUEUED:
        return RunStatus.QUEUED
    if turn.status == TurnStatus.ACTIVE:
        if needs_outputs:
            return RunStatus.REQUIRES_ACTION
        return RunStatus.AWAITING_APPROVAL if needs_person else RunStatus.RUNNING
    if turn.status == TurnStatus.DONE:
        return RunStatus.SUCCEEDED  # it finished, whatever ended it at the same moment
    if turn.status == TurnStatus.CANCELLED:
        if run.end_reason == EndReason.TIMED_OUT:
            return RunStatus.TIMED_OUT
        return RunStatus.FAILED if run.end_reason == EndReason.POLICY else RunStatus.CANCELLED
    return RunStatus.FAILED


def aware(moment: datetime) -> datetime:
    """A stored time as UTC (SQLite hands times back without their zone)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def sent_key(run_id: str) -> str:
    """The idempotency key a run's turn is sent with: its turn is found by it when the request
    that sent it stopped before it wrote the turn's id on the run."""
    return f"{RUN_KEY_PREFIX}{run_id}"


def turn_of(s: Session, run: Run) -> Turn | None:
    if run.turn_id is not None:
        return s.get(Turn, run.turn_id)
    query = select(Turn).where(Turn.ws_id == run.ws_id, Turn.idempotency_key == sent_key(run.id))
    return s.exec(query).first()


def now_of(s: Session, run: Run) -> RunStatus:
    """The run's status alone (what a wait and a listing look at)."""
    turn = turn_of(s, run)
    waiting = bool(tool_outputs.waiting_rows(s, turn))
    return status(run, turn, _needs_person(run, _pending(s, run, turn, _calls(s, turn))), waiting)


def read(s: Session, run: Run) -> dict[str, Any]:
    """The run as `GET /v1/api/runs/{id}` shows it."""
    turn = turn_of(s, run)
    calls = _calls(s, turn)
    pending = _pending(s, run, turn, calls)
    required = tool_outputs.shown(tool_outputs.waiting_rows(s, turn))
    state = status(run, turn, _needs_person(run, pending), bool(required))
    messages = _answers(s, turn)
    return {
        **summary(run, state),
        "turn_id": turn.id if turn else None,
        "prompt": turn.message if turn else None,
        "answer": messages[-1].content if messages and state in FINAL else None,
        "error": _error(run, turn, state),
        "pending_approvals": pending,
        "required_action": {"type": "submit_tool_outputs", "tool_calls": required} if required else None,
        "tools": [t["name"] for t in run.tools],
        "webhook": run.webhook_id,
        "tool_calls": [_call(row) for row in calls],
        "usage": total_usage(dict(m.usage) for m in messages if m.usage),
        "timings": _timings(run, turn),
    }


def summary(run: Run, state: RunStatus) -> dict[str, Any]:
    """The run as a listing shows it."""
    return {
        "run_id": run.id,
        "ws_id": run.ws_id,
        "status": state,
        "policy": run.policy,
        "timeout_s": run.timeout_s,
        "metadata": run.run_metadata,
        "created_at": aware(run.created_at).isoformat(),
    }


def _calls(s: Session, turn: Turn | None) -> list[ToolCall]:
    if turn is None:
        return []
    query = select(ToolCall).where(ToolCall.turn_id == turn.id)
    return list(s.exec(query.order_by(col(ToolCall.step), col(ToolCall.position))).all())


def _pending(s: Session, run: Run, turn: Turn | None, rows: list[ToolCall]) -> list[dict[str, Any]]:
    if turn is None or turn.status != TurnStatus.ACTIVE:
        return []
    if turn.phase == TurnPhase.APPROVAL:
        return [call_store.item(r) for r in rows if r.step == turn.step and r.status == "pending"]
    if turn.phase == TurnPhase.AWAITING:
        return family.pending_items(s, run.ws_id)  # a sub-agent's calls are decided here
    return []


def _needs_person(run: Run, pending: list[dict[str, Any]]) -> bool:
    """Whether a pending call waits for a person: not one the run's policy is about to decide
    (approve it, or fail the run over it) as soon as it sees the turn parked."""
    policy = Policy.from_stored(run.policy)
    if policy.deny_unapproved:
        return False  # what it does not approve fails the run, a sub-agent's call too
    # a call an admin's rule asks a person about is never the run's policy to approve
    return any(is_asked(item.get("rule")) or not policy.approves(item["func_name"]) for item in pending)


def _answers(s: Session, turn: Turn | None) -> list[Message]:
    if turn is None:
        return []
    query = select(Message).where(Message.turn_id == turn.id, Message.role == "assistant")
    return list(s.exec(query.order_by(col(Message.id))).all())


def _call(row: ToolCall) -> dict[str, Any]:
    return {
        "call_id": row.call_id,
        "name": row.func_name,
        "status": row.status,
        "is_error": row.is_error,
        "decided_how": row.decided_how,
    }


def _error(run: Run, turn: Turn | None, state: RunStatus) -> str | None:
    if state == RunStatus.TIMED_OUT:
        return f"the run did not end within its timeout of {run.timeout_s} s"
    if state == RunStatus.FAILED:
        if turn is None:
            return "the run was never sent (the request that made it stopped)"
        return run.end_note or turn.error or "the turn failed"
    return None


def _timings(run: Run, turn: Turn | None) -> dict[str, Any]:
    started = turn.started_at if turn else None
    ended = turn.ended_at if turn else None
    return {
        "created_at": aware(run.created_at).isoformat(),
        "started_at": aware(started).isoformat() if started else None,
        "ended_at": aware(ended).isoformat() if ended else None,
        "deadline_at": aware(run.deadline_at).isoformat() if run.deadline_at else None,
        "duration_s": round((aware(ended) - aware(started)).total_seconds(), 3)
        if started and ended
        else None,
    }
