"""Tools found at runtime and calls that finish later, through the running service.

The tool source is tests/fakes/tool_source.py, configured for the service as
`[tool_sources.fake]`: an MCP-like provider whose tool list the test writes.
"""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.test_durability import _consistent

pytestmark = pytest.mark.integration

WEATHER = {
    "name": "lookup_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
SIGNAL = {"name": "await_signal", "description": "Waits for a signal.", "approval": False, "waits": True}


def offered_tools(model, n: int) -> list[str]:
    """The tool names the model was offered in its n-th request (0-based)."""
    return [t["function"]["name"] for t in model.history[n].body.get("tools", [])]


def tool_results(model, n: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in model.history[n].body["messages"] if m["role"] == "tool"}


def test_a_runtime_tool_is_offered_approved_executed_and_stored_like_a_builtin(
    api, model, fake_tools, open_socket, workdir
):
    fake_tools.write(WEATHER)
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("lookup_weather", {"city": "Oslo"}, id="w1")]))
    model.enqueue(Reply(text="cold"))
    turn_id = api.send(ws_id, "weather in Oslo?")
    request = sock.wait_type("approve_request")
    assert "lookup_weather" in offered_tools(model, 0) and "bash" in offered_tools(model, 0)
    assert request["items"][0]["header"] == 'lookup_weather {"city": "Oslo"}'
    assert api.approve(ws_id, approved=True, always=True).status_code == 200
    result = sock.wait_type("tool_result", call_id="w1")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert result["is_error"] is False and 'ran with {"city": "Oslo"}' in result["output"]
    assert 'ran with {"city": "Oslo"}' in tool_results(model, 1)["w1"]
    history = api.history(ws_id)
    _consistent(history)
    assert history[2]["name"] == "lookup_weather"
    assert "lookup_weather" in api.workstream(ws_id)["auto_approve_tools"]


def test_a_batch_on_a_new_worker_runs_the_tool_version_the_model_saw(
    api, model, fake_tools, services, open_socket, workdir
):
    fake_tools.write(WEATHER)
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("lookup_weather", {"city": "Bergen"}, id="w1")]))
    model.enqueue(Reply(text="wet"))
    turn_id = api.send(ws_id, "weather?")
    sock.wait_type("approve_request")
    seen = fake_tools.path.read_text()
    fake_tools.write({**WEATHER, "description": "The weather, now from a new server."})
    services.kill("worker")
    services.start_worker()  # a process that has never listed the old catalog
    api.approve(ws_id, approved=True)
    result = sock.wait_type("tool_result", call_id="w1")
    sock.wait_turn_end(turn_id)
    import hashlib

    assert f"(catalog {hashlib.sha256(seen.encode()).hexdigest()[:12]})" in result["output"]


def test_a_tool_gone_before_its_batch_is_reported_plainly(api, model, fake_tools, open_socket, workdir):
    fake_tools.write(WEATHER)
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("lookup_weather", {"city": "Tromsø"}, id="w1")]))
    model.enqueue(Reply(text="never mind"))
    turn_id = api.send(ws_id, "weather?")
    sock.wait_type("approve_request")
    fake_tools.write()  # the server no longer lists it, and remembers no older list
    fake_tools.forget_versions()
    api.approve(ws_id, approved=True)
    result = sock.wait_type("tool_result", call_id="w1")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert result["is_error"] is True
    assert result["output"].startswith("Error: tool lookup_weather is gone: fake no longer offers it")


def test_a_waiting_call_is_finished_by_a_separate_task_and_the_turn_completes(
    api, model, fake_tools, task_queue, open_socket, workdir
):
    fake_tools.write(SIGNAL)
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("await_signal", {}, id="s1")]))
    model.enqueue(Reply(text="got the signal"))
    turn_id = api.send(ws_id, "wait for it")
    sock.wait_type("tool_info")
    _wait_phase(api, ws_id, "awaiting")
    assert not sock.of_type("tool_result")  # nothing is reported until the wait ends
    task_queue.finish_call(turn_id, "s1", "signal: green")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert tool_results(model, 1) == {"s1": "signal: green"}
    assert [m["content"] for m in api.history(ws_id)] == [
        "wait for it",
        "",
        "signal: green",
        "got the signal",
    ]
    task_queue.finish_call(turn_id, "s1", "a late repeat")  # changes nothing
    assert [m["content"] for m in api.history(ws_id)][2] == "signal: green"


