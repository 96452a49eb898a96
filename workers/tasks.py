"""Task bodies: parse ids, call into app.engine. The task wrapper is an error boundary."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from celery import shared_task

from app.engine import model_step as model_steps
from app.engine import sweeper
from app.engine import tool_batch as tool_batches
from app.engine.recovery import fail_turn
from app.runtime import Runtime
from app.settings import Settings
from app.taskqueue import MODEL_STEP_TASK, SWEEP_TASK, TOOL_BATCH_TASK

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


def _guarded(turn_id: str, body: Callable[[], None]) -> None:
    try:
        body()
    except Exception:  # the task boundary: a bug ends the turn with an error, never a hang
        log.exception("turn %s: step failed", turn_id)
        fail_turn(runtime(), turn_id, "internal error while running this turn; see the worker log")


@shared_task(name=MODEL_STEP_TASK)
def model_step(turn_id: str, step: int) -> None:
    _guarded(turn_id, lambda: model_steps.run(runtime(), turn_id, int(step)))


@shared_task(name=TOOL_BATCH_TASK)
def tool_batch(turn_id: str, step: int) -> None:
    _guarded(turn_id, lambda: tool_batches.run(runtime(), turn_id, int(step)))


@shared_task(name=SWEEP_TASK)
def sweep() -> int:
    return sweeper.sweep(runtime())
