"""What the jail costs a command: `bash.run` of `echo` end to end (script file, Popen, the group's
watchdog, the pipes, the kill and the reap), jailed in bubblewrap and not, interleaved so that the
machine's load falls on both alike.

Run: python -m bench.sandbox_cost [--runs 200] [--network none host]
Prints, for each way: the median and p95 in milliseconds, and the jail's extra cost at each
(the goal: a jailed `echo` within 5 ms of an unjailed one). Run as root, each jailed command also
joins a pids cgroup of its own (app/sandbox/pids.py); the jail is then timed both ways, the way
without standing for a service run as an unprivileged user (RLIMIT_NPROC binds it: no cgroup).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator

from app.sandbox import pids
from app.sandbox.enforcement import Sandbox
from app.sandbox.settings import SandboxSettings
from app.settings import Settings, ToolSettings
from app.tools import bash
from app.tools.core.base import ToolContext


def timed(ctx: ToolContext, capped: bool = True) -> float:
    started = time.perf_counter()
    if capped:
        done = bash.run("echo hello", 10, ctx)
    else:
        with uncapped():
            started = time.perf_counter()
            done = bash.run("echo hello", 10, ctx)
    elapsed = time.perf_counter() - started
    assert done.text == "hello" and done.returncode == 0, done
    return elapsed * 1000


@contextlib.contextmanager
def uncapped() -> Iterator[None]:
    """No pids cgroup for the commands started meanwhile (as a non-root service has none)."""
    cap = pids.cap
    pids.cap = lambda limit: None
    try:
        yield
    finally:
        pids.cap = cap


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
        ways: dict[str, tuple[ToolContext, bool]] = {
            "unjailed": (ToolContext("ws", folder, settings=tools), True)
        }
        for network in options.network:
            ctx = ToolContext("ws", folder, settings=tools, sandbox=sandbox, network=network)
            if pids.is_needed() and pids.is_available():
                ways[f"jailed ({network}) + pids cgroup"] = (ctx, True)
            ways[f"jailed ({network})"] = (ctx, False)
        times: dict[str, list[float]] = {name: [] for name in ways}
        for ctx, capped in ways.values():  # warm: the watchdog, the page cache
            timed(ctx, capped)
        for _ in range(options.runs):
            for name, (ctx, capped) in ways.items():
                times[name].append(timed(ctx, capped))
    base_median, base_p95 = statistics.median(times["unjailed"]), p95(times["unjailed"])
    print(f"bash.run('echo hello'), {options.runs} runs each, interleaved; bwrap: {sandbox.find_bwrap()}")
    for name, values in times.items():
        median, high = statistics.median(values), p95(values)
        extra = "" if name == "unjailed" else f"   (+{median - base_median:.2f} / +{high - base_p95:.2f})"
        print(f"  {name:<30} median {median:6.2f} ms   p95 {high:6.2f} ms{extra}")


if __name__ == "__main__":
    main()
