"""Beat's and the worker's lines about housekeeping (the recovery sweep, the watches' pass), at
DEBUG: at INFO they are about 30 lines a minute of an idle service, and say nothing happened."""

from __future__ import annotations

import logging
from typing import Any

from app.taskqueue import MODEL_HEALTH_TASK, SWEEP_TASK, WATCH_PASS_TASK

HOUSEKEEPING_TASKS = frozenset({SWEEP_TASK, WATCH_PASS_TASK, MODEL_HEALTH_TASK})
# Where Celery logs a task sent by beat, received, and done (celery/beat.py, worker/strategy.py,
# app/trace.py): each names the task in its record's arguments.
CELERY_LOGGERS = ("celery.beat", "celery.worker.strategy", "celery.app.trace")


class HousekeepingAtDebug(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not _names_housekeeping(record.args):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _names_housekeeping(args: Any) -> bool:
    if isinstance(args, dict):  # the worker's: a context with the task's name
        return args.get("name") in HOUSEKEEPING_TASKS
    return isinstance(args, tuple) and any(a in HOUSEKEEPING_TASKS for a in args if isinstance(a, str))


def quiet() -> None:
    """Installed once per process, on the loggers themselves (Celery's own set-up of handlers
    later keeps them)."""
    for name in CELERY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, HousekeepingAtDebug) for f in logger.filters):
            logger.addFilter(HousekeepingAtDebug())
