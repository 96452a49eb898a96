"""MCP through the running service: workers hold the servers, the web tier reads what they publish,
the admin API's changes reach every worker, and a turn uses MCP tools, a resource and a prompt.

Servers configured three ways at once: our fake in config.toml, server-everything and
mcp-server-time in the $TURNSTONE_MCP_CONFIG file, and more through the admin API."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from sqlmodel import Session, create_engine, select

from app.storage.models import PromptTemplate
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.client import Api, EventSocket, wait_until
from tests.integration.conftest import BACKENDS
from tests.integration.mcp_peers import FakeMCP, everything_stdio, time_server
from tests.integration.services import API_TOKEN, Services, postgres_available
from turnstone_jobs.chat import Chat
from turnstone_jobs.client import Client

pytestmark = pytest.mark.integration
# With server-everything's tools the workstream has more than tools.search_threshold (20): tool
# search would defer them. These tests are about MCP itself, so every tool stays in view.
IN_VIEW = {"tool_search": {"mode": "off"}}

SERVERS = {"fake", "everything", "time"}
FAKES: dict[str, FakeMCP] = {}  # the fake in config.toml, by the service's base URL


@pytest.fixture(scope="module", params=BACKENDS)
def services(  # by this name, a failure shows the service logs (conftest's report hook)
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, model_server: FakeModelServer
) -> Iterator[Services]:
    if request.param == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    tmp = tmp_path_factory.mktemp(f"mcp-{request.param}")
    services = Services(request.param, tmp, model_server.openai_base_url)
    fake = FakeMCP(tmp / "fake")
    stdio = fake.stdio()
    config = tmp / "config.toml"
    config.write_text(
        "[mcp.servers.fake]\n"
        f"command = {json.dumps(stdio['command'])}\nargs = {json.dumps(stdio['args'])}\n"
        f"cwd = {json.dumps(stdio['cwd'])}\n"
    )
    file = tmp / "mcp.json"
    file.write_text(json.dumps({"mcpServers": {"everything": everything_stdio(), "time": time_server()}}))
    services.env.update(
        TURNSTONE_CONFIG=str(config), TURNSTONE_MCP_CONFIG=str(file), TURNSTONE_MCP_HEALTH_SECONDS="1"
    )
    FAKES[services.base_url] = fake
    try:
        services.start()
        yield services
    finally:
        services.stop()


def overview(api: Api) -> dict[str, Any]:
    r = api.http.get("/v1/api/mcp")
    assert r.status_code == 200, r.text
    return dict(r.json())


def servers(api: Api) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in overview(api)["servers"]}


def connected(api: Api, names: set[str]) -> dict[str, dict[str, Any]]:
    def check() -> dict[str, dict[str, Any]] | None:
        now = servers(api)
        return now if all(now.get(n, {}).get("state") == "connected" for n in names) else None

    return wait_until(check, what=f"{names} connected")  # type: ignore[no-any-return]


def in_every_worker(
    api: Api, names: set[str], workers: int, timeout: float = 60
) -> dict[str, dict[str, Any]]:
    """Wait until each of `names` is connected in `workers` workers; the servers as then shown."""

    def check() -> dict[str, dict[str, Any]] | None:
        now = servers(api)
        ready = all(
            len(states := now.get(n, {}).get("workers", {})) == workers
            and set(states.values()) == {"connected"}
            for n in names
        )
        return now if ready else None

    return wait_until(check, timeout=timeout, what=f"{names} connected in {workers} workers")  # type: ignore[no-any-return]


def test_workers_publish_status_and_health_counts_it(api: Api) -> None:
    now = connected(api, SERVERS)
    assert {n: now[n]["origin"] for n in SERVERS} == {"fake": "config", "everything": "file", "time": "file"}
    everything = now["everything"]
    assert everything["transport"] == "stdio" and everything["last_error"] is None
    assert "mcp__everything__echo" in everything["tools"]
    assert everything["counts"]["tools"] == len(everything["tools"]) >= 5
    assert everything["counts"]["resources"] > 0 and everything["counts"]["prompts"] > 0
    health = httpx.get(api.base_url + "/health").json()
    resources = sum(now[n]["counts"]["resources"] + now[n]["counts"]["templates"] for n in SERVERS)
    assert health["mcp"] == {
        "servers": 3,
        "configured": 3,
        "resources": resources,
        "prompts": sum(now[n]["counts"]["prompts"] for n in SERVERS),
    }


def test_a_turn_calls_tools_of_two_servers_reads_a_resource_and_expands_a_prompt(
    api: Api, model: FakeModelServer, open_socket: Callable[[str], EventSocket]
) -> None:
    uri = connected(api, SERVERS)["everything"]["resources"][0]
    ws_id = api.create_workstream(**IN_VIEW)
    sock = open_socket(ws_id)
    calls = [
        ToolCall("mcp__everything__echo", {"message": "hello from the model"}),
        ToolCall("mcp__time__get_current_time", {"timezone": "UTC"}),
        ToolCall("read_resource", {"uri": uri}),
        ToolCall("use_prompt", {"name": "mcp__everything__args-prompt", "arguments": {"city": "Oslo"}}),
    ]
    model.enqueue(Reply(tool_calls=calls))
    model.enqueue(Reply(text="All four done."))
    turn_id = api.send(ws_id, "use the MCP servers")
    items = sock.wait_type("approve_request", timeout=60)["items"]
    assert [i["needs_approval"] for i in items] == [True] * 4
    assert [i["header"] for i in items[:2]] == ["MCP everything: echo", "MCP time: get_current_time"]
    assert '"hello from the model"' in items[0]["preview"]
    assert api.approve(ws_id, approved=True).status_code == 200
    results = {i["call_id"]: sock.wait_type("tool_result", call_id=i["call_id"], timeout=60) for i in items}
    echo, now, resource, prompt = (results[i["call_id"]] for i in items)
    assert not any(r["is_error"] for r in results.values()), results
    assert "hello from the model" in echo["output"]
    assert "UTC" in now["output"]
    assert resource["output"].strip()
    assert prompt["output"].startswith("[user]: ") and "Oslo" in prompt["output"]
    sock.wait_turn_end(turn_id)
    first = model.history[0].body
    names = [t["function"]["name"] for t in first["tools"]]
    assert names.index("bash") < names.index("mcp__everything__echo")  # built-ins first
    system = first["messages"][0]["content"]
    assert (
        f"  {uri}" in system and "<mcp-prompts>" in system and "mcp__everything__args-prompt(city" in system
    )


def test_an_mcp_tool_deferred_by_tool_search_is_found_then_called(
    api: Api, model: FakeModelServer, open_socket: Callable[[str], EventSocket]
) -> None:
    # By default (search "auto") server-everything's tools push the workstream past the threshold:
    # MCP tools are deferred, found by tool_search like any tool source's, and then called.
    connected(api, SERVERS)
    ws_id = api.create_workstream()
    tools = api.workstream(ws_id)["tools"]  # the web tier counts what the workers publish
    assert tools["search"] == "client" and tools["total"] >= tools["visible"] + 10, tools
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("tool_search", {"query": "echo back the message"}, id="s1")]))
    echo = ToolCall("mcp__everything__echo", {"message": "found and called"}, id="e1")
    model.enqueue(Reply(tool_calls=[echo]))
    model.enqueue(Reply(text="Echoed."))
    turn_id = api.send(ws_id, "find a tool that echoes, and use it")
    item = sock.wait_type("approve_request", timeout=60)["items"][0]
    assert item["func_name"] == "mcp__everything__echo" and item["header"] == "MCP everything: echo"
    assert api.approve(ws_id, approved=True).status_code == 200
    assert sock.wait_turn_end(turn_id)["state"] == "idle"

    def offered(n: int) -> list[str]:
        return [t["function"]["name"] for t in model.history[n].body["tools"]]

    assert "tool_search" in offered(0) and "mcp__everything__echo" not in offered(0)
    # read_resource and use_prompt are built-ins, whichever source brings them: in view, and the
    # resources and prompts they reach listed in the system prompt.
    assert {"read_resource", "use_prompt"} <= set(offered(0))
    system = model.history[0].body["messages"][0]["content"]
    assert "<mcp-resources>" in system and "<mcp-prompts>" in system
    found = next(m["content"] for m in model.history[1].body["messages"] if m.get("tool_call_id") == "s1")
    assert "- mcp__everything__echo:" in found
    assert "mcp__everything__echo" in offered(1)
    echoed = next(m["content"] for m in model.history[2].body["messages"] if m.get("tool_call_id") == "e1")
    assert "found and called" in echoed
    assert "mcp__everything__echo" in api.workstream(ws_id)["expanded_tools"]


def test_always_for_read_resource_covers_that_uri_only(
    api: Api, model: FakeModelServer, open_socket: Callable[[str], EventSocket]
) -> None:
    first, second = connected(api, SERVERS)["everything"]["resources"][:2]
    ws_id = api.create_workstream(**IN_VIEW)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("read_resource", {"uri": first})]))
    model.enqueue(
        Reply(
            tool_calls=[ToolCall("read_resource", {"uri": first}), ToolCall("read_resource", {"uri": second})]
        )
    )
    model.enqueue(Reply(text="read"))
    turn_id = api.send(ws_id, "read twice")
    sock.wait_type("approve_request", timeout=60)
    assert api.approve(ws_id, approved=True, always=True).status_code == 200
    asked = sock.wait_for(lambda e: e["type"] == "approve_request" and e.get("step", 0) > 0, timeout=60)
    by_uri = {i["header"].rsplit(" ", 1)[-1]: i for i in asked["items"]}
    assert by_uri[first]["status"] == "approved" and by_uri[second]["status"] == "pending"
    assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(turn_id)
    assert f"read_resource:{first}" in api.workstream(ws_id)["auto_approve_tools"]


def http_fake(tmp: Path) -> FakeMCP:
    return FakeMCP(tmp / f"http-{os.getpid()}-{time.monotonic_ns()}")


def test_admin_servers_reach_two_workers_and_secrets_stay_write_only(
    services: Services, api: Api, tmp_path: Path
) -> None:
    connected(api, SERVERS)
    services.start_worker("worker2", concurrency=2)
    fake = http_fake(tmp_path)
    try:
        # The catalogs compare only once the new worker has started every configured server too
        # (its stdio servers may take seconds to spawn on a loaded machine).
        in_every_worker(api, SERVERS, workers=2)
        body = {
            "name": "remote",
            "type": "http",
            "url": fake.start_http()["url"],
            "headers": {"X-Api-Key": "s3cret"},
        }
        added = api.http.post("/v1/api/mcp/servers", json=body)
        assert added.status_code == 201, added.text
        started = time.monotonic()
        now = in_every_worker(api, {"remote"}, workers=2, timeout=20)["remote"]
        reached = time.monotonic() - started
        assert reached < 5, reached  # within a couple of seconds, a server's start-up included
        assert "mcp__remote__echo" in now["tools"]
        versions = {w["catalog_version"] for w in overview(api)["workers"].values()}
        assert len(versions) == 1  # both workers offer the same catalog
        shown = api.http.get("/v1/api/mcp/servers/remote").json()
        assert shown["header_keys"] == ["X-Api-Key"] and "s3cret" not in json.dumps(shown)
        assert "s3cret" not in api.http.get("/v1/api/mcp/servers").text
        assert "s3cret" not in api.http.get("/v1/api/mcp").text
        logs = "".join(p.read_text(errors="replace") for p in services.tmp.glob("*.log"))
        assert "s3cret" not in logs
        # a change of definition, then a removal, reach both workers too
        fake.lists(tools=["late"])
        wait_until(lambda: "mcp__remote__late" in servers(api)["remote"]["tools"], timeout=10, what="push")
        assert (
            api.http.put(
                "/v1/api/mcp/servers/remote", json={"type": "http", "url": body["url"] + "/"}
            ).status_code
            == 200
        )
        assert api.http.delete("/v1/api/mcp/servers/remote").status_code == 204
        wait_until(lambda: "remote" not in servers(api), timeout=10, what="remote gone")
    finally:
        services.kill("worker2")
        fake.stop_http()


def test_a_server_removed_and_added_again_is_not_shown_connected_before_a_worker_says_so(
    services: Services, api: Api, tmp_path: Path
) -> None:
    connected(api, SERVERS)
    fake = http_fake(tmp_path)
    body = {"name": "again", "type": "http", "url": fake.start_http()["url"]}
    worker = services.processes["worker"].pid
    try:
        assert api.http.post("/v1/api/mcp/servers", json=body).status_code == 201
        connected(api, {"again"})
        os.kill(worker, signal.SIGSTOP)  # the worker's last report says "connected"
        assert api.http.delete("/v1/api/mcp/servers/again").status_code == 204
        assert api.http.post("/v1/api/mcp/servers", json=body).status_code == 201
        # That report is older than the new definition: it speaks of the server deleted.
        assert servers(api)["again"]["state"] == "connecting"
        os.kill(worker, signal.SIGCONT)
        connected(api, {"again"})
    finally:
        os.kill(worker, signal.SIGCONT)
        api.http.delete("/v1/api/mcp/servers/again")
        fake.stop_http()


def test_refresh_reconnects_and_errors_are_reported(services: Services, api: Api) -> None:
    connected(api, SERVERS)
    broken = api.http.post("/v1/api/mcp/servers", json={"name": "broken", "command": "/nonexistent/server"})
    assert broken.status_code == 201
    now = wait_until(lambda: (s := servers(api).get("broken")) and s["state"] == "error" and s, what="error")
    assert "No such file" in now["last_error"]
    r = api.http.post("/v1/api/mcp/refresh", json={"server": "broken"})
    assert r.status_code == 202 and r.json()["workers"] >= 1
    assert api.http.post("/v1/api/mcp/refresh", json={}).status_code == 202
    assert api.http.post("/v1/api/mcp/refresh", json={"server": "nope"}).status_code == 404
    assert api.http.delete("/v1/api/mcp/servers/broken").status_code == 204


def test_an_admin_can_have_a_connected_server_connected_anew(services: Services, api: Api) -> None:
    connected(api, SERVERS)
    fake = FAKES[services.base_url]
    before = fake.pid()
    r = api.http.post("/v1/api/mcp/refresh", json={"server": "fake", "reconnect": True})
    # workers: how many listened on the control channel (Redis pub/sub channels span databases)
    assert r.status_code == 202 and r.json()["workers"] >= 1
    assert {k: v for k, v in r.json().items() if k != "workers"} == {"refreshing": "fake", "reconnect": True}
    # a new session, so a new server process (stdio), connected again with its tools
    wait_until(lambda: fake.pid() != before, timeout=30, what="a new fake server process")
    connected(api, SERVERS)
    assert "mcp__fake__echo" in servers(api)["fake"]["tools"]
    plain = api.http.post("/v1/api/mcp/refresh", json={"server": "fake"}).json()
    assert plain["reconnect"] is False
    for bad in ("yes", 1, "\u0000", [True], {"x": 1}):  # null is leaving it out
        refused = api.http.post("/v1/api/mcp/refresh", json={"server": "fake", "reconnect": bad})
        assert refused.status_code == 400 and refused.json()["field"] == "reconnect", (bad, refused.text)


def test_the_terminal_clients_mcp_lists_each_servers_tools_and_reconnects_one(
    services: Services, api: Api
) -> None:
    connected(api, SERVERS)
    out = io.StringIO()
    chat = Chat(Client(services.base_url, API_TOKEN), "", Console(file=out, width=200), {})
    chat.cmd_mcp("")
    listed = out.getvalue().splitlines()
    assert "fake: connected, " in "\n".join(listed)
    assert (
        "  mcp__fake__echo  [MCP: fake]" in listed and "  mcp__everything__echo  [MCP: everything]" in listed
    )
    fake = FAKES[services.base_url]
    before = fake.pid()
    chat.cmd_mcp("reconnect fake")
    assert re.fullmatch(
        r"reconnecting fake: \d+ worker\(s\) told; /mcp shows the result", out.getvalue().splitlines()[-1]
    )
    wait_until(lambda: fake.pid() != before, timeout=30, what="the fake connected anew")
    connected(api, SERVERS)


def test_prompts_are_synced_as_read_only_skills(services: Services, api: Api) -> None:
    connected(api, SERVERS)
    engine = create_engine(services.db.url)

    def synced() -> list[PromptTemplate]:
        with Session(engine) as s:
            return list(s.exec(select(PromptTemplate).where(PromptTemplate.origin == "mcp")).all())

    rows = wait_until(lambda: [r for r in synced() if r.mcp_server == "everything"], what="synced prompts")
    assert {r.name for r in rows} >= {"mcp__everything__simple-prompt", "mcp__everything__args-prompt"}
    assert all(r.readonly and r.origin == "mcp" for r in rows)
    engine.dispose()


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"name": "a__b", "command": "x"}, 400, "name"),
        ({"name": "nul\u0000", "command": "x"}, 400, "name"),
        ({"name": "surrogate\ud800", "command": "x"}, 400, "name"),
        ({"name": "s", "type": "carrier-pigeon", "command": "x"}, 400, "type"),
        ({"name": "s"}, 400, "command"),
        ({"name": "s", "type": "http"}, 400, "url"),
        ({"name": "s", "command": ["x"]}, 400, "command"),
        ({"name": "s", "command": "x", "env": {"K": {"deep": [[[[1]]]]}}}, 400, "env.K"),
        ({"name": "s", "command": "x", "args": "x" * 100_000}, 400, "args"),
        ({"name": "s", "command": "x", "colour": "red"}, 400, "colour"),
        ({"name": 5, "command": "x"}, 400, "name"),
        ({"name": "fake", "command": "x"}, 409, "name"),
    ],
)
def test_hostile_server_definitions_are_refused_naming_the_field(
    api: Api, body: dict[str, Any], status: int, field: str
) -> None:
    # ASCII-escaped JSON: the only way a lone surrogate travels
    r = api.http.post(
        "/v1/api/mcp/servers", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


def test_what_the_admin_api_refuses(api: Api) -> None:
    assert api.http.put("/v1/api/mcp/servers/fake", json={"command": "x"}).status_code == 403
    assert api.http.delete("/v1/api/mcp/servers/everything").status_code == 403
    assert api.http.get("/v1/api/mcp/servers/none").status_code == 404
    assert api.http.get("/v1/api/mcp/servers/%00").status_code == 404
    assert api.http.post("/v1/api/mcp/servers", content=b"[1, 2]").status_code == 400
    assert api.http.post("/v1/api/mcp/servers", content=b"{" * 100_000).status_code == 400
    assert api.http.post("/v1/api/mcp/refresh", json={"server": ["x"]}).status_code == 400
    assert httpx.get(api.base_url + "/v1/api/mcp").status_code == 401


def test_a_pushed_change_reaches_the_next_model_step(
    services: Services, api: Api, model: FakeModelServer, open_socket: Callable[[str], EventSocket]
) -> None:
    fake = FAKES[services.base_url]
    connected(api, SERVERS)
    fake.lists(tools=["late"])
    try:
        wait_until(lambda: "mcp__fake__late" in servers(api)["fake"]["tools"], timeout=15, what="pushed tool")
        ws_id = api.create_workstream(**IN_VIEW)
        sock = open_socket(ws_id)
        model.enqueue(Reply(text="I see it."))
        sock.wait_turn_end(api.send(ws_id, "what tools now?"))
        assert "mcp__fake__late" in [t["function"]["name"] for t in model.history[0].body["tools"]]
    finally:
        fake.lists()


def test_cancelling_the_turn_cancels_the_mcp_request_on_the_server(
    services: Services, api: Api, model: FakeModelServer, open_socket: Callable[[str], EventSocket]
) -> None:
    fake = FAKES[services.base_url]
    connected(api, SERVERS)
    before = len(fake.cancelled())
    ws_id = api.create_workstream(auto_approve=True, **IN_VIEW)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("mcp__fake__hang", {})]))
    turn_id = api.send(ws_id, "wait for ever")
    wait_until(lambda: "hang" in fake.calls(), what="the call reached the server")
    assert api.cancel(ws_id).status_code == 202
    result = sock.wait_type("tool_result", timeout=30)
    assert result["is_error"] and "cancelled" in result["output"].lower()
    sock.wait_turn_end(turn_id)
    wait_until(lambda: len(fake.cancelled()) > before, timeout=10, what="notifications/cancelled")


def test_a_worker_killed_mid_call_reports_it_interrupted_and_never_sends_it_again(
    services: Services, api: Api, model: FakeModelServer, open_socket: Callable[[str], EventSocket]
) -> None:
    fake = FAKES[services.base_url]
    connected(api, SERVERS)
    ws_id = api.create_workstream(auto_approve=True, **IN_VIEW)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("mcp__fake__slow_echo", {"text": "once only", "seconds": 30})]))
    model.enqueue(Reply(text="It was interrupted."))
    turn_id = api.send(ws_id, "echo slowly")
    wait_until(lambda: "slow_echo once only" in fake.calls(), what="the call reached the server")
    services.kill("worker")
    services.start_worker()
    result = sock.wait_type("tool_result", timeout=90)
    assert result["is_error"] and "interrupted" in result["output"].lower()
    sock.wait_turn_end(turn_id, timeout=90)
    connected(api, SERVERS)
    assert fake.calls().count("slow_echo once only") == 1
