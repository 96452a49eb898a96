"""What the egress proxy costs a command: bwrap running `true`, alone and with a proxy and relay.

Run: python -m bench.egress_start [--runs 10]
Prints, for each: the median and the fastest wall time of the whole start-to-exit, in ms
(with the proxy: starting it, the relay in the jail, `true`, and the proxy's clean-up).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import time

from app.sandbox.egress import EgressProxy
from app.sandbox.relay import egress_for
from app.settings import Settings

JAIL = ["--unshare-all", "--unshare-user", "--die-with-parent", "--ro-bind", "/", "/"]
JAIL += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]


def run_plain(bwrap: str) -> float:
    start = time.perf_counter()
    subprocess.run([bwrap, *JAIL, "--", "true"], check=True)
    return time.perf_counter() - start


def run_proxied(bwrap: str, settings: Settings) -> float:
    start = time.perf_counter()
    with EgressProxy(settings) as proxy:
        folder = os.path.dirname(proxy.socket_path)
        egress = egress_for(proxy.socket_path, 3128, "/usr/bin/python3")
        argv = [bwrap, *JAIL, "--bind", folder, folder, "--", *egress.argv_prefix, "true"]
        subprocess.run(argv, env=egress.env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    bwrap = shutil.which("bwrap") or "bwrap"
    settings = Settings.from_mapping({}, {})
    for name, run in (
        ("bwrap true", lambda: run_plain(bwrap)),
        ("proxy + relay + true", lambda: run_proxied(bwrap, settings)),
    ):
        times = [run() for _ in range(runs)]
        print(f"{name}: median {statistics.median(times) * 1000:.1f} ms, fastest {min(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
