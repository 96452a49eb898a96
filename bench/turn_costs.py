"""What one turn costs the service, counted: tasks sent through Celery, write transactions (and
how many of them were one statement committing by itself, with no BEGIN or COMMIT), SQL
statements, checks of a pooled connection (a `SELECT 1` round trip each), Redis round trips, and
the engine's own time, for a plain turn and an auto-approved `echo hello` bash turn, on SQLite
or PostgreSQL.

Run: python -m bench.turn_costs [--turns 20] [--backend sqlite postgresql]
The engine runs in this process, as one worker thread that consumes every queue would run it
(no Celery hop, no HTTP, no websocket), so the counts are exact and the times are the engine's
alone: `send` (what the web does for POST .../send), then the turn's phases until it ends.
Times are medians over the turns after the first two (warm-up); counts are per turn.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import event

from app.engine.life import turns, workstreams
from app.engine.running import chain
from app.runtime import Runtime
from app.storage.database import ONE_STATEMENT_OPTION
from app.storage.models import Turn, TurnPhase, TurnStatus
from app.taskqueue import MODEL_STEP_TASK, QUEUES, TOOL_BATCH_TASK
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.services import start_private_redis_if_absent

PHASE_TASKS = {TurnPhase.MODEL: MODEL_STEP_TASK, TurnPhase.TOOLS: TOOL_BATCH_TASK}
COUNTS = (
    "celery tasks sent",
    "write transactions",
    "  of them one statement committing by itself",
    "SQL statements",
    "connection checks",
    "Redis round trips",
)


class Tally:
    """Counts what the runtime sends to its database, Redis and Celery while `counting`."""

    def __init__(self, rt: Runtime) -> None:
        self.counts: Counter[str] = Counter()
        self.on = False
        event.listen(rt.db.engine, "commit", lambda _conn: self._add("write transactions"))
        event.listen(rt.db.engine, "before_cursor_execute", self._statement)
        ping = rt.db.engine.dialect.do_ping

        def counted_ping(dbapi_conn: Any) -> bool:
            self._add("connection checks")
            return ping(dbapi_conn)

        rt.db.engine.dialect.do_ping = counted_ping  # type: ignore[method-assign,assignment]
        send_task = rt.queue.celery.send_task

        def counted_send_task(*args: Any, **kwargs: Any) -> Any:
            self._add("celery tasks sent")
            return send_task(*args, **kwargs)

        rt.queue.celery.send_task = counted_send_task
        # A round trip is one write of packed commands: a command, or a whole pipeline.
        send_packed = redis.Connection.send_packed_command

        def counted_send_packed(conn: redis.Connection, *args: Any, **kwargs: Any) -> None:
            self._add("Redis round trips")
            send_packed(conn, *args, **kwargs)

        redis.Connection.send_packed_command = counted_send_packed  # type: ignore[method-assign,assignment]

    def _statement(self, conn: Any, *_args: Any) -> None:
        self._add("SQL statements")
        if conn.get_execution_options().get(ONE_STATEMENT_OPTION):  # no BEGIN, no COMMIT
            self._add("write transactions")
            self._add("  of them one statement committing by itself")

    def _add(self, name: str) -> None:
        if self.on:
            self.counts[name] += 1

    @contextmanager
    def paused(self) -> Iterator[None]:
        """What the bench itself does is not counted."""
        was, self.on = self.on, False
        try:
            yield
        finally:
            self.on = was


@contextmanager
def in_process_engine(backend: str, model: FakeModelServer) -> Iterator[tuple[Runtime, Tally]]:
    """The engine in this process on a fresh `backend` database, as one worker thread that
    consumes every queue runs it, its model `model`, with a Tally on it. The tests' Redis must
    answer (`start_private_redis_if_absent` first)."""
    from tests.integration.storage import runtime  # reads the Redis address set by then

    with tempfile.TemporaryDirectory() as tmp:
        made: Any = runtime(backend, Path(tmp), model, working_dir=tmp)  # a generator
        rt = next(made)
        try:
            rt.queue.local_queues = frozenset(QUEUES)  # a worker consuming every queue
            yield rt, Tally(rt)
        finally:
            made.close()


def run_turn(rt: Runtime, ws_id: str, tally: Tally) -> tuple[float, float, float]:
    """Send a message and run the turn's phases here until it ends: the send's seconds, the
    whole turn's, and the CPU seconds this thread spent on it (the fake model server's threads
    not included), which a busy machine disturbs less than the wall clock."""
    began, cpu = time.perf_counter(), time.thread_time()
    turn_id = turns.send(rt, ws_id, "hi").id
    sent = time.perf_counter()
    while True:
        with tally.paused(), rt.db.reader() as s:
            turn = s.get(Turn, turn_id)
        assert turn is not None
        if turn.status != TurnStatus.ACTIVE:
            assert turn.status == TurnStatus.DONE, turn.error
            return sent - began, time.perf_counter() - began, time.thread_time() - cpu
        chain.run(rt, PHASE_TASKS[TurnPhase(turn.phase)], turn_id, turn.step)


def measure(rt: Runtime, model: FakeModelServer, kind: str, n: int, tally: Tally) -> dict[str, float]:
    ws_id = workstreams.create(rt, name=kind, auto_approve=True).id
    sends, wholes, cpus = [], [], []
    tally.counts.clear()
    for i in range(n):
        if kind == "bash":
            model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})]))
        model.enqueue(Reply(text="done"))
        warm = i >= 2
        tally.on = warm
        send, whole, cpu = run_turn(rt, ws_id, tally)
        tally.on = False
        if warm:
            sends.append(send)
            wholes.append(whole)
            cpus.append(cpu)
    figures = {name: tally.counts[name] / (n - 2) for name in COUNTS}
    figures["send (ms)"] = statistics.median(sends) * 1000
    figures["turn, send to end (ms)"] = statistics.median(wholes) * 1000
    figures["turn, CPU of the engine (ms)"] = statistics.median(cpus) * 1000
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    private = start_private_redis_if_absent()
    try:
        with FakeModelServer() as model:
            for backend in args.backend:
                with in_process_engine(backend, model) as (rt, tally):
                    rows = {kind: measure(rt, model, kind, args.turns, tally) for kind in ("plain", "bash")}
                print(f"\nbackend: {backend}; {args.turns} turns of each kind, in-process; per turn")
                print(f"{'':32}{'plain':>10}{'bash':>10}")
                for name in rows["plain"]:
                    print(f"  {name:30}{rows['plain'][name]:10.1f}{rows['bash'][name]:10.1f}")
    finally:
        if private is not None:
            private.stop()


if __name__ == "__main__":
    main()
