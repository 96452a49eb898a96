"""Events recorded as deliveries: a run's end (run.succeeded, run.failed for a failure or a
time-out, run.cancelled), claimed once per run (`runs.notified_at`) in the transaction that
records its deliveries, so that no end is recorded twice or lost; a run waiting for a person
(approval.requested) or for its client's tool outputs (run.requires_action), once per parked
step; a turn's end (turn.completed, app/webhooks/turns.py). Beat's sweep finds the runs that
ended unrecorded and the deliveries that are due."""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import col, select

from app.jobs import links, status
from app.metrics.definitions import RUNS_ENDED
from app.runtime import Runtime
from app.storage.models import Run, Turn, TurnPhase, TurnStatus, utcnow
from app.webhooks import deliveries, turns

EVENT_OF = {
    status.RunStatus.SUCCEEDED: "run.succeeded",
    status.RunStatus.FAILED: "run.failed",
    status.RunStatus.TIMED_OUT: "run.failed",
    status.RunStatus.CANCELLED: "run.cancelled",
}
APPROVAL_REQUESTED = "approval.requested"
REQUIRES_ACTION = "run.requires_action"  # the run's client tools wait for their outputs
DATA_KEYS = ("run_id", "ws_id", "turn_id", "status", "answer", "error", "metadata", "usage", "timings")
SWEEP_BATCH = 200


def run_ended(rt: Runtime, run_id: str) -> list[str]:
    """Record the ended run's event for its owner's endpoints, once; the deliveries made."""
    with rt.db.session() as s:
        run = s.get(Run, run_id)
        if run is None or run.notified_at is not None:
            return []
        shown = status.read(s, run)
        event = EVENT_OF.get(shown["status"])
        if event is None:
            return []  # not ended yet
        claimed = s.exec(
            update(Run)
            .where(col(Run.id) == run_id, col(Run.notified_at).is_(None))
            .values(notified_at=utcnow())
        )
        if claimed.rowcount != 1:
            return []
        data = {key: shown[key] for key in DATA_KEYS}
        made = deliveries.record(s, run.owner_id, event, f"{event}:{run_id}", data, also=run.webhook_id)
    RUNS_ENDED.labels(status=str(shown["status"])).inc()  # committed: counted once per run
    for delivery_id in made:
        rt.queue.deliver_webhook(delivery_id)
    return made


def approvals_waiting(rt: Runtime) -> list[str]:
    """Record `approval.requested` for each run whose turn waits for a person, and
    `run.requires_action` for each whose client tools wait for their outputs, once per parked
    step (its key names the turn and step: recording it again on the next sweep is a no-op)."""
    with rt.db.reader() as s:
        parked = s.exec(
            select(Run, Turn)
            .join(Turn, col(Turn.id) == col(Run.turn_id))
            .where(
                col(Turn.status) == TurnStatus.ACTIVE,
                col(Turn.phase).in_([TurnPhase.APPROVAL, TurnPhase.AWAITING]),
            )
            .limit(SWEEP_BATCH)
        ).all()
    made: list[str] = []
    for run, turn in parked:
        with rt.db.reader() as s:
            shown = status.read(s, run)
        if shown["status"] == status.RunStatus.REQUIRES_ACTION:
            data = {key: shown[key] for key in (*DATA_KEYS, "required_action")}
            key = f"{REQUIRES_ACTION}:{turn.id}:{turn.step}"
            with rt.db.session() as s:
                made += deliveries.record(s, run.owner_id, REQUIRES_ACTION, key, data, also=run.webhook_id)
            continue
        if shown["status"] != status.RunStatus.AWAITING_APPROVAL:
            continue  # its policy decides these calls, or a sub-agent is only working
        data = {key: shown[key] for key in (*DATA_KEYS, "pending_approvals")}
        data["decide_path"] = links.decide_link(rt, run, turn.id, turn.step)  # its own write first
        key = f"approval.requested:{turn.id}:{turn.step}"
        with rt.db.session() as s:
            made += deliveries.record(s, run.owner_id, APPROVAL_REQUESTED, key, data, also=run.webhook_id)
    return made


def sweep(rt: Runtime) -> int:
    """Beat's part: ended runs not yet recorded, runs waiting for a person, then every delivery
    that is due."""
    ended = [TurnStatus.DONE, TurnStatus.CANCELLED, TurnStatus.ERROR]
    with rt.db.reader() as s:
        runs = s.exec(
            select(Run.id)
            .join(Turn, col(Turn.id) == col(Run.turn_id))
            .where(col(Run.notified_at).is_(None), col(Turn.status).in_(ended))
            .limit(SWEEP_BATCH)
        ).all()
    for run_id in runs:
        run_ended(rt, run_id)
    approvals_waiting(rt)
    turns.completed(rt)
    due = deliveries.due(rt)
    for delivery_id in due:
        rt.queue.deliver_webhook(delivery_id)
    return len(runs) + len(due)
