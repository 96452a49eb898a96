"""Task bodies: parse ids, call into app.engine. `app.engine.running.phases` is the turns' error boundary."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down

from app import approval_links, titles
from app.compaction import manual as compaction
from app.engine.life import calls, cancel
from app.engine.running import chain, sweeper
from app.judge import model as judge_model
from app.providers import health
from app.runtime import Runtime
from app.sandbox import folders
from app.settings import Settings
from app.taskqueue import (
    BUDGET_WARNING_TASK,
    COMPACT_TASK,
    DELIVER_WEBHOOK_TASK,
    FINISH_CALL_TASK,
    JUDGE_TASK,
    MODEL_HEALTH_TASK,
    MODEL_STEP_TASK,
    PUSH_APPROVAL_TASK,
    STOP_CHILDREN_TASK,
    SWEEP_TASK,
    TITLE_TASK,
    TOOL_BATCH_TASK,
    TOOLS_QUEUE,
    WATCH_PASS_TASK,
    WATCH_POLL_TASK,
)
from app.tools.commands import scripts
from app.usage import warnings
from app.watches import poller
from app.webhooks import deliveries

log = logging.getLogger(__name__)

_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    """One runtime per worker process, shared by its pool threads."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = Runtime.create(Settings.load())
        return _runtime


@worker_ready.connect
def _run_own_handoffs(sender: Any = None, **_: Any) -> None:
    """A phase task may run its turn's next phase itself when this worker consumes its queue."""
    runtime().queue.local_queues = frozenset(sender.app.amqp.queues.consume_from)


@worker_ready.connect
def _check_data_root(sender: Any = None, **_: Any) -> None:
    """A worker whose data root is not the one the service shares takes no tool batches (their
    folders are not there): the other workers run them (docs/security.md, "Working folders")."""
    rt = runtime()
    problem = folders.check_shared(rt.settings, rt.db)
    rt.data_root_problem = problem
    if problem is not None and sender is not None:
        log.error("this worker takes no tool batches: %s", problem)
        sender.cancel_task_queue(TOOLS_QUEUE)


@worker_ready.connect
def _sweep_command_scripts(**_: Any) -> None:
    """What workers killed before this one left in the temp folder (their watchdogs remove
    their own; a watchdog killed with its worker cannot)."""
    removed = scripts.sweep()
    if removed:
        log.info("removed the command scripts of %d worker(s) that are gone", removed)


@worker_shutting_down.connect
def _send_handoffs(**_: Any) -> None:
    """From now on every next phase is sent: a warm shutdown waits for a phase, not a turn."""
    runtime().queue.local_queues = frozenset()


@shared_task(name=MODEL_STEP_TASK)
def model_step(turn_id: str, step: int) -> None:
    chain.run(runtime(), MODEL_STEP_TASK, turn_id, int(step))


@shared_task(name=TOOL_BATCH_TASK)
def tool_batch(turn_id: str, step: int) -> None:
    chain.run(runtime(), TOOL_BATCH_TASK, turn_id, int(step))


@shared_task(name=FINISH_CALL_TASK)
def finish_call(turn_id: str, call_id: str, output: str, is_error: bool = False) -> bool:
    return calls.finish_waiting(runtime(), turn_id, call_id, str(output), bool(is_error))


@shared_task(name=STOP_CHILDREN_TASK)
def stop_children(turn_id: str) -> list[str]:
    return cancel.stop_children(runtime(), turn_id)


@shared_task(name=COMPACT_TASK)
def compact(ws_id: str, upto: int) -> str:
    return compaction.run(runtime(), str(ws_id), int(upto))


@shared_task(name=BUDGET_WARNING_TASK)
def budget_warning(message: str) -> int:
    return warnings.send(runtime(), str(message))


@shared_task(name=TITLE_TASK)
def title(ws_id: str) -> str | None:
    return titles.write(runtime(), str(ws_id))


@shared_task(name=PUSH_APPROVAL_TASK)
def push_approval(ws_id: str, turn_id: str, step: int) -> bool:
    return approval_links.push(runtime(), str(ws_id), str(turn_id), int(step))


@shared_task(name=JUDGE_TASK)
def judge(ws_id: str, turn_id: str, step: int) -> int:
    return judge_model.judge_step(runtime(), str(ws_id), str(turn_id), int(step))


@shared_task(name=SWEEP_TASK)
def sweep() -> int:
    return sweeper.sweep(runtime())


@shared_task(name=WATCH_PASS_TASK)
def watch_pass() -> int:
    return poller.run_pass(runtime())


@shared_task(name=MODEL_HEALTH_TASK)
def model_health() -> int:
    """Probe every model's server; how many are degraded."""
    rt = runtime()
    return sum(h.state == health.DEGRADED for h in health.check_all(rt.redis, rt.settings).values())


@shared_task(name=WATCH_POLL_TASK)
def watch_poll(watch_id: str, claim_token: str) -> None:
    poller.poll(runtime(), str(watch_id), str(claim_token))


@shared_task(name=DELIVER_WEBHOOK_TASK)
def deliver_webhook(delivery_id: str) -> str | None:
    return deliveries.attempt(runtime(), str(delivery_id))
