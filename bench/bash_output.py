"""A big bash output, live: an auto-approved bash call prints 100,000 lines, each carrying the time
it was printed, and a real websocket client records when each tool_output_chunk arrives.

Run: python -m bench.bash_output [--lines 100000] [--rate 0 20000] [--backend sqlite postgresql]
`--rate 0` prints as fast as the printer can (one write per line); any other rate paces it.
Prints, per run: lines received (all, in order?) live and by a client replaying from the log
afterwards; chunk events per second for the call (the most in any 1-s window); each line's latency
from print to arrival at the client (median, p99, max); and the service's CPU while the call ran:
user+sys of the web and worker processes (not the command's own processes) over the wall time,
in cores; Redis's beside it.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import websocket

from bench.harness import running_service
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import Api
from tests.integration.services import Services

# The printer: line i is "<time.time() at print> <i>", one write per line (no buffering in the
# printer itself, so that a line's time is when the service could first have read it).
PRINTER = """
import os, sys, time
lines, rate = int(sys.argv[1]), float(sys.argv[2])
start = time.time()
for i in range(lines):
    if rate:
        ahead = start + i / rate - time.time()
        if ahead > 0.001:
            time.sleep(ahead)
    os.write(1, b"%.6f %d\\n" % (time.time(), i))
"""
TICKS = os.sysconf("SC_CLK_TCK")


class Recorder:
    """A websocket client that keeps each frame with the time it arrived (parsed afterwards,
    so that the client itself is not what falls behind)."""

    def __init__(self, base_url: str, token: str, ws_id: str, after: int | None = None) -> None:
        url = base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{ws_id}?token={token}"
        if after is not None:
            url += f"&after={after}"
        # websocket-client checks UTF-8 in pure Python (about 3 ms per 10 KB): left on, the
        # client itself would be what falls behind a big output. The JSON parse checks it anyway.
        self.conn = websocket.create_connection(url, timeout=120, skip_utf8_validation=True)
        self.frames: list[tuple[float, str]] = []
        self.done = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                text = self.conn.recv()
                if not text:
                    break
                self.frames.append((time.time(), text))
                if '"tool_result"' in text[:200]:
                    self.done.set()
        except (websocket.WebSocketException, OSError):
            pass
        self.done.set()

    def events(self) -> list[tuple[float, dict[str, Any]]]:
        return [(at, json.loads(text)) for at, text in list(self.frames)]

    def close(self) -> None:
        self.conn.close()


def tree_cpu_seconds(root: int) -> float:
    """user+sys of `root` and its descendants in its own session (a bash call's processes run in
    a session of their own: they are the command's CPU, not the service's)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            stats[int(entry.name)] = fields  # [0] state, [1] ppid, [3] session, [11] utime, [12] stime
    session = stats[root][3]
    members, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, fields in stats.items():
            if int(fields[1]) == parent and fields[3] == session and pid not in members:
                members.add(pid)
                frontier.append(pid)
    return sum(int(stats[p][11]) + int(stats[p][12]) for p in members) / TICKS


def redis_pid() -> int | None:
    port = os.environ.get("TEST_REDIS_PORT", "6379")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and b"redis-server" in argv[0] and port.encode() in b" ".join(argv):
                return int(entry.name)
    return None


def cpu_now(svc: Services, redis: int | None) -> dict[str, float]:
    sample = {name: tree_cpu_seconds(svc.processes[name].pid) for name in ("web", "worker")}
    if redis is not None:
        sample["redis"] = tree_cpu_seconds(redis)
    return sample


def lines_of(chunks: list[tuple[float, dict[str, Any]]]) -> list[tuple[float, str]]:
    """Each complete line of the call's output, with the arrival of the chunk that completed it."""
    out: list[tuple[float, str]] = []
    partial = ""
    for at, event in chunks:
        pieces = (partial + event["text"]).split("\n")
        partial = pieces.pop()
        out.extend((at, line) for line in pieces)
    return out


def max_per_second(times: list[float]) -> int:
    times = sorted(times)
    return max((bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times)), default=0)


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def is_whole(lines: list[tuple[float, str]], expected: int) -> bool:
    return [int(text.split()[1]) for _, text in lines] == list(range(expected))


