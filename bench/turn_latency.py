"""Where a turn's time goes: the hops of a plain turn and of an auto-approved `echo hello` bash
turn, at history sizes of 0, 100 and 500 messages, on SQLite or PostgreSQL.

Run: python -m bench.turn_latency [--turns 10] [--sizes 0 100 500] [--backend sqlite postgresql]
The fake model answers at once, so the figures are the service's own overhead. Each hop is
timed from the one before it (`thinking`, often before the 202, from calling send): `send` until
the 202 (the client's clock), the model requests by the fake model server's arrival times,
everything else by the `ts` of its event (docs/events.md; the same machine's clock, to the
microsecond). Size 0 is a new workstream for every turn; a larger size is one workstream filled
with bash turns (4 messages each) first, whose measured turns then add to it. The fake model
server keeps connections alive, as model servers do; the count of connections it was asked over
shows whether the worker kept them (docs/providers.md, "Connections").
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.harness import running_service
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.client import Api, EventSocket

PLAIN_HOPS = ["send", "thinking", "request at model", "content", "idle"]
BASH_HOPS = [
    "send",
    "thinking",
    "request at model",
    "tool_info",
    "running",
    "first output",
    "tool_result",
    "second request",
    "content",
    "idle",
]


def bash_replies() -> list[Reply]:
    return [Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})]), Reply(text="it printed hello")]


def run_turn(
    api: Api, sock: EventSocket, ws_id: str, model: FakeModelServer, replies: list[Reply]
) -> dict[str, float]:
    """One turn; the time of each hop after `send` was called (seconds)."""
    for reply in replies:
        model.enqueue(reply)
    asked = len(model.history)
    start = time.time()
    turn_id = api.send(ws_id, "go")
    accepted = time.time()
    sock.wait_turn_end(turn_id)
    model.wait_for_requests(asked + len(replies))
    events = [e for e in sock.events if e.get("turn_id") == turn_id]

    def first(type_: str, **fields: Any) -> float:
        for e in events:
            if e["type"] == type_ and all(e.get(k) == v for k, v in fields.items()):
                return float(e["ts"])
        raise AssertionError(f"no {type_} {fields} in {[e['type'] for e in events]}")

    arrivals = [r.time for r in model.history[asked:]]
    at = {
        "send": accepted,
        "thinking": first("state_change", state="thinking"),
        "request at model": arrivals[0],
        "content": first("content"),
        "idle": first("state_change", state="idle"),
    }
    if len(replies) > 1:
        at.update(
            {
                "tool_info": first("tool_info"),
                "running": first("state_change", state="running"),
                "first output": first("tool_output_chunk"),
                "tool_result": first("tool_result"),
                "second request": arrivals[1],
            }
        )
    return {hop: t - start for hop, t in at.items()}


def fill(api: Api, sock: EventSocket, ws_id: str, model: FakeModelServer, size: int) -> None:
    for _ in range(size // 4):
        run_turn(api, sock, ws_id, model, bash_replies())


def measure_size(
    api: Api, model: FakeModelServer, workdir: str, base_url: str, size: int, turns: int
) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {"plain": [], "bash": []}
    if size == 0:  # a new workstream for every turn
        for kind in ("plain", "bash"):
            for _ in range(turns):
                ws_id = api.create_workstream(name="bench", auto_approve=True, working_dir=workdir)
                sock = EventSocket(base_url, api.token, ws_id)
                replies = [Reply(text="hello there")] if kind == "plain" else bash_replies()
                results[kind].append(run_turn(api, sock, ws_id, model, replies))
                sock.close()
        return results
    ws_id = api.create_workstream(name="bench", auto_approve=True, working_dir=workdir)
    sock = EventSocket(base_url, api.token, ws_id)
    fill(api, sock, ws_id, model, size)
    for _ in range(turns):  # alternate, so both kinds see the same history sizes
        results["plain"].append(run_turn(api, sock, ws_id, model, [Reply(text="hello there")]))
        results["bash"].append(run_turn(api, sock, ws_id, model, bash_replies()))
    sock.close()
    return results


def table(kind: str, hops: list[str], by_size: dict[int, list[dict[str, float]]]) -> str:
    sizes = sorted(by_size)
    head = f"{kind + ' turn (median ms)':<32}" + "".join(f"{f'{n} msgs: hop':>14}{'total':>8}" for n in sizes)
    lines = [head]
    for i, hop in enumerate(hops):
        row = f"  {hop:<30}"
        for n in sizes:
            runs = by_size[n]
            total = statistics.median(r[hop] for r in runs) * 1000
            before = hops[i - 1] if i > 1 else None  # `thinking` comes before the 202: from the call
            step = statistics.median(r[hop] - (r[before] if before else 0.0) for r in runs) * 1000
            row += f"{step:>14.1f}{total:>8.1f}"
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10, help="measured turns of each kind per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 100, 500])
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    for backend in args.backend:
        by_kind: dict[str, dict[int, list[dict[str, float]]]] = {"plain": {}, "bash": {}}
        with running_service(backend) as (svc, api, model):
            warm = api.create_workstream(name="warm-up", auto_approve=True, working_dir=str(svc.workdir))
            sock = EventSocket(svc.base_url, api.token, warm)
            for _ in range(3):  # first connections, imports, the worker's threads
                run_turn(api, sock, warm, model, [Reply(text="warm-up")])
                run_turn(api, sock, warm, model, bash_replies())
            sock.close()
            for size in args.sizes:
                results = measure_size(api, model, str(svc.workdir), svc.base_url, size, args.turns)
                for kind in by_kind:
                    by_kind[kind][size] = results[kind]
            connections = len({r.peer for r in model.history})
        print(f"\nbackend: {backend}; fake model answering at once; {args.turns} turns of each kind per size")
        over = f"{connections} connection" + ("s" if connections != 1 else "")
        print(f"model server: {len(model.history)} requests over {over}")
        print("hop: from the hop before (`thinking`: from calling send); total: from calling send")
        print(table("plain", PLAIN_HOPS, by_kind["plain"]))
        print(table("bash `echo hello` (auto)", BASH_HOPS, by_kind["bash"]))


if __name__ == "__main__":
    main()
