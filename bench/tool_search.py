"""Tool search with 1,000 deferred tools: the BM25 index's build time and query times, the tool
set's build time, and what tool search adds to a model step of a plain turn through the service.

Run: python -m bench.tool_search [--turns 30] [--backend sqlite|postgresql]
Goals (issue 11): a query under 2 ms, an index build under 50 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from app.tools import tool_search
from app.tools.core import toolset
from app.tools.core.registry import build_registry
from app.tools.core.tool import Tool
from app.tools.core.tool_search_plan import SearchPlan
from bench.harness import ms_summary, running_service
from tests.fakes.model_server import Reply
from tests.fakes.tool_source import FakeTools, FileToolSource
from tests.integration.client import EventSocket
from tests.integration.test_tool_search import many_tools

QUERIES = [
    "rocket launch window",
    "list github repository",
    "create invoice billing",
    "slack channel archive",
    "export analytics report",
    "delete user auth",
    "search helpdesk ticket",
    "update customer crm records",
    "storage bucket",
    "nothing matches this",
]
CONFIG = '[tool_sources.many]\nfactory = "tests.fakes.tool_source:create"\npath = "{tmp}/many.json"\n'


# In-process figures are this process's CPU time: on a shared, loaded machine wall time
# mostly measures the other processes.
clock = time.process_time


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = clock()
        fn()
        out.append(clock() - start)
    return out


def in_process(tools: list[Tool]) -> None:
    index = tool_search.index(tools)
    build = timed(lambda: tool_search.index(tools), 50)
    queries = [q for _ in range(50) for q in QUERIES]
    each = []
    for query in queries:
        start = clock()
        index.search(query, 5)
        each.append(clock() - start)
    print(f"BM25 over {len(tools)} tools (name + description), in process, CPU time")
    print(ms_summary("index build", build))
    print(ms_summary("query (best 5)", each))
    print(f"{'query p50 / p95 in microseconds':<44} {_us(each, 0.5):7.0f} us / {_us(each, 0.95):5.0f} us")


def toolset_build(source: FileToolSource) -> None:
    registry = build_registry()
    on = SearchPlan("on", 20, 5)
    print(
        ms_summary(
            "tool set of a step, search on (1,000 deferred)",
            timed(lambda: toolset.build(registry, [source], "interactive", (), on), 30),
        )
    )  # noqa: E501
    print(
        ms_summary(
            "tool set of a step, search off (1,000 listed)",
            timed(lambda: toolset.build(registry, [source], "interactive"), 30),
        )
    )  # noqa: E501
    deferred = toolset.build(registry, [source], "interactive", (), on)
    listed = toolset.build(registry, [source], "interactive")
    print(f"{'tools sent to the model: search on / off':<44} {len(deferred.visible)} / {len(listed.visible)}")


def through_service(backend: str, turns: int) -> None:
    with running_service(backend, CONFIG) as (svc, api, model):
        source_file = FakeTools(svc.tmp / "many.json")
        rows = []
        for label, tools, search in (
            ("no source tools", [], None),
            ("1,000 tools, tool search on", many_tools(), {"mode": "on"}),
            ("1,000 tools, tool search off", many_tools(), {"mode": "off"}),
        ):
            source_file.write(*tools)
            body = {"name": label, "working_dir": str(svc.workdir)} | (
                {"tool_search": search} if search else {}
            )
            ws_id = api.http.post("/v1/api/workstreams", json=body).json()["ws_id"]
            sock = EventSocket(svc.base_url, api.token, ws_id)
            _turn(api, sock, ws_id, model)  # warm-up
            idle = [_turn(api, sock, ws_id, model) for _ in range(turns)]
            sock.close()
            rows.append((label, idle))
        print(
            f"\nplain turns through the service ({backend}; fake model answering at once; {turns} turns each)"
        )
        base = statistics.median(rows[0][1])
        for label, idle in rows:
            extra = (statistics.median(idle) - base) * 1000
            print(ms_summary(f"{label}: send -> idle", idle) + f"   ({extra:+.1f} ms vs none)")


def _turn(api, sock: EventSocket, ws_id: str, model) -> float:  # type: ignore[no-untyped-def]
    model.enqueue(Reply(text="hello"))
    start = time.perf_counter()
    turn_id = api.send(ws_id, "hi")
    sock.wait_turn_end(turn_id)
    return time.perf_counter() - start


def _us(seconds: list[float], q: float) -> float:
    ranked = sorted(seconds)
    return ranked[min(len(ranked) - 1, round(q * (len(ranked) - 1)))] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        FakeTools(Path(tmp) / "many.json").write(*many_tools())
        source = FileToolSource("many", Path(tmp) / "many.json")
        in_process(list(source.catalog().tools))
        toolset_build(source)
    through_service(args.backend, args.turns)


if __name__ == "__main__":
    main()
