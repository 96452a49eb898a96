"""Idle memory of `turnstone-jobs run`, the embedded default as a person starts it: the whole
process tree below the command (its supervisor, the private Redis, web, worker with beat,
gateway), as RSS and PSS from /proc/PID/smaps_rollup (PSS shares pages that processes have in
common among them, so PSS adds up; RSS counts shared pages in each).

Run: python -m bench.idle_memory [--redis private|machine] [--settle 20] [--turns 0]
`--redis private` (the default) points REDIS_URL at a closed port, so the run starts its own, as
on a bare machine; `machine` uses the Redis at 127.0.0.1:6379 (database 7). With `--turns N` it
first runs N plain turns, so the figures include what serving them loaded (the model SDK, the
first connections). The run is stopped with SIGINT, as Ctrl-C does, and its stop is timed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.fakes.model_server import FakeModelServer, Reply
from tests.integration.client import Api
from tests.integration.services import free_port

TOKEN = "bench-idle-memory"


def children(pid: int) -> list[int]:
    """`pid` and every process below it."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids = (task / "children").read_text().split()
        for kid in kids:
            found.extend(children(int(kid)))
    return found


def rollup(pid: int) -> tuple[float, float]:
    """RSS and PSS in MiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value)
    return fields["Rss"] / 1024, fields["Pss"] / 1024


def command(pid: int) -> str:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return " ".join(a.decode(errors="replace") for a in argv[:3]).rsplit("/", 1)[-1][:48]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="private", choices=["private", "machine"])
    parser.add_argument("--settle", type=float, default=20.0, help="seconds idle before measuring")
    parser.add_argument("--turns", type=int, default=0, help="plain turns run before going idle")
    args = parser.parse_args()
    model = FakeModelServer().start()
    port = free_port()
    redis_url = (
        f"redis://127.0.0.1:{free_port()}/0" if args.redis == "private" else "redis://127.0.0.1:6379/7"
    )
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as folder:
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "HOME": folder,
            "REDIS_URL": redis_url,
            "PORT": str(port),
            "TURNSTONE_API_TOKEN": TOKEN,
            "TURNSTONE_MODEL": "openai:fake-model",
            "OPENAI_BASE_URL": model.openai_base_url,
            "OPENAI_API_KEY": "sk-bench",
            # To measure another checkout's run (a before figure): PYTHONPATH=that checkout.
            **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},
        }
        with open(Path(folder) / "run.log", "wb") as log:
            run = subprocess.Popen(
                ["turnstone-jobs", "run"],
                cwd=folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_healthy(base, run)
            if args.turns:
                api = Api(base, TOKEN)
                ws_id = api.create_workstream(name="bench", working_dir=folder)
                for _ in range(args.turns):
                    model.enqueue(Reply(text="hello"))
                    api.send(ws_id, "hi")
                    api.wait_idle(ws_id, timeout=60)
            time.sleep(args.settle)  # idle: what the processes hold when nothing happens
            rows = [(part(pid, run.pid), pid, command(pid), *rollup(pid)) for pid in children(run.pid)]
        finally:
            asked = time.monotonic()
            os.kill(run.pid, signal.SIGINT)  # as Ctrl-C at its terminal
            run.wait(timeout=120)
            stopped = time.monotonic() - asked
            model.stop()
    print(f"turnstone-jobs run, Redis {args.redis}; idle {args.settle:g} s after {args.turns} plain turns")
    print(f"{'part':<11}{'pid':>8}  {'process':<50}{'RSS MiB':>9}{'PSS MiB':>9}")
    for name, pid, cmd, rss, pss in rows:
        print(f"{name:<11}{pid:>8}  {cmd:<50}{rss:>9.1f}{pss:>9.1f}")
    for name in svc_names(rows):
        rss = sum(r[3] for r in rows if r[0] == name)
        pss = sum(r[4] for r in rows if r[0] == name)
        print(f"{name + ' total':<69}{rss:>9.1f}{pss:>9.1f}")
    total_rss, total_pss = sum(r[3] for r in rows), sum(r[4] for r in rows)
    print(f"{'run total (' + str(len(rows)) + ' processes)':<69}{total_rss:>9.1f}{total_pss:>9.1f}")
    print(f"stopped {stopped:.1f} s after SIGINT, exit status {run.returncode}")


def part(pid: int, root: int) -> str:
    """Which part of the run a process is: the supervisor, or the service its command names."""
    if pid == root:
        return "supervisor"
    if "turnstone-jobs run" in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
        return "supervisor"  # a fork of the command line process (honcho's, before one supervisor)
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    for name, mark in (("redis", "redis-server"), ("gateway", "app.gateway"), ("web", "gunicorn")):
        if mark in cmd:
            return name
    return "worker" if "workers" in cmd else "beat" if "beat" in cmd else "other"


def wait_healthy(base: str, run: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if run.poll() is not None:
            raise SystemExit("the run exited before it was healthy")
        try:
            body = httpx.get(base + "/health", timeout=3).json()
            if body.get("ok") and body["workers"]["count"] >= 1:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.3)
    raise SystemExit("the run was never healthy")


def svc_names(rows: list[tuple[str, int, str, float, float]]) -> list[str]:
    return list(dict.fromkeys(r[0] for r in rows))


if __name__ == "__main__":
    main()