def test_a_waiting_call_survives_its_worker_being_killed(
    api, model, fake_tools, task_queue, services, open_socket, workdir
):
    fake_tools.write(SIGNAL)
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("await_signal", {}, id="s1"), ToolCall("bash", "echo sibling")]))
    model.enqueue(Reply(text="both done"))
    turn_id = api.send(ws_id, "wait and echo")
    sock.wait_type("approve_request")  # bash asks; the waiting call does not
    api.approve(ws_id, approved=True)
    sock.wait_type("tool_result", name="bash")
    _wait_phase(api, ws_id, "awaiting")
    services.kill("worker")
    task_queue.finish_call(turn_id, "s1", "signal after the crash")  # queued while no worker runs
    services.start_worker()
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    results = tool_results(model, 1)
    assert results["s1"] == "signal after the crash" and "sibling" in next(
        v for k, v in results.items() if k != "s1"
    )
    _consistent(api.history(ws_id))


def test_cancel_while_a_call_waits_ends_the_turn_and_answers_the_call(
    api, model, fake_tools, task_queue, open_socket, workdir
):
    fake_tools.write(SIGNAL)
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("await_signal", {}, id="s1")]))
    turn_id = api.send(ws_id, "wait")
    _wait_phase(api, ws_id, "awaiting")
    assert api.cancel(ws_id).status_code == 202
    sock.wait_type("cancelled", turn_id=turn_id)
    result = sock.wait_type("tool_result", call_id="s1")
    assert result["is_error"] is True and "Cancelled" in result["output"]
    task_queue.finish_call(turn_id, "s1", "too late")
    model.enqueue(Reply(text="next"))
    api.send(ws_id, "and now?")
    api.wait_idle(ws_id)
    history = api.history(ws_id)
    _consistent(history)
    assert "too late" not in [m["content"] for m in history]


def test_an_engine_failure_in_a_batch_answers_every_call_so_the_workstream_goes_on(
    api, model, fake_tools, open_socket, workdir
):
    fake_tools.write({"name": "flaky", "approval": False, "breaks": True})
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("flaky", {}, id="f1"), ToolCall("bash", "echo ok", id="b1")]))
    turn_id = api.send(ws_id, "break it")
    end = sock.wait_turn_end(turn_id)
    assert end["state"] == "error"
    assert "internal error" in sock.wait_type("error", turn_id=turn_id)["message"]
    history = api.history(ws_id)
    _consistent(history)
    assert {m["tool_call_id"] for m in history if m["role"] == "tool"} == {"f1", "b1"}
    model.enqueue(Reply(text="still here"))
    api.send(ws_id, "again")
    api.wait_idle(ws_id)
    assert set(tool_results(model, 1)) == {"f1", "b1"}  # the provider gets an answer for each call
    assert api.history(ws_id)[-1]["content"] == "still here"


def test_overlong_call_ids_and_tool_names_from_a_model_do_not_break_the_turn(
    api, model, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(tool_calls=[ToolCall("x" * 300, {}, id="c" * 300), ToolCall("bash", "echo ok", id="d" * 250)])
    )
    model.enqueue(Reply(text="sorry"))
    turn_id = api.send(ws_id, "call something odd")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    history = api.history(ws_id)
    _consistent(history)
    results = [m for m in history if m["role"] == "tool"]
    assert results[0]["content"].startswith("Unknown tool: " + "x" * 80 + "...")
    assert all(len(m["tool_call_id"]) <= 200 for m in results)
    assert results[1]["content"] == "ok"


def _wait_phase(api, ws_id: str, phase: str, timeout: float = 30) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turn = api.workstream(ws_id)["turn"]
        if turn and turn["phase"] == phase:
            return
        time.sleep(0.05)
    raise AssertionError(f"turn never reached phase {phase}: {api.workstream(ws_id)} {api.history(ws_id)}")
