"""Idle websockets on one web node: how many it holds, what each costs it in memory, and what
they do to the HTTP API's tail latency.

Run: python -m bench.sockets_idle [--sockets 10000] [--workstreams 100] [--requests 500]
     [--backend sqlite|postgresql]

The web node is the Procfile's web line with its defaults (2 gunicorn workers, 64 threads
each). One client process opens `--sockets` websockets following `--workstreams` workstreams
(one token holds them all, so the per-user cap is raised for the run:
TURNSTONE_SOCKETS_PER_PRINCIPAL). Figures: the p99 of `GET /v1/api/workstreams` (sequential
requests on one keep-alive connection) with no socket open and with all of them open, and the
web node's resident memory (master and workers) before and after, per socket.
Goals (issue 37): 10,000 sockets held; p99 with them under 2x the p99 without; under 30 KiB
added per socket.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from pathlib import Path

import httpx
import websockets

from bench.harness import running_service
from tests.integration.services import API_TOKEN, free_port

OPEN_AT_ONCE = 200  # handshakes in flight from the client


def web_pids(master: int) -> list[int]:
    """The gunicorn master and its workers."""
    pids = [master]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            pids.append(int(stat.parent.name))
    return pids


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def p99_ms(base_url: str, requests: int) -> float:
    times = []
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=30
    ) as http:
        for _ in range(20):  # warm
            http.get("/v1/api/workstreams")
        for _ in range(requests):
            began = time.perf_counter()
            answer = http.get("/v1/api/workstreams")
            times.append(time.perf_counter() - began)
            assert answer.status_code == 200, answer.text
    times.sort()
    return times[min(len(times) - 1, round(0.99 * (len(times) - 1)))] * 1000


async def open_sockets(base_url: str, ws_ids: list[str], count: int) -> list[websockets.ClientConnection]:
    gate = asyncio.Semaphore(OPEN_AT_ONCE)
    base = base_url.replace("http://", "ws://")

    async def one(n: int) -> websockets.ClientConnection:
        async with gate:
            return await websockets.connect(
                f"{base}/v1/ws/workstreams/{ws_ids[n % len(ws_ids)]}?token={API_TOKEN}", open_timeout=60
            )

    return list(await asyncio.gather(*(one(n) for n in range(count))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sockets", type=int, default=10_000)
    parser.add_argument("--workstreams", type=int, default=100)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--backend", default="sqlite")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.sockets + 100:
        raise SystemExit(f"this process may open {hard} files: too few for {args.sockets} sockets")
    env = {"TURNSTONE_SOCKETS_PER_PRINCIPAL": str(args.sockets * 2)}
    with running_service(args.backend) as (svc, api, _model):
        ws_ids = [api.create_workstream() for _ in range(args.workstreams)]
        # The Procfile's web line (2 workers, 64 threads), beside the harness's own web process.
        base_url = svc.start_web(name="web-node", port=free_port(), workers=2, threads=64, env=env)
        pids = web_pids(svc.processes["web-node"].pid)
        before_rss = rss_kib(pids)
        before_p99 = p99_ms(base_url, args.requests)

        async def held() -> tuple[float, float, int, float]:
            began = time.perf_counter()
            conns = await open_sockets(base_url, ws_ids, args.sockets)
            opened = time.perf_counter() - began
            await asyncio.sleep(5)  # settled: every socket served, nothing in flight
            after_rss = rss_kib(pids)
            loop = asyncio.get_running_loop()
            with_p99 = await loop.run_in_executor(None, p99_ms, base_url, args.requests)
            still_open = sum(1 for c in conns if c.state.name == "OPEN")
            await asyncio.gather(*(c.close() for c in conns))
            return opened, after_rss, still_open, with_p99

        opened, after_rss, still_open, with_p99 = asyncio.run(held())
    per_socket = (after_rss - before_rss) / args.sockets
    print(
        f"web node: 2 workers x 64 threads ({args.backend}); "
        f"{args.sockets} sockets on {args.workstreams} workstreams"
    )
    print(f"sockets open after settling     {still_open} of {args.sockets} (opened in {opened:.1f} s)")
    print(
        f"GET /v1/api/workstreams p99     {before_p99:7.2f} ms without sockets, {with_p99:7.2f} ms with them "
        f"({with_p99 / before_p99:.2f}x; goal under 2x)"
    )
    print(
        f"web node RSS                    {before_rss / 1024:7.1f} MiB -> {after_rss / 1024:7.1f} MiB: "
        f"{per_socket:.1f} KiB per socket (goal under 30)"
    )


if __name__ == "__main__":
    main()
