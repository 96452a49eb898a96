"""What the jail costs a command: `bash.run` of `echo` end to end (script file, Popen, the group's
watchdog, the pipes, the kill and the reap), jailed in bubblewrap and not, interleaved so that the
machine's load falls on both alike.

Run: python -m bench.sandbox_cost [--runs 200] [--network none host]
Prints, for each way: the median and p95 in milliseconds, and the jail's extra cost at each
(the goal: a jailed `echo` within 5 ms of an unjailed one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from app.sandbox.enforcement import Sandbox
from app.sandbox.settings import SandboxSettings
from app.settings import Settings, ToolSettings
from app.tools import bash
from app.tools.base import ToolContext


def timed(ctx: ToolContext) -> float:
    started = time.perf_counter()
    done = bash.run("echo hello", 10, ctx)
    elapsed = time.perf_counter() - started
    assert done.text == "hello" and done.returncode == 0, done
    return elapsed * 1000


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--network", nargs="+", default=["none", "host"], choices=["none", "proxy", "host"])
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_root:
        folder = os.path.join(data_root, "user", "ws")
        os.makedirs(folder)
        sandbox = Sandbox(Settings(sandbox=SandboxSettings(data_root=data_root)), None)
        tools = ToolSettings(timeout=10)
        ways = {"unjailed": ToolContext("ws", folder, settings=tools)}
        for network in options.network:
            ways[f"jailed ({network})"] = ToolContext(
                "ws", folder, settings=tools, sandbox=sandbox, network=network
            )
        times: dict[str, list[float]] = {name: [] for name in ways}
        for ctx in ways.values():  # warm: the watchdog, the page cache
            timed(ctx)
        for _ in range(options.runs):
            for name, ctx in ways.items():
                times[name].append(timed(ctx))
    base_median, base_p95 = statistics.median(times["unjailed"]), p95(times["unjailed"])
    print(f"bash.run('echo hello'), {options.runs} runs each, interleaved; bwrap: {sandbox.find_bwrap()}")
    for name, values in times.items():
        median, high = statistics.median(values), p95(values)
        extra = "" if name == "unjailed" else f"   (+{median - base_median:.2f} / +{high - base_p95:.2f})"
        print(f"  {name:<16} median {median:6.2f} ms   p95 {high:6.2f} ms{extra}")


if __name__ == "__main__":
    main()
