"""Time from `send` to the first `content` event and to `idle`: plain turns and auto-approved bash turns.

Run: python -m bench.turn_latency [--turns 50] [--backend sqlite|postgresql]
The fake model answers at once, so the figures are the service's own overhead.
"""

from __future__ import annotations

import argparse
import time

from bench.harness import ms_summary, running_service
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import EventSocket


def measure(api, sock: EventSocket, ws_id: str, replies: list[Reply], model) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    for reply in replies:
        model.enqueue(reply)
    before = len(sock.events)
    start = time.perf_counter()
    turn_id = api.send(ws_id, "go")
    sock.wait_for(lambda e: e["type"] == "content" and e["turn_id"] == turn_id)
    first = time.perf_counter() - start
    sock.wait_turn_end(turn_id)
    idle = time.perf_counter() - start
    assert len(sock.events) > before
    return first, idle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    with running_service(args.backend) as (svc, api, model):
        ws_id = api.create_workstream(name="bench", auto_approve=True, working_dir=str(svc.workdir))
        sock = EventSocket(svc.base_url, api.token, ws_id)
        measure(api, sock, ws_id, [Reply(text="warm-up")], model)  # first connections, imports
        plain = [measure(api, sock, ws_id, [Reply(text="hello there")], model) for _ in range(args.turns)]
        bash = [
            measure(
                api,
                sock,
                ws_id,
                [
                    Reply(tool_calls=[ToolCall("bash", {"command": "echo hello"})]),
                    Reply(text="it printed hello"),
                ],
                model,
            )
            for _ in range(args.turns)
        ]
        sock.close()
    print(f"backend: {args.backend}; fake model answering at once; {args.turns} turns each")
    print(ms_summary("plain turn: send -> first content", [f for f, _ in plain]))
    print(ms_summary("plain turn: send -> idle", [i for _, i in plain]))
    print(ms_summary("bash `echo hello` (auto): send -> first content", [f for f, _ in bash]))
    print(ms_summary("bash `echo hello` (auto): send -> idle", [i for _, i in bash]))


if __name__ == "__main__":
    main()
