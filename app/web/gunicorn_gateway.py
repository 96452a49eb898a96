"""gunicorn's settings for the channel gateway (Procfile `gateway`): no control socket, as for
the web (app/web/gunicorn_config.py says why), and a worker that settles what it keeps."""

from __future__ import annotations

from typing import Any

from app import gc_settle

control_socket_disable = True


def post_worker_init(worker: Any) -> None:
    gc_settle.settle()
