"""gunicorn's server hooks (`--config python:app.web.gunicorn_config`, as the Procfile runs it):
a dead worker's open websockets stop counting in /metrics, and a worker that has loaded the app
settles what it keeps (`app.gc_settle`). No control socket: gunicorn 25.1+ opens one at the same
path (~/.gunicorn/gunicorn.ctl) for every master of the machine, each new one taking it over,
and nothing here uses it (an older gunicorn ignores the unknown setting)."""

from __future__ import annotations

from typing import Any

from app import gc_settle
from app.metrics import folder

control_socket_disable = True


def on_starting(server: Any) -> None:
    folder.forget_dead_processes()


def child_exit(server: Any, worker: Any) -> None:
    folder.forget_process(worker.pid)


def post_worker_init(worker: Any) -> None:
    gc_settle.settle()
