"""Instructions one turn costs the engine's process, counted by valgrind (callgrind): unlike
the wall clock and even CPU time, a count barely moves with what else the machine is doing,
so two trees compare within a percent or two on a busy machine.

Run: python -m bench.turn_instructions [--kind plain bash] [--backend sqlite postgresql]
Each figure runs the engine in-process (as `bench.turn_costs` does: one thread running every
phase, the fake model server's threads beside it) under valgrind twice, for 2 and for 2 + N
turns after 3 of warm-up, and prints the difference over N: start-up and warm-up cancel out.
Needs `valgrind` on the PATH; a run takes a minute or two (Python is about 50x slower under it).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.services import start_private_redis_if_absent

ROOT = Path(__file__).resolve().parents[1]
WARM_UP = 3
COLLECTED = re.compile(r"Collected : (\d+)")


def run_turns(kind: str, backend: str, turns: int) -> None:
    """The counted program: WARM_UP + `turns` turns of `kind`, in-process."""
    from app.engine.life import workstreams
    from bench.turn_costs import in_process_engine, run_turn

    private = start_private_redis_if_absent()
    try:
        with FakeModelServer() as model, in_process_engine(backend, model) as (rt, tally):
            ws_id = workstreams.create(rt, name=kind, auto_approve=True).id
            for _ in range(WARM_UP + turns):
                if kind == "bash":
                    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})]))
                model.enqueue(Reply(text="done"))
                run_turn(rt, ws_id, tally)
    finally:
        if private is not None:
            private.stop()


def instructions(kind: str, backend: str, turns: int) -> int:
    argv = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, "-m", "bench.turn_instructions", "--run", kind, backend, str(turns),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    found = COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", nargs="+", default=["plain", "bash"], choices=["plain", "bash"])
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgresql"])
    parser.add_argument("--turns", type=int, default=20, help="turns counted (the difference)")
    parser.add_argument("--run", nargs=3, metavar=("KIND", "BACKEND", "TURNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        run_turns(args.run[0], args.run[1], int(args.run[2]))
        return
    print("instructions per turn (millions), the engine's whole process, callgrind")
    for backend in args.backend:
        for kind in args.kind:
            few, many = instructions(kind, backend, 2), instructions(kind, backend, 2 + args.turns)
            print(f"  {backend:11} {kind:6} {(many - few) / args.turns / 1e6:8.1f}")


if __name__ == "__main__":
    main()
