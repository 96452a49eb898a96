"""MCP figures: 20 stdio servers of 50 tools each in one manager (as one worker process holds them).

- the time to build a workstream's tool list per model step (the ToolSet and its schemas),
  steady and right after a server's list changed (goal < 5 ms);
- the round trip of an MCP echo call through the tool pipeline a batch runs, against
  bash `echo` through the same pipeline (goal: within 10 ms of it);
- memory per connected stdio server: this process's growth, and each server process.

Run: python -m bench.mcp_servers [--servers 20] [--tools 50] [--calls 200]. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from app.mcp.catalog import MCPToolSource
from app.mcp.config import parse_server
from app.mcp.manager import MCPManager
from app.tools import bash
from app.tools.core import toolset as toolsets
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import PreparedCall, execute_call
from app.tools.core.registry import build_registry
from app.tools.core.tool import Tool
from bench.harness import ms_summary, rss_mib

ROOT = Path(__file__).resolve().parents[1]


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def server_pids() -> list[int]:
    import os

    me = os.getpid()
    pids = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if int(fields.get("PPid", "0").strip()) == me:
            pids.append(int(status.parent.name))
    return pids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200)
    ns = parser.parse_args()
    registry = build_registry()
    with tempfile.TemporaryDirectory() as tmp:
        before = rss_mib_self()
        configs = {
            f"s{n:02d}": parse_server(
                f"s{n:02d}",
                {
                    "command": sys.executable,
                    "args": [
                        "-m",
                        "tests.fakes.mcp_server",
                        "--control",
                        f"{tmp}/c{n}",
                        "--tools",
                        str(ns.tools - 6),
                    ],
                    "cwd": str(ROOT),
                },
                "config",
            )
            for n in range(ns.servers)
        }
        started = time.perf_counter()
        manager = MCPManager(configs).start()
        assert manager.wait_settled(120)
        connect = time.perf_counter() - started
        definitions = {n: d for n in ("read_resource", "use_prompt") if (d := registry.definition(n))}
        source = MCPToolSource(manager, definitions)
        tool_count = len(source.catalog().tools)
        after = rss_mib_self()
        print(f"{ns.servers} stdio servers connected in {connect:.1f} s; {tool_count} tools in the catalog")

        def step() -> None:
            tools = toolsets.build(registry, [source], "interactive")
            tools.schemas("/tmp", None)

        step()
        steady = timed(step, 200)
        print(ms_summary("tool list per model step (steady)", steady))
        print(f"{'  best of those (the least disturbed by other load)':<44} {min(steady) * 1000:7.2f} ms")

        def changed_step() -> None:
            # What a list_changed refresh of one server does: a new tool list for it, then a
            # bump; the next step rebuilds that server's part of the catalog.
            conn = manager._connections["s00"]
            conn.listing = replace(conn.listing, tools=tuple(conn.listing.tools))
            manager._bump()
            step()

        print(ms_summary("tool list, first step after one server changed", timed(changed_step, 50)))

        ctx = ToolContext(ws_id="bench", working_dir=tmp)
        echo: Tool = {t.name: t for t in source.catalog().tools}["mcp__s00__echo"]
        mcp_call = PreparedCall("c", echo.name, {"text": "hi"})
        bash_tool = Tool(registry.definition("bash"), bash)  # type: ignore[arg-type]
        bash_call = PreparedCall("c", "bash", {"command": "echo hi"})
        for _ in range(5):
            execute_call(echo, mcp_call, ctx)
            execute_call(bash_tool, bash_call, ctx)
        mcp_times = timed(lambda: execute_call(echo, mcp_call, ctx), ns.calls)
        bash_times = timed(lambda: execute_call(bash_tool, bash_call, ctx), ns.calls)
        print(ms_summary("MCP echo call (stdio, through the pipeline)", mcp_times))
        print(ms_summary("bash echo (through the pipeline)", bash_times))
        best = f"{min(mcp_times) * 1000:7.2f} ms / {min(bash_times) * 1000:.2f} ms"
        print(f"{'  best of each: MCP / bash':<44} {best}")

        pids = server_pids()
        servers_rss = [rss_mib(pid) for pid in pids]
        worker = (after - before) / ns.servers
        each = sum(servers_rss) / max(1, len(servers_rss))
        print(f"memory per connected stdio server: {worker:.2f} MiB in the worker process,")
        print(f"  {each:.1f} MiB per server process ({len(pids)} processes)")
        manager.stop()


def rss_mib_self() -> float:
    import os

    return rss_mib(os.getpid())


if __name__ == "__main__":
    main()
