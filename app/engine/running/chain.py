"""A turn's phases run back to back in one task wherever the worker may run them.

A phase ends by handing its turn on (a model step to its tool batch, a batch to the next
model step). Sent through Redis, the next phase waits for the queue and a free thread;
kept, it runs next in the same thread. Nothing durable changes: the hand-off is committed
in the database first, exactly as before it is sent, so a worker that dies between the two
phases leaves a turn the sweeper re-sends as "enqueued and never started", and the next
phase still claims its turn and is fenced like any task.

Only the queues this worker consumes are kept (a worker given only `model_steps` still sends
every batch to `tool_batches`), only the task's own turn (a sub-agent's first step, or the
next queued turn, goes by the queue), and at most `MAX_CHAINED_PHASES` in a row, after which
the turn goes back to the queue behind whatever else waits. A worker that starts shutting
down sends what it kept instead of running it, so a warm shutdown waits for a phase, not
for the rest of a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError

from app.engine.life import calls
from app.engine.life.calls import StartedCall
from app.engine.running import leases, model_step, tool_batch
from app.engine.running.handoff import Handoff, keeping, runs_here
from app.engine.running.leases import fenced
from app.errors import StaleAttemptError
from app.events import Fence
from app.runtime import Runtime
from app.taskqueue import MODEL_STEP_TASK, TOOL_BATCH_TASK

MAX_CHAINED_PHASES = 20

log = logging.getLogger(__name__)

PHASES: dict[str, Callable[[Runtime, str, int, Handoff | None], None]] = {
    MODEL_STEP_TASK: model_step.run,
    TOOL_BATCH_TASK: tool_batch.run,
}


def run(rt: Runtime, task: str, turn_id: str, step: int) -> None:
    """Run the phase task `task`, then each phase it hands its own turn on to that this
    worker may run; the rest is sent."""
    handed: Handoff | None = None  # the kept phase, as the hand-off that kept it left it
    for _ in range(MAX_CHAINED_PHASES):
        with keeping(turn_id) as kept:
            PHASES[task](rt, turn_id, step, handed)
        if kept.task is None:
            return
        handed, task, step = kept, kept.task, kept.step
        if not runs_here(rt, task):  # this worker began shutting down meanwhile
            break
    if handed is not None and handed.claim is not None:
        try:
            _give_back(rt, handed.claim, handed.started)
        except (DBAPIError, StaleAttemptError) as exc:
            # A passing fault: the claim goes stale and the sweeper sends the phase again. Or
            # the claim was already taken over: the task that took it runs the phase.
            log.warning("turn %s: could not release its kept claim (%s)", turn_id, type(exc).__name__)
            return
    rt.queue.send_phase(task, turn_id, step)


def _give_back(rt: Runtime, claim: Fence, started: StartedCall | None) -> None:
    """Undo what a kept hand-off took for this task, so that the task sent in its place finds
    the phase as an unkept hand-off leaves it: the call it marked running approved again (it
    never ran), then the claim let go."""
    if started is not None:
        with fenced(rt, claim) as (s, _turn):
            calls.unstart(s, started.row)
    leases.release(rt, claim)
