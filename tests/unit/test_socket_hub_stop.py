"""Stopping a web process's websocket hub. Ctrl-C reaches a gunicorn worker twice (the terminal's
SIGINT, then its master's SIGQUIT), so `stop` runs twice: the second must find the loop already
stopped and return at once, not wait on a loop that will never run its close (a 3-second hang and
a warning written from inside a signal handler)."""

from __future__ import annotations

import logging
import time

import pytest

from app.web.sockets.hub import Hub, Limits

NOWHERE = "redis://127.0.0.1:9/0"  # nothing here needs an answer: no socket was ever served


def _hub() -> Hub:
    limits = Limits(
        ping_seconds=20, reauth_seconds=60, max_unsent=64, max_message=65536, per_principal=8, per_process=64
    )
    return Hub(NOWHERE, work=None, limits=limits)  # type: ignore[arg-type]


def test_a_second_stop_returns_at_once_and_quietly(caplog: pytest.LogCaptureFixture) -> None:
    hub = _hub()
    hub._ensure_started()
    caplog.set_level(logging.WARNING, logger="app.web.sockets.hub")
    hub.stop()
    started = time.monotonic()
    hub.stop()
    assert time.monotonic() - started < 0.5
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_stopping_a_hub_that_never_served_does_nothing() -> None:
    started = time.monotonic()
    _hub().stop()
    assert time.monotonic() - started < 0.5
