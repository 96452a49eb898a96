"""What a worker does once it has started and as it stops: announce itself in Redis while it runs
(what /health counts), run its MCP servers, and settle what it keeps (`app.gc_settle`)."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready, worker_shutdown

from app import gc_settle
from app.presence import Presence
from workers.tasks import runtime

_presence: Presence | None = None


@worker_ready.connect
def _announce(sender: Any = None, **_: Any) -> None:
    global _presence
    _presence = Presence(runtime().redis, str(getattr(sender, "hostname", "worker")))
    _presence.start()
    runtime().mcp.start()  # this process's MCP servers: spawned here, never in the web tier
    runtime().sandbox.warn_if_unjailed()  # loudly, where the commands run
    gc_settle.settle()  # everything above is kept for the worker's life


@worker_shutdown.connect
def _withdraw(**_: Any) -> None:
    if _presence is not None:
        _presence.stop()
        runtime().mcp.stop()
