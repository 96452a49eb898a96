"""The cyclic garbage collector's full collections in the service's processes while turns run:
how many, and how long each paused its process (every thread of it), after start-up.

Run: python -m bench.collector_pauses [--turns 150] [--backend sqlite]
Every Python process of the service is started with a `sitecustomize` of this bench's on its
path, which records each full (generation 2) collection: when, how long, and how many objects
were frozen then (`app.gc_settle.settle`). The figures count those that began after the warm-up
turns, in a run of alternating plain and auto-approved `echo hello` bash turns on one
workstream, whose history grows by six messages a pair.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.harness import running_service
from bench.turn_latency import bash_replies, run_turn
from tests.fakes.model_server import Reply
from tests.integration.client import EventSocket

WARM_UP_PAIRS = 5

RECORDER = """
import gc, json, os, sys, time

_began = [0.0]


def _record(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        _began[0] = time.perf_counter()
        return
    took = time.perf_counter() - _began[0]
    line = {"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv, "at": time.time(),
            "ms": took * 1000, "frozen": gc.get_freeze_count()}
    with open(os.path.join(os.environ["BENCH_COLLECTIONS_DIR"], str(os.getpid())), "a") as out:
        out.write(json.dumps(line) + "\\n")


gc.callbacks.append(_record)
"""


def process_name(record: dict, pids: set[int]) -> str:
    """web, worker, beat or gateway as the Procfile names them; a gunicorn's forked worker (its
    parent recorded too) apart from its master."""
    argv = record["argv"]
    if "gunicorn" in argv[0]:
        name = "gateway" if any(a.startswith("app.gateway") for a in argv) else "web"
        return f"{name} {'worker' if record['ppid'] in pids else 'master'}"
    if "migrate" in argv:
        return "migrate"
    return next((n for n in ("workers", "beat") if argv[0].endswith(f"{n}/__main__.py")), argv[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=150, help="measured pairs of a plain and a bash turn")
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as site, tempfile.TemporaryDirectory() as records:
        Path(site, "sitecustomize.py").write_text(RECORDER)
        path = os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH", "")) if p)
        env = {"PYTHONPATH": path, "BENCH_COLLECTIONS_DIR": records}
        with running_service(args.backend, env=env) as (svc, api, model):
            ws_id = api.create_workstream(name="bench", auto_approve=True, working_dir=str(svc.workdir))
            sock = EventSocket(svc.base_url, api.token, ws_id)
            for _ in range(WARM_UP_PAIRS):
                run_turn(api, sock, ws_id, model, [Reply(text="warm-up")])
                run_turn(api, sock, ws_id, model, bash_replies())
            measured_from = time.time()
            for _ in range(args.turns):
                run_turn(api, sock, ws_id, model, [Reply(text="hello there")])
                run_turn(api, sock, ws_id, model, bash_replies())
            sock.close()
        found: dict[int, list[dict]] = defaultdict(list)
        for file in Path(records).iterdir():
            for line in file.read_text().splitlines():
                record = json.loads(line)
                found[record["pid"]].append(record)
    print(f"\nbackend: {args.backend}; {args.turns} plain and {args.turns} bash turns after the warm-up")
    print(
        f"{'process':<16}{'pid':>8}{'full collections':>18}{'longest ms':>12}{'total ms':>10}{'frozen':>10}"
    )
    names = {pid: process_name(records[-1], set(found)) for pid, records in found.items()}
    for pid, records in sorted(found.items(), key=lambda item: names[item[0]]):
        during = [r for r in records if r["at"] >= measured_from]
        name = names[pid].replace("workers", "worker")
        if name == "migrate":  # done before the web started
            continue
        longest = max((r["ms"] for r in during), default=0.0)
        total = sum(r["ms"] for r in during)
        frozen = records[-1]["frozen"]
        print(f"{name:<16}{pid:>8}{len(during):>18}{longest:>12.1f}{total:>10.1f}{frozen:>10}")


if __name__ == "__main__":
    main()
