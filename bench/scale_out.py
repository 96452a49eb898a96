"""Turns per second with one Celery worker and with two (the same thread count each), and the p95
of send -> idle, for 100 workstreams talking at once to a model that takes 200 ms per answer.

Run: python -m bench.scale_out [--workstreams 100] [--seconds 20] [--threads 4] [--delay 0.2]
     [--backend postgresql|sqlite]

Each workstream is one client in a closed loop: it sends a message over HTTP, waits on its
websocket for the turn to end, and sends the next. The web tier (two gunicorn workers, one
node) and the database are the same in both runs; only the worker count changes. Goal: two
workers reach at least 1.7x the turns per second of one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness import PRODUCTION_TIMING, ms_summary, stopped_by_sigterm
from tests.fakes.model_server import FakeModelServer
from tests.integration.client import Api, EventSocket
from tests.integration.services import (
    API_TOKEN,
    BIN,
    ROOT,
    Services,
    start_private_redis_if_absent,
)

WORKER_KEYS = ("worker", "worker-2")
GOAL = 1.7


@dataclass
class Run:
    workers: int
    turns: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds in the window, by process group

    @property
    def per_second(self) -> float:
        return self.turns / self.seconds if self.seconds else 0.0


class Done(list[tuple[float, float]]):
    """(when a turn ended, its send -> idle), in perf_counter seconds; appended to by every client."""


def client(api: Api, sock: EventSocket, ws_id: str, stop: threading.Event, done: Done) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        began = time.perf_counter()
        turn_id = api.send(ws_id, f"message {n}")
        sock.wait_turn_end(turn_id, timeout=120)
        ended = time.perf_counter()
        done.append((ended, ended - began))  # list.append is atomic


def measure(svc: Services, workers: int, workstreams: int, seconds: float, warmup: float) -> Run:
    """The turns that ended inside a window of `seconds` after `warmup` (every client busy)."""
    api = Api(svc.base_url, API_TOKEN)
    ids = [api.create_workstream(name=f"bench-{workers}-{i}") for i in range(workstreams)]
    sockets = [EventSocket(svc.base_url, API_TOKEN, ws_id) for ws_id in ids]
    stop, done = threading.Event(), Done()
    threads = [
        threading.Thread(
            target=client, args=(Api(svc.base_url, API_TOKEN), sock, ws_id, stop, done), daemon=True
        )
        for ws_id, sock in zip(ids, sockets, strict=True)
    ]
    for t in threads:
        t.start()
    time.sleep(warmup)
    cpu_before = cpu_by_group(svc)
    opened = time.perf_counter()
    time.sleep(seconds)
    closed = time.perf_counter()
    cpu_after = cpu_by_group(svc)
    stop.set()
    for t in threads:
        t.join(timeout=150)
    for sock in sockets:
        sock.close()
    inside = [took for ended, took in done if opened <= ended < closed]
    cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    return Run(workers, len(inside), closed - opened, inside, cpu)


def cpu_by_group(svc: Services) -> dict[str, float]:
    """CPU seconds used so far by each service process group (gunicorn's master and workers
    together) and by this process (the clients and the fake model)."""
    groups = {proc.pid: name for name, proc in svc.processes.items()}
    used = dict.fromkeys(groups.values(), 0.0)
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        name = groups.get(int(fields[2]))  # the process group
        if name is not None:
            used[name] += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    me = os.times()
    used["bench (clients, fake model)"] = me.user + me.system
    return used


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workstreams", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=4, help="each worker's thread count")
    parser.add_argument("--delay", type=float, default=0.2, help="the model's seconds per answer")
    parser.add_argument("--backend", default="postgresql", choices=["postgresql", "sqlite"])
    args = parser.parse_args()
    private = start_private_redis_if_absent()
    runs: list[Run] = []
    try:
        with stopped_by_sigterm(), FakeModelServer() as model, tempfile.TemporaryDirectory() as tmp:
            model.default_delay = args.delay
            svc = Services(args.backend, Path(tmp), model.openai_base_url)
            svc.env.update(PRODUCTION_TIMING)
            try:
                subprocess.run([str(BIN / "turnstone-jobs"), "migrate"], env=svc.env, cwd=ROOT, check=True)
                # Room for every client's websocket (each holds a thread while open).
                svc.start_web(workers=2, threads=args.workstreams)
                svc.start_beat()
                for count in (1, 2):
                    while len([k for k in WORKER_KEYS if k in svc.processes]) < count:
                        svc.start_worker(WORKER_KEYS[count - 1], concurrency=args.threads)
                    runs.append(measure(svc, count, args.workstreams, args.seconds, args.warmup))
            finally:
                svc.stop()
    finally:
        if private is not None:
            private.stop()
    load = os.getloadavg()
    print(
        f"backend {args.backend}; {args.workstreams} workstreams in a closed loop; model answers after "
        f"{args.delay * 1000:.0f} ms; {args.threads} threads per worker; {args.seconds:.0f} s measured "
        f"after {args.warmup:.0f} s warm-up; load average {load[0]:.1f} {load[1]:.1f} "
        f"on {os.cpu_count()} cores"
    )
    for run in runs:
        print(
            f"{run.workers} worker(s): {run.per_second:6.2f} turns/s"
            f"   ({run.turns} turns in {run.seconds:.1f} s)"
        )
        print(ms_summary(f"{run.workers} worker(s): send -> idle", run.latencies))
        shares = ", ".join(f"{name} {seconds / run.seconds:.2f}" for name, seconds in sorted(run.cpu.items()))
        print(f"   CPU cores busy, by process: {shares}")
    one, two = runs[0].per_second, runs[1].per_second
    ratio = two / one if one else 0.0
    print(f"two workers / one: {ratio:.2f}x (goal >= {GOAL}x: {'met' if ratio >= GOAL else 'NOT met'})")


if __name__ == "__main__":
    main()
