"""Shared by the benchmarks: the whole service (as the integration tests run it) and figures."""

from __future__ import annotations

import gc
import signal
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.fakes.model_server import FakeModelServer
from tests.integration.client import Api
from tests.integration.services import API_TOKEN, Services, start_private_redis_if_absent

# Production timing rather than the tests' short one.
PRODUCTION_TIMING = {
    "TURNSTONE_HEARTBEAT_SECONDS": "5",
    "TURNSTONE_STALE_AFTER_SECONDS": "30",
    "TURNSTONE_SWEEP_INTERVAL_SECONDS": "10",
    "TURNSTONE_WATCH_POLL_SECONDS": "15",
}


@contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """Within: a SIGTERM (a `kill`, a `timeout`) ends the run as Ctrl-C does, through the blocks
    that stop what it started. The service's processes live in sessions of their own, so a bench
    killed outright would leave them running, and a later run could take the dead run's Redis
    database while its worker still consumes it."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Within: this process's cyclic garbage collector does not run. A bench's process serves the
    fake model and keeps every event it reads; its own full collections, growing with them (over
    200 ms after a few hundred turns), held up the model's answers and showed as the service's
    slowest turns. What it allocates meanwhile is freed by reference counting, or once the
    collector runs again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def running_service(
    backend: str = "sqlite", config_toml: str = "", env: dict[str, str] | None = None
) -> Iterator[tuple[Services, Api, FakeModelServer]]:
    """The service and its fake model; `config_toml` (with `{tmp}` for the run's folder and
    `{anthropic}` for the fake model's Anthropic address) is its
    config.toml when given, `env` more of its processes' environment. The bench's own collector
    is paused meanwhile (`collector_paused`)."""
    # The tests' Redis address, or (nothing answering there) a private Redis for this run.
    private = start_private_redis_if_absent()
    try:
        with (
            stopped_by_sigterm(),
            collector_paused(),
            FakeModelServer() as model,
            tempfile.TemporaryDirectory() as tmp,
        ):
            svc = Services(backend, Path(tmp), model.openai_base_url)
            svc.env.update(PRODUCTION_TIMING)
            svc.env.update(env or {})
            if config_toml:
                config = Path(tmp) / "config.toml"
                text = config_toml.replace("{tmp}", tmp).replace("{anthropic}", model.anthropic_base_url)
                config.write_text(text)
                svc.env["TURNSTONE_CONFIG"] = str(config)
            try:
                svc.start()
                yield svc, Api(svc.base_url, API_TOKEN), model
            finally:
                svc.stop()
    finally:
        if private is not None:
            private.stop()


def ms_summary(label: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"{label:<44} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   (n={len(ms)})"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def thread_count(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))
