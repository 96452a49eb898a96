"""The floor under `bench.idle_memory`: the Procfile's processes started the same way, with the
libraries the service imports and none of its own code, so what the service itself adds to each
is the difference (issue 9 asks for web + worker + beat under 200 MiB RSS).

Run: python -m bench.library_floor [--settle 5]

The web is a gunicorn master and one gthread worker serving a Flask app that imports Flask,
flask-sock, SQLModel with SQLAlchemy's ORM and SQLite dialect, redis-py, prometheus-client and
makes a Celery app (the web enqueues through one); the worker and beat are Celery's own
commands started as `python -m workers` and `python -m beat` start them, on a Celery app with
one task and the same libraries (beat without the database's).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.idle_memory import children, rollup
from tests.integration import services

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FLOOR_APP = "bench.floor_app"


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def wait_for(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle before measuring")
    args = parser.parse_args()
    private = services.start_private_redis_if_absent()
    redis_url = f"redis://{services.REDIS_HOST}:{services.REDIS_PORT}/{services.lease_redis_db()}"
    port = services.free_port()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "REDIS_URL": redis_url, "PYTHONPATH": str(ROOT)}
            log = Path(tmp) / "floor.log"
            processes["web"] = start(
                [str(BIN / "gunicorn"), "--worker-class", "gthread", "--workers", "1",
                 "--threads", "32", "--bind", f"127.0.0.1:{port}", f"{FLOOR_APP}:web()"],
                env, log,
            )  # fmt: skip
            processes["worker"] = start(
                [sys.executable, "-m", FLOOR_APP, "worker", "--pool", "threads", "--concurrency",
                 "8", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
                env, log,
            )  # fmt: skip
            processes["beat"] = start(
                [sys.executable, "-m", FLOOR_APP, "beat", "--schedule", str(Path(tmp) / "schedule"),
                 "--loglevel", "WARNING"],
                env, log,
            )  # fmt: skip
            wait_for(f"http://127.0.0.1:{port}/health")
            time.sleep(args.settle)
            rows = []
            for name, proc in processes.items():
                assert proc.poll() is None, log.read_text()[-2000:]
                for pid in children(proc.pid):
                    rows.append((name, pid, *rollup(pid)))
    finally:
        for proc in processes.values():
            proc.terminate()
            proc.wait(timeout=30)
        if private is not None:
            private.stop()
    print(f"libraries only, idle {args.settle:g} s")
    print(f"{'part':<8}{'pid':>8}{'RSS MiB':>9}{'PSS MiB':>9}")
    for name, pid, rss, pss in rows:
        print(f"{name:<8}{pid:>8}{rss:>9.1f}{pss:>9.1f}")
    print(f"{'total':<16}{sum(r[2] for r in rows):>9.1f}{sum(r[3] for r in rows):>9.1f}")


if __name__ == "__main__":
    main()
