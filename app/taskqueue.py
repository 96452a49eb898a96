"""The Celery client side: configuration, queue names, and enqueueing tasks by name.

`app/` never imports `workers/`; it sends tasks by their names, and `workers/`
registers the task bodies on the same configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from celery import Celery

from app.broker import TRANSPORT
from app.settings import Settings

if TYPE_CHECKING:
    pass

MODEL_STEP_TASK = "turnstone.model_step"
TOOL_BATCH_TASK = "turnstone.tool_batch"
SWEEP_TASK = "turnstone.sweep"
FINISH_CALL_TASK = "turnstone.finish_call"
STOP_CHILDREN_TASK = "turnstone.stop_children"  # an ended turn's sub-agents still working
WATCH_PASS_TASK = "turnstone.watch_pass"  # beat: claim the due watches, enqueue their polls
WATCH_POLL_TASK = "turnstone.watch_poll"  # one poll of one watch: a command, on the tool queue
DELIVER_WEBHOOK_TASK = "turnstone.deliver_webhook"  # one attempt of one delivery (app/webhooks)
COMPACT_TASK = "turnstone.compact"  # a compaction a person asked for (app/compaction/manual.py)
BUDGET_WARNING_TASK = "turnstone.budget_warning"  # admins told a budget is nearly spent (app/usage)
TITLE_TASK = "turnstone.title"  # a workstream titled from its first exchange (app/titles.py)
PUSH_APPROVAL_TASK = (
    "turnstone.push_approval"  # a step's waiting calls sent to the owner (app/approval_links.py)
)
JUDGE_TASK = "turnstone.judge"  # a judge model's verdicts on a step's waiting calls (app/judge/model.py)
MODEL_HEALTH_TASK = "turnstone.model_health"  # beat: every model's server probed (app/providers/health.py)

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
            COMPACT_TASK: {"queue": MODEL_QUEUE},
            BUDGET_WARNING_TASK: {"queue": CONTROL_QUEUE},
            TITLE_TASK: {"queue": MODEL_QUEUE},
            JUDGE_TASK: {"queue": MODEL_QUEUE},
            PUSH_APPROVAL_TASK: {"queue": CONTROL_QUEUE},
            MODEL_HEALTH_TASK: {"queue": CONTROL_QUEUE},
        },
        broker_transport=TRANSPORT,  # kombu's Redis transport, which a dropped link cannot crash
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_SECONDS},
        broker_connection_retry_on_startup=True,
        worker_send_task_events=False,
        worker_hijack_root_logger=False,
    )
    return celery


class TaskQueue:
    """Enqueues the engine's tasks; ids only, never objects. (A phase task may keep its own
    turn's next phase rather than send it: app.engine.running.handoff.)"""

    def __init__(self, celery: Celery) -> None:
        self.celery = celery
        # The queues this process's worker consumes (its kept phases run here: see
        # app.engine.running.handoff); emptied when it starts shutting down.
        self.local_queues: frozenset[str] = frozenset()

    def model_step(self, turn_id: str, step: int) -> None:
        self.send_phase(MODEL_STEP_TASK, turn_id, step)

    def tool_batch(self, turn_id: str, step: int) -> None:
        self.send_phase(TOOL_BATCH_TASK, turn_id, step)

    def send_phase(self, task: str, turn_id: str, step: int) -> None:
        self.celery.send_task(task, args=[turn_id, step], queue=PHASE_QUEUES[task])

    def finish_call(self, turn_id: str, call_id: str, output: str, is_error: bool = False) -> None:
        """End a waiting call from anywhere (a sub-agent's end, an external event)."""
        self.celery.send_task(
            FINISH_CALL_TASK, args=[turn_id, call_id, output, is_error], queue=CONTROL_QUEUE
        )

    def stop_children(self, turn_id: str) -> None:
        """Cancel the sub-agents of the ended turn `turn_id` that still work."""
        self.celery.send_task(STOP_CHILDREN_TASK, args=[turn_id], queue=CONTROL_QUEUE)

    def deliver_webhook(self, delivery_id: str, countdown: float | None = None) -> None:
        """An attempt at the delivery; `countdown`: not before that many seconds."""
        self.celery.send_task(
            DELIVER_WEBHOOK_TASK, args=[delivery_id], queue=CONTROL_QUEUE, countdown=countdown
        )

    def compact(self, ws_id: str, upto: int) -> None:
        """Summarise the workstream's conversation up to message `upto` (app/compaction/manual.py)."""
        self.celery.send_task(COMPACT_TASK, args=[ws_id, upto], queue=MODEL_QUEUE)

    def budget_warning(self, message: str) -> None:
        """Tell the admins, through notify, that a budget is nearly spent (app/usage/warnings.py)."""
        self.celery.send_task(BUDGET_WARNING_TASK, args=[message], queue=CONTROL_QUEUE)

    def title(self, ws_id: str) -> None:
        """Title the workstream from its first exchange, a side request (app/titles.py)."""
        self.celery.send_task(TITLE_TASK, args=[ws_id], queue=MODEL_QUEUE)

    def judge(self, ws_id: str, turn_id: str, step: int) -> None:
        """A judge model's verdicts on the step's calls that wait for a person (app/judge/model.py)."""
        self.celery.send_task(JUDGE_TASK, args=[ws_id, turn_id, step], queue=MODEL_QUEUE)

    def push_approval(self, ws_id: str, turn_id: str, step: int) -> None:
        """The step's waiting calls to the workstream's owner, with a link (app/approval_links.py)."""
        self.celery.send_task(PUSH_APPROVAL_TASK, args=[ws_id, turn_id, step], queue=CONTROL_QUEUE)

    def watch_poll(self, watch_id: str, claim_token: str) -> None:
        self.celery.send_task(WATCH_POLL_TASK, args=[watch_id, claim_token], queue=TOOLS_QUEUE)
