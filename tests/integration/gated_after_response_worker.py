"""A web worker whose work left for after a response waits until a gate file exists, so a test
can look at what a client has when its answer arrives, before that work has run."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from app.web import after_response
from app.web.gunicorn_worker import JsonThreadWorker

GATE_ENV = "TEST_AFTER_RESPONSE_GATE"  # the gate file's path
GATE_TIMEOUT_SECONDS = 30.0


def _wait_for_gate(work: Callable[[], None]) -> None:
    gate = Path(os.environ[GATE_ENV])
    deadline = time.monotonic() + GATE_TIMEOUT_SECONDS
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    work()


def _gated_deferrer(deferrer: Callable[[], Any]) -> Callable[[Callable[[], None]], None] | None:
    defer = deferrer()
    return None if defer is None else lambda work: defer(partial(_wait_for_gate, work))


class GatedAfterResponseWorker(JsonThreadWorker):
    def init_process(self) -> None:
        after_response.deferrer = partial(_gated_deferrer, after_response.deferrer)
        super().init_process()
