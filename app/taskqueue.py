"""The Celery client side: configuration, queue names, and enqueueing tasks by name.

`app/` never imports `workers/`; it sends tasks by their names, and `workers/`
registers the task bodies on the same configuration.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from celery import Celery

from app.broker import TRANSPORT
from app.settings import Settings

if TYPE_CHECKING:
    from app.events import Fence

MODEL_STEP_TASK = "turnstone.model_step"
TOOL_BATCH_TASK = "turnstone.tool_batch"
SWEEP_TASK = "turnstone.sweep"
FINISH_CALL_TASK = "turnstone.finish_call"
STOP_CHILDREN_TASK = "turnstone.stop_children"  # an ended turn's sub-agents still working
WATCH_PASS_TASK = "turnstone.watch_pass"  # beat: claim the due watches, enqueue their polls
WATCH_POLL_TASK = "turnstone.watch_poll"  # one poll of one watch: a command, on the tool queue

MODEL_QUEUE = "model_steps"
TOOLS_QUEUE = "tool_batches"
# Recovery and the ends of waiting calls: short tasks that must not wait behind a backlog
# of model steps. Every worker consumes it.
CONTROL_QUEUE = "control"
QUEUES = (MODEL_QUEUE, TOOLS_QUEUE, CONTROL_QUEUE)
PHASE_QUEUES = {MODEL_STEP_TASK: MODEL_QUEUE, TOOL_BATCH_TASK: TOOLS_QUEUE}  # a turn's two phase tasks

# Longer than any step may run (bash is capped at 600 s); the sweeper, not this,
# is what recovers a step whose worker died.
VISIBILITY_TIMEOUT_SECONDS = 2 * 3600


def make_celery(settings: Settings, name: str = "turnstone-jobs") -> Celery:
    # No fix-ups: Celery's only built-in one is Django's, which imports the whole worker
    # (celery.worker) into every process that touches the configuration, beat and web included.
    celery = Celery(name, broker=settings.redis_url, set_as_current=False, fixups=[])
    celery.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=MODEL_QUEUE,
        task_routes={
            MODEL_STEP_TASK: {"queue": MODEL_QUEUE},
            SWEEP_TASK: {"queue": CONTROL_QUEUE},
            FINISH_CALL_TASK: {"queue": CONTROL_QUEUE},
            TOOL_BATCH_TASK: {"queue": TOOLS_QUEUE},
            WATCH_PASS_TASK: {"queue": CONTROL_QUEUE},
            WATCH_POLL_TASK: {"queue": TOOLS_QUEUE},
        },
        broker_transport=TRANSPORT,  # kombu's Redis transport, which a dropped link cannot crash
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_SECONDS},
        broker_connection_retry_on_startup=True,
        worker_send_task_events=False,
        worker_hijack_root_logger=False,
    )
    return celery


@dataclass
class Handoff:
    """A turn's next phase, kept by the task that ended the phase before it (`TaskQueue.keeping`)."""

    turn_id: str
    task: str | None = None
    step: int = 0
    claim: Fence | None = None  # the next phase, claimed for this task by the hand-off itself
    # What the hand-off began of that phase, for it to take up (a batch's only call, already
    # marked running: app.engine.life.calls.StartedCall); only ever with a claim.
    started: Any = None


class TaskQueue:
    """Enqueues the engine's tasks; ids only, never objects.

    In a worker, a phase task may keep its own turn's next phase instead of sending it
    (`keeping`): when this worker consumes that phase's queue, the task runs it next, in the
    same thread, and the turn skips a trip through Redis and a wait for a free thread."""

    def __init__(self, celery: Celery) -> None:
        self.celery = celery
        # The queues whose phases a task of this process may run itself: set by a worker to
        # the queues it consumes, emptied when it starts shutting down (what is kept then is sent).
        self.local_queues: frozenset[str] = frozenset()
        self._kept = threading.local()

    def model_step(self, turn_id: str, step: int, claim: Fence | None = None) -> None:
        self._phase(MODEL_STEP_TASK, turn_id, step, claim)

    def tool_batch(self, turn_id: str, step: int, claim: Fence | None = None, started: Any = None) -> None:
        self._phase(TOOL_BATCH_TASK, turn_id, step, claim, started)

    def send_phase(self, task: str, turn_id: str, step: int) -> None:
        """Send a phase task whatever is being kept (a kept phase this worker will not run)."""
        self.celery.send_task(task, args=[turn_id, step], queue=PHASE_QUEUES[task])

    def runs_here(self, task: str) -> bool:
        """Whether this process's worker consumes the queue the phase task `task` travels on."""
        return PHASE_QUEUES[task] in self.local_queues

    @contextmanager
    def keeping(self, turn_id: str) -> Iterator[Handoff]:
        """Within: the first hand-off of `turn_id` to a phase whose queue this worker consumes
        is kept in the yielded `Handoff` rather than sent. Any other turn's (a sub-agent's
        first step, the next queued turn) is sent as always."""
        kept = Handoff(turn_id)
        self._kept.handoff = kept
        try:
            yield kept
        finally:
            self._kept.handoff = None

    def will_keep(self, turn_id: str, task: str) -> bool:
        """Whether a hand-off of `turn_id` to `task` made now would be kept (see `keeping`)."""
        return self._keeper(turn_id) is not None and self.runs_here(task)

    def _keeper(self, turn_id: str) -> Handoff | None:
        """The hand-off this thread keeps for `turn_id`, while it holds none yet."""
        kept: Handoff | None = getattr(self._kept, "handoff", None)
        return kept if kept is not None and kept.turn_id == turn_id and kept.task is None else None

    def _phase(self, task: str, turn_id: str, step: int, claim: Fence | None, started: Any = None) -> None:
        """Keep the hand-off or send it. One that comes with its claim was judged keepable
        (`will_keep`) inside the transaction that claimed it: it is kept whatever, and the keeper
        releases the claim should it end up sending the phase (`chain.run`)."""
        kept = self._keeper(turn_id)
        if (claim is not None or started is not None) and kept is None:
            raise RuntimeError(f"turn {turn_id}: a claimed hand-off with no keeper")
        if started is not None and claim is None:
            raise RuntimeError(f"turn {turn_id}: a hand-off that began its phase without claiming it")
        if kept is None or (claim is None and not self.runs_here(task)):
            self.send_phase(task, turn_id, step)
        else:
            kept.task, kept.step, kept.claim, kept.started = task, step, claim, started

    def finish_call(self, turn_id: str, call_id: str, output: str, is_error: bool = False) -> None:
        """End a waiting call from anywhere (a sub-agent's end, an external event)."""
        self.celery.send_task(
            FINISH_CALL_TASK, args=[turn_id, call_id, output, is_error], queue=CONTROL_QUEUE
        )

    def stop_children(self, turn_id: str) -> None:
        """Cancel the sub-agents of the ended turn `turn_id` that still work."""
        self.celery.send_task(STOP_CHILDREN_TASK, args=[turn_id], queue=CONTROL_QUEUE)

    def watch_poll(self, watch_id: str, claim_token: str) -> None:
        self.celery.send_task(WATCH_POLL_TASK, args=[watch_id, claim_token], queue=TOOLS_QUEUE)
