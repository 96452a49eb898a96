"""Where a turn's CPU goes, by process: the web (gunicorn), the Celery worker, PostgreSQL's
server processes, Redis, and this process (the benchmark's client and the fake model server),
per plain or auto-approved `echo hello` bash turn. On a machine of two cores the sum, not any
one process, is what a turn waits behind: every hop shares the same cores.

Run: python -m bench.turn_cpu [--turns 100] [--kind plain bash] [--backend sqlite postgresql]
CPU is each process's user + system time from /proc (clock ticks, so run enough turns), taken
around the measured turns after a warm-up, divided by the turns. The turn's sum is the service's
processes, PostgreSQL's and Redis's servers and this process; any other process that used CPU
meanwhile (the machine's own, another benchmark) is listed after it, by name, and left out.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.harness import running_service
from bench.idle_memory import children
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.client import Api, EventSocket

TICK = os.sysconf("SC_CLK_TCK")
WARM_UP = 5
THIS = "this process (client, fake model)"
# What a turn runs on: the service (web, worker, beat), its stores, and the client driving it.
TURN_PARTS = ("web", "worker", "beat", "postgres", "redis-server", THIS)


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """Every process on the machine, by pid: its name and its user + system CPU seconds."""
    found: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            name = (entry / "comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone meanwhile
        found[int(entry.name)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return found


def measure(backend: str, kind: str, turns: int) -> tuple[float, dict[str, float]]:
    """Wall ms per turn, and CPU ms per turn by part: the service's processes by their
    Procfile name, this one, and any other by its process name."""
    with running_service(backend) as (svc, api, model):
        ws_id = api.create_workstream(name="cpu", working_dir=str(svc.workdir), auto_approve=True)
        sock = EventSocket(svc.base_url, api.token, ws_id)
        for _ in range(WARM_UP):
            run_turn(api, sock, ws_id, model, kind)
        before, mine = cpu_seconds(), time.process_time()
        began = time.perf_counter()
        for _ in range(turns):
            run_turn(api, sock, ws_id, model, kind)
        wall = time.perf_counter() - began
        after, mine = cpu_seconds(), time.process_time() - mine
        sock.close()
        parts = {pid: name for name, proc in svc.processes.items() for pid in children(proc.pid)}
    used: dict[str, float] = {THIS: mine}
    for pid, (name, seconds) in after.items():
        spent = seconds - before.get(pid, (name, 0.0))[1]
        if spent <= 0 or pid == os.getpid():
            continue
        part = parts.get(pid) or name
        used[part] = used.get(part, 0.0) + spent
    return wall / turns * 1000, {part: seconds / turns * 1000 for part, seconds in used.items()}


def run_turn(api: Api, sock: EventSocket, ws_id: str, model: FakeModelServer, kind: str) -> None:
    if kind == "bash":
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})]))
    model.enqueue(Reply(text="hello"))
    sock.wait_turn_end(api.send(ws_id, "hi"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--kind", nargs="+", default=["plain", "bash"], choices=["plain", "bash"])
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    for backend in args.backend:
        for kind in args.kind:
            wall, used = measure(backend, kind, args.turns)
            print(f"\n{backend}, {kind} turn: {args.turns} turns, {wall:.1f} ms each; CPU ms per turn")
            for part, ms in sorted(used.items(), key=lambda item: (part_rank(item[0]), -item[1])):
                if ms >= 0.05:
                    print(f"  {part:<40}{ms:>8.2f}")
            ours = sum(ms for part, ms in used.items() if part in TURN_PARTS)
            print(f"  {'the turn (the parts above the others)':<40}{ours:>8.2f}")


def part_rank(part: str) -> int:
    return 0 if part in TURN_PARTS else 1


if __name__ == "__main__":
    main()
