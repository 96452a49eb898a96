"""Sub-agents: what a task_agent costs over a plain tool call, and ten children at once.

Run: python -m bench.subagents [--turns 30] [--backend sqlite|postgresql]

1. Overhead: send -> idle of a turn whose one call is `bash echo hello`, against one whose
   one call is a task_agent whose child answers at once (both auto-approved; the fake model
   answers at once), so the difference is what a sub-agent costs the service: a workstream
   and a turn created, one more model step, the fan-in.
2. Fan-out: one turn asking for ten task_agents at once, on two workers; each child's model
   answer streams for about one second. The figures: the turn's wall time, how far apart the
   ten children started, and the wall time against the ten seconds they would take in a row.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.harness import ms_summary, running_service
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import EventSocket

CHILDREN = 10
CHILD_SECONDS = 1.0  # each child's answer: 10 chunks, 0.1 s apart


def timed_turn(api, sock: EventSocket, ws_id: str, replies: list[tuple[Reply, str | None]], model) -> float:
    for reply, match in replies:
        model.enqueue(reply, match=match)
    start = time.perf_counter()
    turn_id = api.send(ws_id, "go")
    end = sock.wait_turn_end(turn_id, timeout=120)
    assert end["state"] == "idle", end
    return time.perf_counter() - start


def plain(n: int) -> list[tuple[Reply, str | None]]:
    echo = Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})])
    return [(echo, None), (Reply(text="done"), None)]


def delegated(n: int) -> list[tuple[Reply, str | None]]:
    marker = f"BENCH-ONE-{n}:"
    return [
        (Reply(tool_calls=[ToolCall("task_agent", {"prompt": f"{marker} say hello"})]), None),
        (Reply(text="hello"), marker),
        (Reply(text="done"), None),
    ]


def fan_out(n: int) -> list[tuple[Reply, str | None]]:
    calls = [ToolCall("task_agent", {"prompt": f"BENCH-FAN-{n}-{i}: report"}) for i in range(CHILDREN)]
    chunks = [f"w{k} " for k in range(10)]
    children = [
        (Reply(chunks=chunks, chunk_delay=CHILD_SECONDS / 10), f"BENCH-FAN-{n}-{i}:") for i in range(CHILDREN)
    ]
    return [(Reply(tool_calls=calls), None), *children, (Reply(text="all reported"), None)]


def child_starts(model, n: int) -> list[float]:
    starts = []
    for request in model.history:
        users = [m for m in (request.body or {}).get("messages") or [] if m.get("role") == "user"]
        if users and f"BENCH-FAN-{n}-" in str(users[0].get("content")):
            starts.append(request.time)
    return starts


def second_worker(svc) -> None:
    svc.start_worker("worker-2", concurrency=8)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--fan-outs", type=int, default=5)
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    with running_service(args.backend) as (svc, api, model):
        ws_id = api.create_workstream(name="bench", auto_approve=True, working_dir=str(svc.workdir))
        sock = EventSocket(svc.base_url, api.token, ws_id)
        timed_turn(api, sock, ws_id, plain(0), model)  # warm-up: connections, imports
        timed_turn(api, sock, ws_id, delegated(0), model)
        tool = [timed_turn(api, sock, ws_id, plain(n), model) for n in range(args.turns)]
        sub = [timed_turn(api, sock, ws_id, delegated(n + 1), model) for n in range(args.turns)]
        second_worker(svc)
        walls, spreads = [], []
        for n in range(args.fan_outs):
            walls.append(timed_turn(api, sock, ws_id, fan_out(n), model))
            starts = child_starts(model, n)
            assert len(starts) == CHILDREN, starts
            spreads.append(max(starts) - min(starts))
        sock.close()
    print(f"backend: {args.backend}; fake model answering at once; {args.turns} turns each")
    print(ms_summary("bash `echo hello` (auto): send -> idle", tool))
    print(ms_summary("task_agent, child answers at once: send -> idle", sub))
    overhead = statistics.median(sub) - statistics.median(tool)
    print(f"{'sub-agent overhead over a plain tool call':<44} median {overhead * 1000:7.1f} ms")
    print(f"ten children on two workers, each streaming {CHILD_SECONDS:.0f} s ({args.fan_outs} fan-outs):")
    print(ms_summary("  send -> idle", walls))
    print(ms_summary("  first to last child start", spreads))
    serial = CHILDREN * CHILD_SECONDS
    speedup = serial / statistics.median(walls)
    print(f"  {'in a row they would take':<42} {serial * 1000:7.0f} ms (x{speedup:.1f} faster at once)")


if __name__ == "__main__":
    main()
