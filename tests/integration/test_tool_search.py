"""Tool search through the running service: 1,000 deferred tools from a tool source (standing in
for MCP servers), searched, found and called; kept across restarts and changes of the list."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.fakes.model_server import Reply, ServerToolSearch, ToolCall
from tests.integration.test_durability import _consistent

pytestmark = pytest.mark.integration

TARGET = {
    "name": "orbital_launch_window",
    "description": "Compute the next launch window for a rocket to a given orbit.\nMore detail here.",
    "parameters": {"type": "object", "properties": {"orbit": {"type": "string"}}, "required": ["orbit"]},
    "approval": False,
}
NOUNS = [
    "invoice",
    "customer",
    "ticket",
    "order",
    "repository",
    "channel",
    "bucket",
    "report",
    "user",
    "alert",
]
SYSTEMS = ["billing", "crm", "helpdesk", "shop", "github", "slack", "storage", "analytics", "auth", "pager"]
VERBS = ["list", "get", "create", "update", "delete", "archive", "export", "search"]


def many_tools(count: int = 1000, seed: int = 11) -> list[dict[str, Any]]:
    """`count` tools, TARGET among them: generated names and descriptions from a small vocabulary."""
    rnd = random.Random(seed)
    specs: list[dict[str, Any]] = []
    for n in range(count - 1):
        verb, noun, system = rnd.choice(VERBS), rnd.choice(NOUNS), rnd.choice(SYSTEMS)
        specs.append(
            {
                "name": f"{system}_{verb}_{noun}_{n:04d}",
                "description": f"{verb.capitalize()} {noun} records in the {system} service.",
            }
        )
    specs.insert(count // 2, TARGET)
    return specs


def offered(model, n: int) -> list[str]:
    tools = model.history[n].body.get("tools", [])
    return [t["function"]["name"] if "function" in t else t["name"] for t in tools]


def tool_results(model, n: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in model.history[n].body["messages"] if m["role"] == "tool"}


def builtin_count(api, ws_id: str) -> int:
    return int(api.workstream(ws_id)["tools"]["visible"])


def test_a_deferred_tool_is_searched_found_and_called_and_stays_found(
    api, model, fake_tools, services, open_socket, workdir
):
    fake_tools.write(*many_tools())
    ws_id = api.create_workstream(working_dir=str(workdir))
    before = api.workstream(ws_id)["tools"]
    assert before["search"] == "client" and before["total"] == before["visible"] + 1000
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("tool_search", {"query": "rocket launch window"}, id="s1")]))
    model.enqueue(Reply(tool_calls=[ToolCall("orbital_launch_window", {"orbit": "LEO"}, id="c1")]))
    model.enqueue(Reply(text="The window opens at dawn."))
    turn_id = api.send(ws_id, "When can we launch to LEO?")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"

    first = offered(model, 0)
    assert "tool_search" in first and "bash" in first and "orbital_launch_window" not in first
    assert len(first) == before["visible"] + 1  # the built-ins and tool_search: none of the 1,000
    system = model.history[0].body["messages"][0]["content"]
    assert "1000 more tools are available but not listed; call tool_search" in system
    found = tool_results(model, 1)["s1"]
    assert found.startswith("Found ") and "- orbital_launch_window: Compute the next launch window" in found
    assert "More detail here" not in found
    assert "orbital_launch_window" in offered(model, 1)
    assert 'ran with {"orbit": "LEO"}' in tool_results(model, 2)["c1"]
    items = [i for e in sock.of_type("tool_info") for i in e["items"]]
    assert [i["func_name"] for i in items] == ["tool_search", "orbital_launch_window"]
    assert all(i["needs_approval"] is False for i in items)
    _consistent(api.history(ws_id))
    after = api.workstream(ws_id)
    assert after["tools"]["visible"] == before["visible"] + 1 and after["tools"]["total"] == before["total"]
    assert "orbital_launch_window" in after["expanded_tools"]

    # A new worker and web process (new Runtimes), and the source's list changes: the found
    # tool is still offered, without a search, and runs from the new list.
    services.kill("worker")
    services.start_worker()
    services.restart_web()
    fake_tools.write(*many_tools(seed=12), {"name": "brand_new_tool", "description": "New."})
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("orbital_launch_window", {"orbit": "GEO"}, id="c2")]))
    model.enqueue(Reply(text="GEO too."))
    turn_id = api.send(ws_id, "And to GEO?")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert "orbital_launch_window" in offered(model, 3) and "brand_new_tool" not in offered(model, 3)
    assert 'ran with {"orbit": "GEO"}' in tool_results(model, 4)["c2"]

    # Gone from the list, it is not offered; back again, it is, as found before.
    fake_tools.write(*[t for t in many_tools() if t["name"] != TARGET["name"]])
    assert api.workstream(ws_id)["expanded_tools"] == ["orbital_launch_window"]
    assert api.workstream(ws_id)["tools"]["total"] == before["total"] - 1
    fake_tools.write(*many_tools())
    assert api.workstream(ws_id)["tools"]["visible"] == before["visible"] + 1


def test_an_empty_query_and_a_query_that_finds_nothing_reach_the_model_plainly(
    api, model, fake_tools, open_socket, workdir
):
    fake_tools.write(*many_tools())
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(
            tool_calls=[
                ToolCall("tool_search", {"query": "   "}, id="e1"),
                ToolCall("tool_search", {"query": "zzyzx quasar"}, id="e2"),
                ToolCall("tool_search", '{"query": ' + "[" * 3000, id="e3"),
                ToolCall("tool_search", '{"query": "\\u0000rocket \\ud800launch"}', id="e4"),
                ToolCall("tool_search", '"launch window"', id="e5"),
            ]
        )
    )
    model.enqueue(Reply(text="nothing"))
    turn_id = api.send(ws_id, "find a tool")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    results = tool_results(model, 1)
    assert results["e1"].startswith("Error: tool_search: the query is empty")
    assert results["e2"].startswith("No tool matches 'zzyzx quasar'; no tools were added.")
    assert results["e3"].startswith("Error: tool_search: arguments")
    assert results["e4"].startswith("No tool matches")  # NUL and a lone surrogate: stored, searched, no crash
    assert "- orbital_launch_window: " in results["e5"]  # a bare JSON string is the query
    assert api.workstream(ws_id)["expanded_tools"] == sorted(
        line[2:].split(":")[0] for line in results["e5"].splitlines()[1:]
    )
    _consistent(api.history(ws_id))


def test_a_workstream_can_turn_search_off_or_on_and_bound_its_results(api, model, fake_tools, workdir):
    fake_tools.write(*many_tools(30))
    off = api.create_workstream(working_dir=str(workdir), tool_search={"mode": "off"})
    assert api.workstream(off)["tools"]["search"] is None
    on = api.create_workstream(working_dir=str(workdir), tool_search={"mode": "on", "max_results": 1})
    described = api.workstream(on)
    assert described["tool_search"] == {"mode": "on", "max_results": 1}
    assert described["tools"]["search"] == "client"
    model.enqueue(Reply(tool_calls=[ToolCall("tool_search", {"query": "crm customer records"}, id="s1")]))
    model.enqueue(Reply(text="ok"))
    api.send(on, "go")
    api.wait_idle(on)
    assert tool_results(model, 1)["s1"].count("\n- ") == 1
    assert len(api.workstream(on)["expanded_tools"]) == 1


@pytest.mark.parametrize(
    "value",
    [
        "on",
        [],
        {"mode": "sometimes"},
        {"mode": "on\u0000"},
        {"max_results": 0},
        {"max_results": 51},
        {"max_results": True},
        {"max_results": 10**30},
        {"threshold": -1},
        {"threshold": "20"},
        {"unknown": 1},
        {"mode": {"deep": [[[[[[[[[[]]]]]]]]]]}},
    ],
)
def test_a_hostile_tool_search_object_is_a_400_that_names_it(api, value):
    r = api.http.post("/v1/api/workstreams", json={"tool_search": value})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["field"].startswith("tool_search") and "tool_search" in body["error"]  # .mode, ...: the key


def test_a_lone_surrogate_in_tool_search_is_a_400(api):
    raw = b'{"tool_search": {"mode": "\\ud800"}}'
    r = api.http.post("/v1/api/workstreams", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["field"].startswith("tool_search")


def test_anthropics_own_search_finds_a_deferred_tool_and_its_blocks_go_back(
    api, model, fake_tools, open_socket, workdir
):
    fake_tools.write(*many_tools())
    ws_id = api.create_workstream(working_dir=str(workdir), model="claude_search")
    assert api.workstream(ws_id)["tools"]["search"] == "anthropic"
    sock = open_socket(ws_id)
    search = ServerToolSearch("rocket launch", ["orbital_launch_window"], id="srvtoolu_x")
    model.enqueue(
        Reply(tool_search=search, tool_calls=[ToolCall("orbital_launch_window", {"orbit": "LEO"}, id="c1")])
    )
    model.enqueue(Reply(text="dawn"))
    turn_id = api.send(ws_id, "When can we launch?")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    tools = model.history[0].body["tools"]
    assert sum(1 for t in tools if t.get("defer_loading") is True) == 1000
    assert tools[-1]["name"] == "tool_search_tool_bm25"
    assert model.history[0].headers["anthropic-beta"] == "advanced-tool-use-2025-11-20"
    replay = model.history[1].body["messages"][1]["content"]
    assert [b["type"] for b in replay] == ["server_tool_use", "tool_search_tool_result", "tool_use"]
    assert replay[1]["content"]["tool_references"] == [
        {"type": "tool_reference", "tool_name": "orbital_launch_window"}
    ]
    assert "orbital_launch_window" in api.workstream(ws_id)["expanded_tools"]
    # Found, it is listed plainly from now on; the other 999 stay deferred.
    tools = model.history[1].body["tools"]
    assert next(t for t in tools if t.get("name") == "orbital_launch_window").get("defer_loading") is None
