"""A web worker with a 1-second body read timeout, so a test of a stalled client takes 3 s, not 30."""

from __future__ import annotations

from app.web.gunicorn_worker import JsonThreadWorker


class ShortReadTimeoutWorker(JsonThreadWorker):
    read_timeout = 3.0
