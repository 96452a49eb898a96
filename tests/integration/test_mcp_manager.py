"""A worker's MCP manager against real MCP servers: our fake over stdio and streamable HTTP,
server-everything (npm) and mcp-server-time (PyPI). No mocks: real subprocesses, real sockets."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.mcp.catalog import MCPToolSource
from app.mcp.config import parse_server
from app.mcp.manager import MCPManager
from app.mcp.states import Timing
from app.settings import ToolSettings
from app.tools.core.base import ToolContext, ToolOutcome
from app.tools.core.pipeline import PreparedCall, execute_call, run_calls
from app.tools.core.registry import build_registry
from app.tools.core.tool import Tool
from tests.integration.mcp_peers import FakeMCP, everything_stdio, start_everything_http, time_server

FAST = Timing(connect_seconds=20, health_seconds=0.5, debounce_seconds=0.1, backoff_first_seconds=0.2)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeMCP]:
    server = FakeMCP(tmp_path / "fake")
    yield server
    server.stop_http()


@pytest.fixture
def manage() -> Iterator[Any]:
    managers: list[MCPManager] = []

    def _manage(
        servers: dict[str, dict[str, Any]], timing: Timing = FAST
    ) -> tuple[MCPManager, MCPToolSource]:
        configs = {name: parse_server(name, entry, "config") for name, entry in servers.items()}
        manager = MCPManager(configs, timing).start()
        managers.append(manager)
        assert manager.wait_settled(30)
        registry = build_registry()
        return manager, MCPToolSource(
            manager, {n: d for n in ("read_resource", "use_prompt") if (d := registry.definition(n))}
        )

    yield _manage
    for manager in managers:
        manager.stop()


def ctx(**changes: Any) -> ToolContext:
    return replace(ToolContext(ws_id="ws", working_dir="/tmp"), **changes)


def tools(source: MCPToolSource) -> dict[str, Tool]:
    return {t.name: t for t in source.catalog().tools}


def run(tool: Tool, args: dict[str, Any], context: ToolContext | None = None) -> ToolOutcome:
    return execute_call(tool, PreparedCall("c1", tool.name, args), context or ctx())


def test_stdio_server_tools_are_named_for_the_model_and_answer(fake: FakeMCP, manage: Any) -> None:
    _manager, source = manage({"fake": fake.stdio()})
    offered = tools(source)
    assert {"mcp__fake__echo", "mcp__fake__fail", "mcp__fake__hang"} <= set(offered)
    echo = offered["mcp__fake__echo"]
    assert echo.definition.description.startswith("[MCP: fake]")
    assert echo.definition.parameters["properties"]["text"]["type"] == "string"
    assert echo.definition.is_for_kind("task")  # sub-agents get MCP tools too
    prep = echo.handler.prepare({"text": "hi"}, ctx())
    assert prep.needs_approval and "fake" in prep.header and "echo" in prep.header and '"hi"' in prep.preview
    assert run(echo, {"text": "hi"}) == ToolOutcome("echo: hi", False)


def test_is_error_and_huge_output(fake: FakeMCP, manage: Any) -> None:
    _manager, source = manage({"fake": fake.stdio()})
    failed = run(tools(source)["mcp__fake__fail"], {"reason": "r"})
    assert failed.is_error
    big = run(tools(source)["mcp__fake__big"], {"chars": 50_000}, ctx(settings=ToolSettings(truncation=2048)))
    assert not big.is_error and len(big.output) < 3000 and "characters" in big.output[900:1200]


def test_list_changes_while_connected_reach_the_catalog(fake: FakeMCP, manage: Any) -> None:
    manager, source = manage({"fake": fake.stdio()})
    before = source.catalog().version
    fake.lists(tools=["added"], resources=["notes"], prompts=["greet"])
    assert manager.wait_for(lambda: "mcp__fake__added" in tools(source), 10)
    assert manager.wait_for(
        lambda: any(r["uri"] == "fake://extra/notes" for r in source.offer().resources), 10
    )
    assert manager.wait_for(lambda: "mcp__fake__greet" in source.prompts(), 10)
    assert source.catalog().version != before
    assert source.catalog_at(before) is not None  # a batch of the older step still resolves
    fake.lists()
    assert manager.wait_for(lambda: "mcp__fake__added" not in tools(source), 10)


def test_a_call_past_its_timeout_is_an_error_and_cancelled_on_the_server(fake: FakeMCP, manage: Any) -> None:
    _manager, source = manage({"fake": fake.stdio()})
    started = time.monotonic()
    out = run(tools(source)["mcp__fake__hang"], {}, ctx(settings=ToolSettings(mcp_call_timeout=1)))
    assert out.is_error and "did not answer" in out.output and "fake" in out.output
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 5
    while not fake.cancelled() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.cancelled() == ["hang"]


def test_cancelling_the_turn_cancels_the_request_on_the_server(fake: FakeMCP, manage: Any) -> None:
    _manager, source = manage({"fake": fake.stdio()})
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    out = run(tools(source)["mcp__fake__hang"], {}, ctx(is_cancelled=cancelled.is_set))
    assert out.is_error and out.output.startswith("Cancelled")
    deadline = time.monotonic() + 5
    while not fake.cancelled() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.cancelled() == ["hang"]


def test_a_crash_mid_call_names_the_server_the_batch_finishes_and_it_reconnects(
    fake: FakeMCP, tmp_path: Path, manage: Any
) -> None:
    other = FakeMCP(tmp_path / "other")
    manager, source = manage({"fake": fake.stdio(), "other": other.stdio()})
    offered = tools(source)
    batch = [
        (offered["mcp__fake__crash"], {}),
        (offered["mcp__other__slow_echo"], {"text": "t", "seconds": 0.5}),
    ]
    results = run_calls(batch, lambda item: run(*item))
    assert results[0].is_error and "'fake'" in results[0].output and "disconnected" in results[0].output
    assert results[1] == ToolOutcome("echo: t", False)
    assert manager.wait_for(lambda: "mcp__fake__echo" in tools(source), 15)  # back, rediscovered
    assert run(tools(source)["mcp__fake__echo"], {"text": "again"}).output == "echo: again"
    assert fake.calls().count("crash") == 1  # at most once: never sent again


def test_a_server_that_cannot_start_is_an_error_with_its_stderr_and_no_tools(
    fake: FakeMCP, manage: Any
) -> None:
    import sys

    manager, source = manage(
        {
            "missing": {"command": "/nonexistent/mcp-server"},
            "exits": {
                "command": sys.executable,
                "args": ["-c", "import sys; sys.exit('bad config: no token')"],
            },
            "leaks": {
                "command": sys.executable,
                "args": ["-c", "import os, sys; sys.exit('my token is ' + os.environ['MY_TOKEN'])"],
                "env": {"MY_TOKEN": "sekrit-value"},
            },
            "fake": fake.stdio(),
        }
    )
    views = {v.config.name: v for v in manager.servers()}
    assert views["missing"].state == "error" and "No such file" in (views["missing"].last_error or "")
    assert views["exits"].state == "error" and "bad config: no token" in (views["exits"].last_error or "")
    assert views["fake"].state == "connected"
    assert not [n for n in tools(source) if n.startswith(("mcp__missing__", "mcp__exits__"))]
    leaked = views["leaks"].last_error or ""
    assert "my token is [redacted]" in leaked and "sekrit-value" not in leaked


def test_streamable_http_server_lists_calls_pushes_and_is_reconnected(fake: FakeMCP, manage: Any) -> None:
    manager, source = manage({"remote": fake.start_http()})
    assert run(tools(source)["mcp__remote__echo"], {"text": "over http"}).output == "echo: over http"
    fake.lists(tools=["pushed"])
    assert manager.wait_for(lambda: "mcp__remote__pushed" in tools(source), 10)
    fake.stop_http()
    assert manager.wait_for(lambda: manager.servers()[0].state == "error", 10)
    assert "mcp__remote__echo" not in tools(source)
    fake.start_http()  # same port: the health loop's backoff finds it again
    assert manager.wait_for(lambda: manager.servers()[0].state == "connected", 20)
    assert run(tools(source)["mcp__remote__echo"], {"text": "back"}).output == "echo: back"


def test_resources_and_prompts_of_the_fake(fake: FakeMCP, manage: Any) -> None:
    _manager, source = manage({"fake": fake.stdio()})
    offered = tools(source)
    read, use = offered["read_resource"], offered["use_prompt"]
    assert run(read, {"uri": "fake://readme"}).output == "Hello from the fake readme."
    blob = run(read, {"uri": "fake://blob"})
    assert "base64" in blob.output and "AAECYmluYXJ5" in blob.output
    assert run(read, {"uri": "fake://items/abc"}).output == "item abc"  # through its template
    # fake://files{/path*}: an RFC 6570 path expansion, any number of /segments
    assert read.handler.prepare({"uri": "fake://files/docs/notes.md"}, ctx()).error is None
    assert run(read, {"uri": "fake://files/docs/notes.md"}).output == "file docs/notes.md"
    assert read.handler.prepare({"uri": "fake://filesdocs"}, ctx()).error is not None
    assert read.handler.prepare({"uri": "nowhere://x"}, ctx()).error is not None
    expanded = run(use, {"name": "mcp__fake__review", "arguments": {"code": "x = 1"}})
    assert expanded.output == "[user]: Review this python code:\nx = 1\n\n[assistant]: I will review it."
    bad = use.handler.prepare({"name": "mcp__fake__review", "arguments": {"code": 3}}, ctx())
    assert bad.error is not None and "must be strings" in bad.error
    none = use.handler.prepare({"name": "mcp__fake__review", "arguments": None}, ctx())
    assert none.error == "Error: use_prompt mcp__fake__review: missing required argument(s): code"


def test_a_list_the_server_does_not_implement_is_empty_and_a_warning_the_rest_is_used(
    fake: FakeMCP, manage: Any
) -> None:
    # It declares resources and prompts, but answers "Method not found" for two of their lists.
    manager, source = manage({"fake": fake.stdio(without=("resources/templates/list", "prompts/list"))})
    view = manager.servers()[0]
    assert (view.state, view.last_error) == ("connected", None)
    offered = tools(source)
    assert run(offered["mcp__fake__echo"], {"text": "hi"}).output == "echo: hi"
    assert run(offered["read_resource"], {"uri": "fake://readme"}).output == "Hello from the fake readme."
    refused = offered["read_resource"].handler.prepare({"uri": "fake://items/abc"}, ctx())
    assert refused.error is not None and "no connected MCP server offers" in refused.error
    assert "use_prompt" not in offered
    warned = [
        "resources/templates/list: the server answers Method not found; nothing listed",
        "prompts/list: the server answers Method not found; nothing listed",
    ]
    assert list(source.offer().warnings["fake"]) == warned
    fake.lists(tools=["added"], resources=["notes"])  # a refresh of both lists keeps the warnings
    assert manager.wait_for(
        lambda: any(r["uri"] == "fake://extra/notes" for r in source.offer().resources), 10
    )
    assert manager.wait_for(lambda: "mcp__fake__added" in tools(source), 10)
    assert list(source.offer().warnings["fake"]) == warned


def test_a_list_that_fails_at_connect_fails_the_connection_until_it_answers(
    fake: FakeMCP, manage: Any
) -> None:
    fake.faults(resources_templates_list="fail")  # a real error, not "Method not found"
    manager, source = manage({"fake": fake.stdio()})
    assert manager.wait_for(
        lambda: "resources/templates/list is broken right now" in (manager.servers()[0].last_error or ""), 10
    )
    assert not tools(source)
    fake.faults()
    assert manager.wait_for(lambda: "mcp__fake__echo" in tools(source), 20)  # the backoff retried it
    assert manager.servers()[0].last_error is None


def test_a_failed_refresh_is_retried_on_the_health_tick_and_its_error_goes(
    fake: FakeMCP, manage: Any
) -> None:
    manager, source = manage({"fake": fake.stdio()})
    fake.faults(tools_list="fail")
    fake.lists(tools=["added"])
    assert manager.wait_for(
        lambda: manager.servers()[0].last_error == "refresh failed: tools/list is broken right now", 10
    )
    assert manager.servers()[0].state == "connected" and "mcp__fake__echo" in tools(source)  # old list kept
    fake.faults()
    assert manager.wait_for(
        lambda: "mcp__fake__added" in tools(source) and manager.servers()[0].last_error is None, 10
    ), manager.servers()[0].last_error


def test_a_refresh_that_never_answers_times_out_and_is_retried(fake: FakeMCP, manage: Any) -> None:
    manager, source = manage({"fake": fake.stdio()}, replace(FAST, request_seconds=2))
    fake.faults(tools_list="hang")
    fake.lists(tools=["added"])
    assert manager.wait_for(
        lambda: manager.servers()[0].last_error == "refresh failed: no answer within 2 s", 10
    ), fake.hung()
    assert manager.servers()[0].state == "connected"
    assert run(tools(source)["mcp__fake__echo"], {"text": "still here"}).output == "echo: still here"
    assert manager.wait_for(lambda: "tools/list" in fake.cancelled(), 5)  # cancelled on the server too
    fake.faults()
    manager.refresh("fake")  # or the next health tick: either retries
    assert manager.wait_for(
        lambda: "mcp__fake__added" in tools(source) and manager.servers()[0].last_error is None, 10
    ), manager.servers()[0].last_error


def test_a_server_that_stops_answering_while_a_refresh_fails_is_reconnected(
    fake: FakeMCP, manage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    manager, source = manage({"fake": fake.stdio()}, replace(FAST, request_seconds=2))
    fake.faults(tools_list="hang")
    fake.lists(tools=["added"])
    assert manager.wait_for(lambda: "refresh failed" in (manager.servers()[0].last_error or ""), 10)
    stopped = fake.pid()
    os.kill(stopped, signal.SIGSTOP)  # now it answers nothing, not even a ping
    try:
        fake.faults()
        assert manager.wait_for(lambda: "mcp__fake__added" in tools(source), 30), manager.servers()[0]
    finally:
        with contextlib.suppress(ProcessLookupError):  # the SDK killed it when it reconnected
            os.kill(stopped, signal.SIGKILL)
    assert fake.pid() != stopped and manager.servers()[0].last_error is None
    assert "MCP server fake: no answer to a ping within 2 s" in caplog.messages


def test_server_everything_over_stdio_and_http_and_mcp_server_time(manage: Any) -> None:
    proc, http = start_everything_http()
    try:
        manager, source = manage({"everything": everything_stdio(), "remote": http, "time": time_server()})
        views = {v.config.name: v for v in manager.servers()}
        assert {v.state for v in views.values()} == {"connected"}, {n: v.last_error for n, v in views.items()}
        offered = tools(source)
        ev_tools = [t.name for t in views["everything"].listing.tools]
        assert "echo" in ev_tools  # discovered, not assumed: the rest we only count
        assert (
            len(ev_tools) >= 5
            and views["everything"].listing.resources
            and views["everything"].listing.prompts
        )
        assert [t.name for t in views["remote"].listing.tools] == ev_tools
        assert "hello" in run(offered["mcp__everything__echo"], {"message": "hello"}).output
        assert "hello" in run(offered["mcp__remote__echo"], {"message": "hello"}).output
        now = run(offered["mcp__time__get_current_time"], {"timezone": "UTC"})
        assert not now.is_error and "UTC" in now.output
        uri = views["everything"].listing.resources[0]["uri"]
        assert not run(offered["read_resource"], {"uri": uri}).is_error
        simple = run(offered["use_prompt"], {"name": "mcp__everything__simple-prompt"})
        assert simple.output.startswith("[user]: ")
    finally:
        proc.kill()
        proc.wait(10)


def test_refresh_reconnects_a_failed_server_at_once(fake: FakeMCP, tmp_path: Path) -> None:
    import sys

    from tests.integration.mcp_peers import ROOT

    ready = tmp_path / "ready"
    script = (
        f"import os, sys; os.path.exists({str(ready)!r}) or sys.exit('not ready yet'); "
        "os.execv(sys.executable, [sys.executable, '-m', 'tests.fakes.mcp_server', "
        f"'--control', {str(fake.control)!r}])"
    )
    config = parse_server(
        "late", {"command": sys.executable, "args": ["-c", script], "cwd": str(ROOT)}, "config"
    )
    manager = MCPManager({"late": config}, replace(FAST, backoff_first_seconds=60)).start()
    try:
        assert manager.wait_settled(30)
        assert manager.servers()[0].state == "error" and "not ready yet" in (
            manager.servers()[0].last_error or ""
        )
        ready.touch()
        assert manager.refresh("late") == ["late"]  # no waiting out the minute of backoff
        assert manager.wait_for(lambda: manager.servers()[0].state == "connected", 20)
        assert manager.servers()[0].listing.tools
    finally:
        manager.stop()
