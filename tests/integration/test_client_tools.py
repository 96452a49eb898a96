"""Client tools through the running service (docs/runs.md, "Client tools"): a run or a workstream
declares tools it answers itself; the model's call to one waits, no worker held, while the run
shows `requires_action` with the calls; the outputs submitted go to the model and the turn goes
on. The wait outlives a worker's restart, ends with an error result the model reads when no
output comes in time, and every wrong or hostile request is a 4xx that changes nothing."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from tests.apart import run_apart
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import wait_until
from tests.integration.people import People
from tests.integration.services import API_TOKEN
from tests.integration.test_runs import start, wait
from tests.integration.test_webhooks import Receiver
from turnstone_jobs import AsyncClient, Client, ConflictError

pytestmark = pytest.mark.integration

LOOKUP = {
    "name": "lookup_order",
    "description": "Look an order up in the shop's database",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
        "additionalProperties": False,
    },
}
PING = {"name": "ping"}  # no description, no parameters: a tool that takes nothing


def tool_messages(model: Any) -> list[dict[str, Any]]:
    return [m for m in model.history[-1].body["messages"] if m["role"] == "tool"]


def test_a_runs_client_tool_call_waits_for_its_output_and_the_turn_goes_on(api, model, open_socket):
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("lookup_order", {"order_id": "A-7"}, id="c1")]))
    model.enqueue(Reply(text="order A-7 ships tomorrow"))
    run_id = start(api, prompt="where is A-7?", workstream=ws_id, tools=[LOOKUP, PING])["run_id"]
    run = wait(api, run_id)
    assert run["status"] == "requires_action", run
    assert run["required_action"] == {
        "type": "submit_tool_outputs",
        "tool_calls": [{"call_id": "c1", "name": "lookup_order", "arguments": {"order_id": "A-7"}}],
    }
    assert run["tools"] == ["lookup_order", "ping"] and run["pending_approvals"] == []
    offered = {t["function"]["name"]: t["function"] for t in model.history[-1].body["tools"]}
    assert offered["lookup_order"]["parameters"] == LOOKUP["parameters"] and "ping" in offered
    event = sock.wait_type("requires_action")
    assert (event["call_id"], event["name"], event["arguments"]) == (
        "c1",
        "lookup_order",
        {"order_id": "A-7"},
    )
    assert api.workstream(ws_id)["state"] != "error"

    r = api.http.post(
        f"/v1/api/runs/{run_id}/tool_outputs",
        json={"tool_outputs": [{"call_id": "c1", "output": '{"ships": "tomorrow"}'}]},
    )
    assert r.status_code == 200 and r.json() == {"call_ids": ["c1"]}, r.text
    run = wait(api, run_id)
    assert run["status"] == "succeeded" and run["answer"] == "order A-7 ships tomorrow", run
    assert run["required_action"] is None
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages(model)] == [
        ("c1", '{"ships": "tomorrow"}')
    ]
    assert sock.wait_type("tool_result", call_id="c1")["output"] == '{"ships": "tomorrow"}'
    r = api.http.post(
        f"/v1/api/runs/{run_id}/tool_outputs", json={"tool_outputs": [{"call_id": "c1", "output": "again"}]}
    )
    assert r.status_code == 409, r.text  # nothing waits any more


def test_arguments_that_break_the_schema_are_an_error_the_model_sees_not_a_wait(api, model):
    model.enqueue(Reply(tool_calls=[ToolCall("lookup_order", {"order_id": 7}, id="b1")]))
    model.enqueue(Reply(text="I will ask properly"))
    run = wait(api, start(api, prompt="look it up", tools=[LOOKUP])["run_id"])
    assert run["status"] == "succeeded", run
    [result] = tool_messages(model)
    assert result["content"].startswith("Error: the arguments do not match the tool's schema"), result


def test_wrong_missing_and_hostile_outputs_are_refused_and_change_nothing(api, model):
    model.enqueue(
        Reply(
            tool_calls=[
                ToolCall("lookup_order", {"order_id": "1"}, id="m1"),
                ToolCall("ping", {}, id="m2"),
            ]
        )
    )
    model.enqueue(Reply(text="both answered"))
    run_id = start(api, prompt="two", tools=[LOOKUP, PING])["run_id"]
    run = wait(api, run_id)
    assert run["status"] == "requires_action", run
    assert [c["call_id"] for c in run["required_action"]["tool_calls"]] == ["m1", "m2"]
    path = f"/v1/api/runs/{run_id}/tool_outputs"
    refused: list[tuple[Any, int]] = [
        ({"tool_outputs": [{"call_id": "m1", "output": "x"}]}, 422),  # m2's is missing
        ({"tool_outputs": [{"call_id": "m1", "output": "x"}, {"call_id": "zz", "output": "y"}]}, 409),
        ({"tool_outputs": [{"call_id": "m1", "output": "x"}, {"call_id": "m1", "output": "y"}]}, 422),
        ({"tool_outputs": []}, 400),
        ({"tool_outputs": "x"}, 400),
        ({"tool_outputs": [{"call_id": "m1"}]}, 400),
        ({"tool_outputs": [{"call_id": "m1", "output": 5}]}, 400),
        ({"tool_outputs": [{"call_id": "m1", "output": "a\x00b"}]}, 400),
        ({"tool_outputs": [{"call_id": "m1", "output": "\ud800"}]}, 400),
        ({"tool_outputs": [{"call_id": "m1", "output": "x", "is_error": "yes"}]}, 400),
        ({"tool_outputs": [{"call_id": "\x00", "output": "x"}]}, 400),
        ({"tool_outputs": [{"call_id": "m1", "output": "x", "extra": 1}]}, 400),
        ({"tool_outputs": [{"call_id": "m1", "output": "x" * (1024 * 1024 + 1)}]}, 400),
        ({"outputs": []}, 400),
    ]
    for body, status in refused:
        raw = json.dumps(body)
        r = api.http.post(path, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == status, (str(body)[:80], r.text[:300])
        assert "error" in r.json()
    for raw in (b"[]", b"{", b"[" * 5000 + b"]" * 5000):
        r = api.http.post(path, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, r.text
    assert wait(api, run_id, seconds=0)["status"] == "requires_action"
    assert api.http.post("/v1/api/runs/nope/tool_outputs", json={"tool_outputs": []}).status_code == 404
    outputs = [{"call_id": "m1", "output": "found"}, {"call_id": "m2", "output": "pong", "is_error": True}]
    r = api.http.post(path, json={"tool_outputs": outputs})
    assert r.status_code == 200 and sorted(r.json()["call_ids"]) == ["m1", "m2"], r.text
    assert wait(api, run_id)["status"] == "succeeded"
    assert [m["content"] for m in tool_messages(model)] == ["found", "pong"]


def test_hostile_declarations_are_a_4xx_and_start_nothing(api, model):
    before = len(api.http.get("/v1/api/runs", params={"limit": 200}).json()["runs"])
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(30):
        deep = {"type": "object", "properties": {"x": deep}}
    hostile: list[tuple[Any, int]] = [
        ([{"name": "bash"}], 422),  # a built-in's name
        ([{"name": "mcp__x__y"}], 422),
        ([{"name": "a b"}], 400),
        ([{"name": ""}], 400),
        ([{"name": "x" * 65}], 400),
        ([{"name": "t\x00"}], 400),
        ([{"name": 5}], 400),
        ([{}], 400),
        ([{"name": "t", "surprise": 1}], 400),
        ([{"name": "t"}, {"name": "t"}], 422),
        ([{"name": f"t{n}"} for n in range(33)], 400),
        ([{"name": "t", "parameters": {"type": "array"}}], 422),
        ([{"name": "t", "parameters": {"type": "object", "properties": 5}}], 422),
        ([{"name": "t", "parameters": {"type": "object", "description": "\x00"}}], 422),
        ([{"name": "t", "parameters": {"type": "object", "description": "\ud800"}}], 422),
        ([{"name": "t", "parameters": {"type": "object", "description": "x" * 20000}}], 422),
        ([{"name": "t", "parameters": deep}], 422),
        (
            [
                {
                    "name": "t",
                    "parameters": {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1/x"}}},
                }
            ],
            422,
        ),
        ([{"name": "t", "parameters": {"type": "object", "properties": {"a": {"pattern": "("}}}}], 422),
        ([{"name": "t", "parameters": []}], 400),
        ([{"name": "t", "description": "d" * 4001}], 400),
        ({"name": "t"}, 400),
        ("tools", 400),
    ]
    for tools, status in hostile:
        raw = json.dumps({"prompt": "x", "tools": tools})
        r = api.http.post("/v1/api/runs", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == status, (str(tools)[:80], r.text[:300])
        assert "error" in r.json()
    assert len(api.http.get("/v1/api/runs", params={"limit": 200}).json()["runs"]) == before

    ws_id = api.create_workstream()
    for tools, status in hostile[:3]:
        r = api.http.put(f"/v1/api/workstreams/{ws_id}/client_tools", json={"tools": tools})
        assert r.status_code == status, r.text
    assert api.http.get(f"/v1/api/workstreams/{ws_id}/client_tools").json()["tools"] == []


def test_the_wait_outlives_a_worker_restart(api, model, services):
    model.enqueue(Reply(tool_calls=[ToolCall("ping", {}, id="r1")]))
    model.enqueue(Reply(text="after the restart"))
    run_id = start(api, prompt="ping it", tools=[PING])["run_id"]
    assert wait(api, run_id)["status"] == "requires_action"
    services.kill("worker")
    assert wait(api, run_id, seconds=1)["status"] == "requires_action"  # stored, not in a process
    r = api.http.post(
        f"/v1/api/runs/{run_id}/tool_outputs", json={"tool_outputs": [{"call_id": "r1", "output": "pong"}]}
    )
    assert r.status_code == 200, r.text
    services.start_worker()
    run = wait(api, run_id, seconds=60)
    assert run["status"] == "succeeded" and run["answer"] == "after the restart", run
    assert [m["content"] for m in tool_messages(model)] == ["pong"]


def test_a_wait_past_its_limit_ends_with_an_error_result_the_model_reads(api, model):
    """TURNSTONE_CLIENT_TOOL_TIMEOUT_SECONDS is 10 in the test service."""
    model.enqueue(Reply(tool_calls=[ToolCall("ping", {}, id="t1")]))
    model.enqueue(Reply(text="the client never answered"))
    run_id = start(api, prompt="ping", tools=[PING])["run_id"]
    assert wait(api, run_id)["status"] == "requires_action"
    deadline = time.monotonic() + 45
    while (run := wait(api, run_id, seconds=1))[
        "status"
    ] == "requires_action" and time.monotonic() < deadline:
        time.sleep(0.5)  # the long poll answers at once while a run waits for its client
    run = wait(api, run_id)
    assert run["status"] == "succeeded" and run["answer"] == "the client never answered", run
    [result] = tool_messages(model)
    assert "did not submit this tool's output within 10 s" in result["content"], result
    assert [(c["call_id"], c["is_error"]) for c in run["tool_calls"]] == [("t1", True)]


def test_a_workstreams_own_client_tools(api, model):
    ws_id = api.create_workstream()
    r = api.http.put(f"/v1/api/workstreams/{ws_id}/client_tools", json={"tools": [LOOKUP]})
    assert r.status_code == 200 and r.json()["tools"][0]["name"] == "lookup_order", r.text
    model.enqueue(Reply(tool_calls=[ToolCall("lookup_order", {"order_id": "W"}, id="w1")]))
    model.enqueue(Reply(text="done in the workstream"))
    api.send(ws_id, "look W up")
    path = f"/v1/api/workstreams/{ws_id}/client_tools"
    view = {}
    for _ in range(200):
        view = api.http.get(path).json()
        if view["required_action"]:
            break
        time.sleep(0.1)
    assert view["required_action"]["tool_calls"] == [
        {"call_id": "w1", "name": "lookup_order", "arguments": {"order_id": "W"}}
    ], view
    r = api.http.post(
        f"/v1/api/workstreams/{ws_id}/tool_outputs", json={"tool_outputs": [{"call_id": "zz", "output": "x"}]}
    )
    assert r.status_code == 409 and r.json()["waiting"] == ["w1"], r.text
    r = api.http.post(
        f"/v1/api/workstreams/{ws_id}/tool_outputs",
        json={"tool_outputs": [{"call_id": "w1", "output": "W ok"}]},
    )
    assert r.status_code == 200, r.text
    assert api.wait_idle(ws_id)["state"] == "idle"
    assert api.history(ws_id)[-1]["content"] == "done in the workstream"
    assert api.http.put(path, json={"tools": []}).json()["tools"] == []


def test_the_python_clients_declare_tools_and_submit_outputs(services, model):
    with Client(services.base_url, API_TOKEN) as client:
        model.enqueue(Reply(tool_calls=[ToolCall("ping", {}, id="p1")]))
        model.enqueue(Reply(text="sync done"))
        run = client.runs.create("ping", tools=[PING]).wait(timeout=30)
        assert run.status == "requires_action" and run.required_tool_calls[0]["call_id"] == "p1"
        assert run.submit_tool_outputs({"p1": "pong"}).wait(timeout=30).answer == "sync done"
        with pytest.raises(ConflictError):
            run.submit_tool_outputs({"p1": "again"})

    async def asynchronously() -> None:
        async with AsyncClient(services.base_url, API_TOKEN) as client:
            model.enqueue(Reply(tool_calls=[ToolCall("ping", {}, id="a1")]))
            model.enqueue(Reply(text="async done"))
            run = await (await client.runs.create("ping", tools=[PING])).wait(timeout=30)
            assert run.status == "requires_action" and run.required_tool_calls[0]["name"] == "ping"
            await run.submit_tool_outputs([{"call_id": "a1", "output": "pong"}])
            assert (await run.wait(timeout=30)).answer == "async done"
            assert run.run_id in [r.run_id for r in await client.runs.list(status="succeeded")]
            model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo x"}, id="a2")]))
            waiting = await (await client.runs.create("ask")).wait(timeout=30)
            assert waiting.status == "awaiting_approval"
            await waiting.cancel()
            assert (await waiting.wait(timeout=30)).status == "cancelled"

    run_apart(asynchronously())  # a loop of its own, whatever an earlier test left running here


def test_a_run_waiting_for_its_tools_outputs_is_announced_by_webhook(api, model, services):
    mine = People(services).user("tools-hooks").api(services)
    receiver = Receiver()
    try:
        endpoint = mine.http.post(
            "/v1/api/webhooks", json={"url": receiver.url, "events": ["run.requires_action"]}
        )
        assert endpoint.status_code == 201, endpoint.text
        model.enqueue(Reply(tool_calls=[ToolCall("ping", {}, id="h1")]))
        model.enqueue(Reply(text="pinged"))
        run_id = start(mine, prompt="ping", tools=[PING])["run_id"]
        assert wait(mine, run_id)["status"] == "requires_action"
        wait_until(lambda: receiver.received, timeout=30, what="run.requires_action")
        time.sleep(2.5)  # two more sweeps: sent once for the step
        [(headers, body)] = receiver.received
        event = Webhook(endpoint.json()["secret"]).verify(body, headers)
        assert event["type"] == "run.requires_action" and event["data"]["run_id"] == run_id
        assert event["data"]["required_action"]["tool_calls"] == [
            {"call_id": "h1", "name": "ping", "arguments": {}}
        ]
        r = mine.http.post(
            f"/v1/api/runs/{run_id}/tool_outputs",
            json={"tool_outputs": [{"call_id": "h1", "output": "pong"}]},
        )
        assert r.status_code == 200, r.text
        assert wait(mine, run_id)["status"] == "succeeded"
    finally:
        receiver.close()
