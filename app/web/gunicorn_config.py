"""gunicorn's server hooks (`--config python:app.web.gunicorn_config`, as the Procfile runs it):
a dead worker's open websockets stop counting in /metrics, and a worker that has loaded the app
settles what it keeps (`app.gc_settle`)."""

from __future__ import annotations

from typing import Any

from app import gc_settle
from app.metrics import folder


def on_starting(server: Any) -> None:
    folder.forget_dead_processes()


def child_exit(server: Any, worker: Any) -> None:
    folder.forget_process(worker.pid)


def post_worker_init(worker: Any) -> None:
    gc_settle.settle()
