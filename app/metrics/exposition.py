"""The text `/metrics` answers with.

With PROMETHEUS_MULTIPROC_DIR set (`turnstone-jobs run` and compose set it), every process of the
host (gunicorn's workers, the Celery worker) writes its counts to files there and any web
process sums them all; without it, a web process shows its own counts only."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

from app.metrics.definitions import OWN_METRICS
from app.metrics.folder import multiproc_dir
from app.metrics.state import StateCollector
from app.runtime import Runtime

CONTENT_TYPE = CONTENT_TYPE_LATEST


def render(rt: Runtime) -> bytes:
    registry = CollectorRegistry()
    if multiproc_dir() is not None:
        multiprocess.MultiProcessCollector(registry)
    else:
        for metric in OWN_METRICS:
            registry.register(metric)
    registry.register(StateCollector(rt))
    return generate_latest(registry)
