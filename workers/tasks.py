"""Task bodies: parse ids, call into app.engine. `app.engine.phases` is the turns' error boundary."""

from __future__ import annotations

import threading

from celery import shared_task

from app.engine import calls, sweeper
from app.engine import model_step as model_steps
from app.engine import tool_batch as tool_batches
from app.runtime import Runtime
from app.settings import Settings
from app.taskqueue import (
    FINISH_CALL_TASK,
    MODEL_STEP_TASK,
    SWEEP_TASK,
    TOOL_BATCH_TASK,
    WATCH_PASS_TASK,
    WATCH_POLL_TASK,
)
from app.watches import poller

_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    """One runtime per worker process, shared by its pool threads."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = Runtime.create(Settings.load())
        return _runtime


@shared_task(name=MODEL_STEP_TASK)
def model_step(turn_id: str, step: int) -> None:
    model_steps.run(runtime(), turn_id, int(step))


@shared_task(name=TOOL_BATCH_TASK)
def tool_batch(turn_id: str, step: int) -> None:
    tool_batches.run(runtime(), turn_id, int(step))


@shared_task(name=FINISH_CALL_TASK)
def finish_call(turn_id: str, call_id: str, output: str, is_error: bool = False) -> bool:
    return calls.finish_waiting(runtime(), turn_id, call_id, str(output), bool(is_error))


@shared_task(name=SWEEP_TASK)
def sweep() -> int:
    return sweeper.sweep(runtime())


@shared_task(name=WATCH_PASS_TASK)
def watch_pass() -> int:
    return poller.run_pass(runtime())


@shared_task(name=WATCH_POLL_TASK)
def watch_poll(watch_id: str, claim_token: str) -> None:
    poller.poll(runtime(), str(watch_id), str(claim_token))