def one_run(svc: Services, api: Api, model: Any, n_lines: int, rate: float) -> dict[str, Any]:
    workdir = svc.workdir
    (workdir / "printer.py").write_text(PRINTER)
    ws_id = api.create_workstream(name="bench", auto_approve=True, working_dir=str(workdir))
    rec = Recorder(svc.base_url, api.token, ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": f"python3 printer.py {n_lines} {rate}"})]))
    model.enqueue(Reply(text="printed"))
    redis = redis_pid()
    before, t0 = cpu_now(svc, redis), time.monotonic()
    api.send(ws_id, "print")
    if not rec.done.wait(300):
        raise RuntimeError("no tool_result within 300 s")
    after, wall = cpu_now(svc, redis), time.monotonic() - t0
    api.wait_idle(ws_id)
    rec.close()
    chunks = [(at, e) for at, e in rec.events() if e.get("type") == "tool_output_chunk"]
    lines = lines_of(chunks)
    latency = sorted(at - float(text.split()[0]) for at, text in lines)
    # The same lines by the time their event was published (its `ts`): the worker's share.
    by_ts = lines_of([(e["ts"], e) for _, e in chunks])
    published = sorted(at - float(text.split()[0]) for at, text in by_ts)
    late = Recorder(svc.base_url, api.token, ws_id, after=0)  # a client that connects afterwards
    late.done.wait(60)
    time.sleep(0.2)
    late.close()
    replayed = lines_of([(at, e) for at, e in late.events() if e.get("type") == "tool_output_chunk"])
    cpu = {k: (after[k] - before[k]) / wall for k in after}
    return {
        "received": len(lines),
        "whole": is_whole(lines, n_lines),
        "replay_whole": is_whole(replayed, n_lines),
        "events": len(chunks),
        "per_second": max_per_second([at for at, _ in chunks]),
        "per_second_ts": max_per_second([e["ts"] for _, e in chunks]),
        "published_median_ms": statistics.median(published) * 1000,
        "published_p99_ms": percentile(published, 0.99) * 1000,
        "largest": max((len(e["text"]) for _, e in chunks), default=0),
        "median_ms": statistics.median(latency) * 1000,
        "p99_ms": percentile(latency, 0.99) * 1000,
        "max_ms": latency[-1] * 1000,
        "wall": wall,
        "cpu": cpu,
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs (all of them whole only if every run was)."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, bool):
            out[key] = all(r[key] for r in runs)
        elif isinstance(value, dict):
            out[key] = {k: statistics.median(r[key][k] for r in runs) for k in value}
        else:
            out[key] = statistics.median(r[key] for r in runs)
    return out


def report(rate: float, r: dict[str, Any]) -> str:
    pace = "as fast as it can" if not rate else f"{rate:,.0f} lines/s"
    cpu = "  ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items())
    service = r["cpu"]["web"] + r["cpu"]["worker"]
    return (
        f"  {pace}: {r['received']:,.0f} lines live (whole, in order: {r['whole']}), "
        f"replayed afterwards whole: {r['replay_whole']}\n"
        f"    chunk events {r['events']:,.0f}, at most {r['per_second']:.0f} in any 1 s as they arrived "
        f"({r['per_second_ts']:.0f} as published), largest {r['largest']:,.0f} chars\n"
        f"    line latency print -> client: median {r['median_ms']:.1f} ms  p99 {r['p99_ms']:.1f} ms  "
        f"max {r['max_ms']:.1f} ms  (print -> published: median {r['published_median_ms']:.1f} ms  "
        f"p99 {r['published_p99_ms']:.1f} ms)\n"
        f"    CPU over {r['wall']:.2f} s (send -> tool_result), cores: {cpu}  "
        f"(service: web+worker {service:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rate", type=float, nargs="+", default=[0, 20_000], help="lines/s (0: unpaced)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each rate (each one is printed)")
    parser.add_argument("--backend", nargs="+", default=["sqlite"], choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    for backend in args.backend:
        with running_service(backend) as (svc, api, model):
            one_run(svc, api, model, 1000, 0)  # warm-up: imports, connections, the worker's threads
            print(f"\nbackend: {backend}; {args.lines:,} lines; machine shared, figures noisy")
            for rate in args.rate:
                runs = [one_run(svc, api, model, args.lines, rate) for _ in range(args.runs)]
                for r in runs:
                    print(report(rate, r), flush=True)
                if len(runs) > 1:
                    print(report(rate, median_of(runs)).replace(":", f" (median of {len(runs)} runs):", 1))


if __name__ == "__main__":
    main()
