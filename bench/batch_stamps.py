"""Where the `running` -> first output hop of a bash turn goes: the engine in this process (as
`bench.turn_costs` runs it: one thread, every phase, no Celery, HTTP or websocket), an
auto-approved `echo hello` turn at a time, with a time stamp as each step of the way starts and
ends. `running` is published by the transition that stores the model's answer, so the stamps
count from that transition's end.

Run: python -m bench.batch_stamps [--turns 25] [--backend sqlite postgresql]
Medians over the turns after the first three, ms after the answer was stored; each row says
what starts (>) or ends (<) then. The wrapped functions are the engine's own, looked up where
the engine calls them; the wrapping adds a few microseconds a stamp.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

from app.engine.life import calls
from app.engine.running import model_step, phases, tool_batch
from app.events import EventLog
from app.tools import bash
from bench.turn_costs import in_process_engine, run_turn
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.services import start_private_redis_if_absent

# (module or class, attribute, what the row calls it)
STAMPED: list[tuple[Any, str, str]] = [
    (model_step, "_store_reply", "model step stores the answer (publishes running)"),
    (phases, "claim", "a phase claims the turn"),
    (tool_batch, "_batch", "tool batch"),
    (tool_batch, "_run_one", "one call"),
    (calls, "start", "the call marked running (committed)"),
    (bash, "run", "bash runs the command"),
    (EventLog, "publish_best_effort", "an output chunk is published"),
    (tool_batch, "_advance", "results stored, next step handed on"),
]


class Stamps:
    def __init__(self) -> None:
        self.taken: list[tuple[str, float]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def stamped(*args: Any, **kwargs: Any) -> Any:
            self.taken.append((f"> {label}", time.perf_counter()))
            try:
                return original(*args, **kwargs)
            finally:
                self.taken.append((f"< {label}", time.perf_counter()))

        setattr(owner, name, stamped)

    def since_stored(self) -> dict[str, float]:
        """Each row's first time in this turn, ms after the answer with the call was stored (a
        claim before that, the model step's own, is left out)."""
        stored = next(t for row, t in self.taken if row.startswith("< model step"))
        first: dict[str, float] = {}
        for row, t in self.taken:
            if t >= stored:
                first.setdefault(row, (t - stored) * 1000)
        return first


def measure(backend: str, turns: int, model: FakeModelServer, stamps: Stamps) -> dict[str, list[float]]:
    from app.engine.life import workstreams

    rows: dict[str, list[float]] = {}
    with in_process_engine(backend, model) as (rt, tally):
        ws_id = workstreams.create(rt, name="stamps", auto_approve=True).id
        for n in range(turns):
            model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})]))
            model.enqueue(Reply(text="done"))
            stamps.taken.clear()
            run_turn(rt, ws_id, tally)
            if n >= 3:
                for row, ms in stamps.since_stored().items():
                    rows.setdefault(row, []).append(ms)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    stamps = Stamps()
    for owner, name, label in STAMPED:
        stamps.wrap(owner, name, label)
    private = start_private_redis_if_absent()
    try:
        with FakeModelServer() as model:
            for backend in args.backend:
                rows = measure(backend, args.turns, model, stamps)
                print(f"\nbackend: {backend}; ms after the answer was stored, median of {args.turns - 3}")
                for row, values in sorted(rows.items(), key=lambda item: statistics.median(item[1])):
                    print(f"  {statistics.median(values):7.2f}  {row}")
    finally:
        if private is not None:
            private.stop()


if __name__ == "__main__":
    main()
