"""Session set-up for the whole suite: a private Redis when nothing answers at the test Redis
address, started before any test module reads that address and stopped however the run ends."""

from __future__ import annotations

import signal
from types import FrameType

import pytest

from tests.integration import services

_PRIVATE_REDIS = pytest.StashKey[services.PrivateRedis | None]()
_REDIS_HEADER = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # Before collection: test modules import REDIS_HOST/REDIS_PORT by value when they load.
    tried = f"{services.REDIS_HOST}:{services.REDIS_PORT}"
    private = services.start_private_redis_if_absent()
    config.stash[_PRIVATE_REDIS] = private
    config.stash[_REDIS_HEADER] = f"redis: {tried}"
    if private is None:
        return
    config.stash[_REDIS_HEADER] = (
        f"redis: nothing answered at {tried}; a private redis-server at 127.0.0.1:{private.port} for this run"
    )
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        # timeout(1) and CI cancellations send SIGTERM, which skips every finally: as an
        # interrupt, the fixtures' finalizers and pytest_unconfigure still run.
        signal.signal(signal.SIGTERM, _interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    private = config.stash.get(_PRIVATE_REDIS, None)
    if private is not None:
        private.stop()
        config.stash[_PRIVATE_REDIS] = None


def pytest_report_header(config: pytest.Config) -> list[str]:
    """One line per service the suite needs, so that a skip is never a surprise."""
    pg = f"postgresql: {services.PG_ADMIN_URL}"
    if not services.is_postgres_reachable():
        pg += " is not reachable: " + (
            "its tests fail (CI is set)"
            if services.is_ci()
            else "its tests are skipped (set TEST_PG_ADMIN_URL)"
        )
    return [config.stash.get(_REDIS_HEADER, "redis: ?"), pg]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
