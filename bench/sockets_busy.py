"""Busy websockets: many followers of many workstreams whose commands print fast. Does every event
reach every follower, in order, soon, and what does the web tier spend on it?

Run: python -m bench.sockets_busy [--sockets 500] [--workstreams 50] [--seconds 10]
     [--lines-per-second 1000] [--backend sqlite|postgresql]

The web node is the Procfile's web line (2 gunicorn workers, 64 threads). What the workers would
publish for a bash command printing `--lines-per-second` lines a second is published by two
publisher processes through the service's own event log (`app.events.EventLog`, the Lua script
a worker uses): a worker coalesces a command's output into at most one `tool_output_chunk` every
STREAM_FLUSH_SECONDS (25 ms), so each workstream gets 40 events a second of 25 lines each. The
tier measured is the web node, so no model and no command runs. Each of `--sockets` clients
follows one workstream (sockets spread evenly) and checks the ids it gets: every published id,
in order, none twice. Lag: the client's clock at arrival minus the event's `ts` (one machine).
Goals (issue 37): none lost, all in order, p95 lag under 100 ms, the web node under one core.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing
import os
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis

from app import redis_keys
from app.engine.publishing.streaming import STREAM_FLUSH_SECONDS
from app.events import EventLog
from bench.harness import running_service
from bench.sockets_idle import web_pids
from tests.integration.services import API_TOKEN, free_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CLIENT_PROCESSES = 4


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


def publish(
    redis_url: str, ws_ids: list[str], seconds: float, lines: int, out: multiprocessing.Queue
) -> None:
    """Publish one chunk per workstream every STREAM_FLUSH_SECONDS for `seconds`; put the ids."""
    log = EventLog(redis.Redis.from_url(redis_url), maxlen=10_000)
    ids: dict[str, list[int]] = {ws_id: [] for ws_id in ws_ids}
    per_chunk = max(1, round(lines * STREAM_FLUSH_SECONDS))
    n = 0
    began = time.monotonic()
    tick = began
    while time.monotonic() - began < seconds:
        text = "".join(f"line {n + k} of the command's output\n" for k in range(per_chunk))
        n += per_chunk
        for ws_id in ws_ids:
            event_id = log.publish(ws_id, "tool_output_chunk", call_id="c", text=text)
            ids[ws_id].append(event_id)
        tick += STREAM_FLUSH_SECONDS
        time.sleep(max(0.0, tick - time.monotonic()))
    out.put((ids, time.process_time()))


ID = re.compile(rb'"id": ?(\d+)')
TS = re.compile(rb'"ts": ?([0-9.]+)')


async def follow(url: str, seen: list[int], lags: list[float], stop: asyncio.Event) -> None:
    """A lean websocket client (a handshake, then server frames parsed by hand, pings answered):
    500 sockets at 40 events a second each are 20,000 frames a second, which a general client
    library parsing JSON could not read on this machine beside the service, and the lag measured
    would be the client's."""
    host, port, path = urlsplit(url).hostname, urlsplit(url).port, url.split(str(urlsplit(url).port), 1)[1]
    reader, writer = await asyncio.open_connection(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    buffer = b""
    while not stop.is_set():
        try:
            chunk = await asyncio.wait_for(reader.read(1 << 16), 0.5)
        except TimeoutError:
            continue
        if not chunk:
            return
        arrived = time.time()
        buffer += chunk
        while len(buffer) >= 2:  # every whole frame in what has come
            opcode, length, start = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
            if length == 126:
                length, start = int.from_bytes(buffer[2:4], "big"), 4
            elif length == 127:
                length, start = int.from_bytes(buffer[2:10], "big"), 10
            if len(buffer) < start + length:
                break
            payload, buffer = buffer[start : start + length], buffer[start + length :]
            if opcode == 0x9:  # ping: a pong, masked as a client's frames must be
                mask = os.urandom(4)
                masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                writer.write(bytes([0x8A, 0x80 | len(payload)]) + mask + masked)
            elif opcode == 0x1:
                found_id, found_ts = ID.search(payload), TS.search(payload)
                if found_id and found_ts:
                    seen.append(int(found_id.group(1)))
                    lags.append(arrived - float(found_ts.group(1)))
            elif opcode == 0x8:
                return
    writer.close()


def direct(redis_url: str, ws_ids: list[str], ready: Any, go_home: Any, out: multiprocessing.Queue) -> None:
    """A control: the same events read straight off Redis pub/sub, no web node between. Its lag
    is what the machine adds (the publishers' own scheduling, a busy CPU), not the web tier."""
    pubsub = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(*(redis_keys.event_channel(ws_id) for ws_id in ws_ids))
    lags: list[float] = []
    ready.set()
    while not go_home.is_set():
        message = pubsub.get_message(timeout=0.5)
        if message is not None:
            arrived = time.time()
            found = TS.search(message["data"])
            if found:
                lags.append(arrived - float(found.group(1)))
    out.put(lags)


def clients(index: int, urls: list[str], ready: Any, go_home: Any, out: multiprocessing.Queue) -> None:
    """Client process `index`: follow each of `urls` until `go_home` is set; put what each saw."""

    async def run() -> list[tuple[list[int], list[float]]]:
        stop = asyncio.Event()
        seen: list[list[int]] = [[] for _ in urls]
        lags: list[list[float]] = [[] for _ in urls]
        tasks = [asyncio.create_task(follow(url, seen[n], lags[n], stop)) for n, url in enumerate(urls)]
        await asyncio.sleep(2)
        ready.set()
        await asyncio.get_running_loop().run_in_executor(None, go_home.wait)
        stop.set()
        await asyncio.gather(*tasks)
        return list(zip(seen, lags, strict=True))

    result = asyncio.run(run())
    out.put((index, result, time.process_time()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sockets", type=int, default=500)
    parser.add_argument("--workstreams", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--lines-per-second", type=int, default=1000)
    parser.add_argument("--backend", default="sqlite")
    args = parser.parse_args()
    env = {"TURNSTONE_SOCKETS_PER_PRINCIPAL": str(args.sockets * 2)}
    with running_service(args.backend) as (svc, api, _model):
        ws_ids = [api.create_workstream() for _ in range(args.workstreams)]
        base_url = svc.start_web(name="web-node", port=free_port(), workers=2, threads=64, env=env)
        pids = web_pids(svc.processes["web-node"].pid)
        base = base_url.replace("http://", "ws://")
        follows = [ws_ids[n % len(ws_ids)] for n in range(args.sockets)]
        seen: list[list[int]] = [[] for _ in follows]
        lags: list[list[float]] = [[] for _ in follows]
        # Clients in processes of their own: one process parsing every frame would be the bottleneck.

        urls = [f"{base}/v1/ws/workstreams/{ws_id}?token={API_TOKEN}" for ws_id in follows]
        shares = [list(range(n, len(urls), CLIENT_PROCESSES)) for n in range(CLIENT_PROCESSES)]
        got: multiprocessing.Queue = multiprocessing.Queue()
        readies = [multiprocessing.Event() for _ in shares]
        go_home = multiprocessing.Event()
        followers = [
            multiprocessing.Process(
                target=clients, args=(i, [urls[n] for n in share], readies[i], go_home, got)
            )
            for i, share in enumerate(shares)
        ]
        control_ready, controlled = multiprocessing.Event(), multiprocessing.Queue()
        control = multiprocessing.Process(
            target=direct, args=(svc.redis_url, ws_ids, control_ready, go_home, controlled)
        )
        for p in [*followers, control]:
            p.start()
        for ready in [*readies, control_ready]:
            ready.wait(120)
        out: multiprocessing.Queue = multiprocessing.Queue()
        halves = [ws_ids[: len(ws_ids) // 2], ws_ids[len(ws_ids) // 2 :]]
        publishers = [
            multiprocessing.Process(
                target=publish, args=(svc.redis_url, half, args.seconds, args.lines_per_second, out)
            )
            for half in halves
        ]
        cpu_before, began = cpu_seconds(pids), time.monotonic()
        for p in publishers:
            p.start()
        published: dict[str, list[int]] = {}
        publishers_cpu = clients_cpu = 0.0
        for _ in publishers:
            ids, used = out.get()
            published.update(ids)
            publishers_cpu += used
        time.sleep(2)  # the last events on their way
        window = time.monotonic() - began
        cores = (cpu_seconds(pids) - cpu_before) / window
        go_home.set()
        direct_lags = sorted(controlled.get())
        for _ in followers:
            index, result, used = got.get()
            clients_cpu += used
            for n, (ids, lag) in zip(shares[index], result, strict=True):
                seen[n], lags[n] = ids, lag
        for p in [*followers, *publishers, control]:
            p.join()
    exact = sum(1 for n, ws_id in enumerate(follows) if seen[n] == published[ws_id])
    missing = sum(len(set(published[ws_id]) - set(seen[n])) for n, ws_id in enumerate(follows))
    out_of_order = sum(1 for s in seen if s != sorted(s) or len(s) != len(set(s)))
    all_lags = sorted(lag for per in lags for lag in per)
    delivered = len(all_lags)
    p50 = all_lags[len(all_lags) // 2] * 1000
    p95 = all_lags[min(len(all_lags) - 1, round(0.95 * (len(all_lags) - 1)))] * 1000
    events = sum(len(ids) for ids in published.values())
    print(
        f"web node: 2 workers x 64 threads ({args.backend}); {args.sockets} sockets on "
        f"{args.workstreams} workstreams, {args.lines_per_second} lines/s each for {args.seconds:.0f} s"
    )
    print(
        f"published                       {events} events ({events / args.seconds:.0f}/s); "
        f"delivered {delivered} frames ({delivered / args.seconds:.0f}/s)"
    )
    print(
        f"sockets with every event, once, in order   {exact} of {args.sockets} "
        f"(missing events {missing}; sockets out of order or repeated {out_of_order})"
    )
    print(f"delivery lag                    p50 {p50:6.1f} ms   p95 {p95:6.1f} ms (goal p95 under 100)")
    d50 = direct_lags[len(direct_lags) // 2] * 1000
    d95 = direct_lags[min(len(direct_lags) - 1, round(0.95 * (len(direct_lags) - 1)))] * 1000
    print(f"  control: straight off Redis   p50 {d50:6.1f} ms   p95 {d95:6.1f} ms (what the machine adds)")
    print(f"web node CPU                    {cores:.2f} cores over {window:.1f} s (goal under 1)")
    print(
        f"  beside it on this machine     clients {clients_cpu / window:.2f} cores, "
        f"publishers {publishers_cpu / window:.2f} ({os.cpu_count()} cores in all)"
    )


if __name__ == "__main__":
    main()
