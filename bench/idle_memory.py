"""Idle memory of the service: web (gunicorn master and worker), Celery worker and beat, each
with its child processes, as RSS and PSS from /proc/PID/smaps_rollup (PSS shares pages that
processes have in common among them, so PSS adds up; RSS counts shared pages in each).

Run: python -m bench.idle_memory [--backend sqlite|postgresql] [--settle 5] [--turns 0]
With `--turns N` it first runs N plain turns, so the figures include what serving them loaded
(the model SDK, the first connections).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.harness import running_service
from tests.fakes.model_server import Reply
from tests.integration.client import EventSocket


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
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle before measuring")
    parser.add_argument("--turns", type=int, default=0, help="plain turns run before going idle")
    args = parser.parse_args()
    with running_service(args.backend) as (svc, api, model):
        if args.turns:
            ws_id = api.create_workstream(name="bench", working_dir=str(svc.workdir))
            sock = EventSocket(svc.base_url, api.token, ws_id)
            for _ in range(args.turns):
                model.enqueue(Reply(text="hello"))
                sock.wait_turn_end(api.send(ws_id, "hi"))
            sock.close()
        time.sleep(args.settle)  # idle: what the processes hold when nothing happens
        rows = []
        for name, proc in svc.processes.items():
            for pid in children(proc.pid):
                rss, pss = rollup(pid)
                rows.append((name, pid, command(pid), rss, pss))
    print(f"backend: {args.backend}; idle {args.settle:g} s after {args.turns} plain turns")
    print(f"{'part':<8}{'pid':>8}  {'process':<50}{'RSS MiB':>9}{'PSS MiB':>9}")
    for name, pid, cmd, rss, pss in rows:
        print(f"{name:<8}{pid:>8}  {cmd:<50}{rss:>9.1f}{pss:>9.1f}")
    for name in svc_names(rows):
        rss = sum(r[3] for r in rows if r[0] == name)
        pss = sum(r[4] for r in rows if r[0] == name)
        print(f"{name + ' total':<66}{rss:>9.1f}{pss:>9.1f}")
    print(f"{'service total':<66}{sum(r[3] for r in rows):>9.1f}{sum(r[4] for r in rows):>9.1f}")


def svc_names(rows: list[tuple[str, int, str, float, float]]) -> list[str]:
    return list(dict.fromkeys(r[0] for r in rows))


if __name__ == "__main__":
    main()
