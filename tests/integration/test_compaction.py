"""Compaction through the running service: a long session on a model with a small context
window runs on, ahead of the window (the service's own estimate) and when the provider says the
request is too long; summaries are stored beside the messages they replace."""

from __future__ import annotations

import time

import pytest

from app.compaction.run import ASK
from tests.fakes.model_server import Reply, ToolCall, request_tokens
from tests.integration.conftest import SMALL_RESERVE, SMALL_WINDOW
from tests.process_table import wait_until

pytestmark = pytest.mark.integration

SMALL_MODELS = ["small", "claude_small"]  # the OpenAI and the Anthropic wire
SUMMARY_REQUEST = ASK.split(":")[0]  # what only a summariser's request carries
STEPS = 14
OUTPUT_CHARS = 1200  # each command's output: about 300 tokens


def _long_session(model, steps: int = STEPS, summaries: int = 12) -> None:
    for n in range(summaries):
        model.enqueue(Reply(text=f"SUMMARY-{n}: the user runs commands that print lines."), SUMMARY_REQUEST)
    for n in range(steps):
        command = f"python3 -c \"print('{chr(ord('a') + n)}' * {OUTPUT_CHARS})\""
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
    model.enqueue(Reply(text="all commands ran"))


def _compactions(sock, reason: str | None = None) -> list[dict]:
    done = [e for e in sock.of_type("compaction_done") if "error" not in e]
    return [e for e in done if reason is None or e["reason"] == reason]


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_a_session_past_the_window_three_times_is_compacted_ahead_and_runs_on(
    api, model, open_socket, workdir, name
):
    model.context = SMALL_WINDOW  # the service compacts before the model would refuse
    ws_id = api.create_workstream(working_dir=str(workdir), model=name, auto_approve=True)
    sock = open_socket(ws_id)
    _long_session(model)
    turn_id = api.send(ws_id, "run the fourteen commands")
    assert sock.wait_turn_end(turn_id, timeout=120)["state"] == "idle"
    done = _compactions(sock, "window")
    assert len(done) >= 3 and model.overflowed == 0
    assert len(sock.of_type("compaction_started")) == len(done)
    steps = [r.body for r in model.history if r.body and SUMMARY_REQUEST not in str(r.body)]
    assert max(request_tokens(body) for body in steps) <= SMALL_WINDOW
    # the last request: the newest summary first, then only what it does not cover
    last = str(steps[-1])
    assert f"SUMMARY-{len(done) - 1}" in last and "SUMMARY-0" not in last or len(done) == 1
    history = api.history(ws_id)
    assert history[-1]["content"] == "all commands ran"
    # nothing was lost: every command's output is still stored, beside the summaries
    outputs = [m for m in history if m["role"] == "tool"]
    assert len(outputs) == STEPS
    summaries = [m for m in history if m["role"] == "summary"]
    assert [s["id"] for s in summaries] == [e["message_id"] for e in done]
    newest = summaries[-1]
    covered = [m for m in history if m["role"] != "summary" and m["id"] <= newest["covers_to"]]
    assert newest["covers_count"] == len(covered) and newest["covers_from"] == history[0]["id"]
    # never a call without its result: the message after a summary's range is no tool result
    after = [m for m in history if m["role"] != "summary" and m["id"] > newest["covers_to"]]
    assert after[0]["role"] != "tool"


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_the_providers_too_long_error_compacts_once_and_asks_again(api, model, open_socket, workdir, name):
    # The model's window is smaller than the service believes: the provider refuses first.
    model.context = SMALL_WINDOW - SMALL_RESERVE - 200
    ws_id = api.create_workstream(working_dir=str(workdir), model=name, auto_approve=True)
    sock = open_socket(ws_id)
    _long_session(model)
    turn_id = api.send(ws_id, "run the fourteen commands")
    assert sock.wait_turn_end(turn_id, timeout=120)["state"] == "idle", [
        e["message"] for e in sock.of_type("error")
    ]
    done = _compactions(sock, "overflow")
    assert len(done) >= 3 and model.overflowed == len(done)
    retried = sock.of_type("stream_end")
    assert sum(1 for e in retried if e.get("discard") and "compacting" in e.get("reason", "")) == len(done)
    assert not sock.of_type("error")
    assert api.history(ws_id)[-1]["content"] == "all commands ran"


def test_too_long_with_nothing_to_summarise_ends_the_turn_with_what_to_do(api, model, open_socket, workdir):
    model.context = 10  # not even the first message fits
    ws_id = api.create_workstream(working_dir=str(workdir), model="small")
    sock = open_socket(ws_id)
    turn_id = api.send(ws_id, "hello")
    assert sock.wait_turn_end(turn_id)["state"] == "error"
    assert "context window" in sock.wait_type("error", turn_id=turn_id)["message"]
    assert not sock.of_type("compaction_started")


def _slow_summary_first(model) -> None:
    slow = Reply(chunks=[f"SLOW-{i} " for i in range(100)], chunk_delay=0.1)
    model.enqueue(slow, SUMMARY_REQUEST)
    _long_session(model, steps=6)


def _summarising(model, sock) -> None:
    sock.wait_type("compaction_started", timeout=60)
    assert model.wait_for_requests(1)
    assert wait_until(lambda: any(SUMMARY_REQUEST in str(r.body) for r in model.history), 10)


def test_a_worker_killed_mid_compaction_leaves_the_conversation_and_the_step_runs_again(
    api, model, services, open_socket, workdir
):
    model.context = SMALL_WINDOW
    ws_id = api.create_workstream(working_dir=str(workdir), model="small", auto_approve=True)
    sock = open_socket(ws_id)
    _slow_summary_first(model)
    turn_id = api.send(ws_id, "run six commands")
    _summarising(model, sock)
    before = api.history(ws_id)
    services.kill("worker")
    assert api.history(ws_id) == before  # the conversation as it was: no summary, nothing lost
    services.start_worker()
    assert sock.wait_turn_end(turn_id, timeout=90)["state"] == "idle"
    history = api.history(ws_id)
    assert history[: len(before)] == before
    assert not any("SLOW" in (m["content"] or "") for m in history)
    summaries = [m for m in history if m["role"] == "summary"]
    assert summaries and [m["id"] for m in summaries] == [e["message_id"] for e in _compactions(sock)]
    assert len([m for m in history if m["role"] == "tool"]) == 6  # no command ran twice
    assert history[-1]["content"] == "all commands ran"


def test_a_cancel_during_compaction_ends_the_turn_with_nothing_stored(api, model, open_socket, workdir):
    model.context = SMALL_WINDOW
    ws_id = api.create_workstream(working_dir=str(workdir), model="small", auto_approve=True)
    sock = open_socket(ws_id)
    _slow_summary_first(model)
    turn_id = api.send(ws_id, "run six commands")
    _summarising(model, sock)
    cancelled_at = time.monotonic()
    assert api.cancel(ws_id).status_code == 202
    sock.wait_type("cancelled", turn_id=turn_id, timeout=10)
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert time.monotonic() - cancelled_at < 5  # not the 10 s the summary would take
    assert not [m for m in api.history(ws_id) if m["role"] == "summary"]
    assert not sock.of_type("compaction_done")
    model.reset()
    model.enqueue(Reply(text="listening"))
    assert sock.wait_turn_end(api.send(ws_id, "stop"))["state"] == "idle"


def test_compact_now_summarises_the_older_messages_and_the_next_step_sends_the_summary(
    api, model, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    nothing = api.http.post(f"/v1/api/workstreams/{ws_id}/compact")
    assert nothing.status_code == 409 and "nothing to compact" in nothing.json()["error"]
    for n in range(4):
        sock.wait_turn_end(api.send(ws_id, f"message {n}"))
    model.enqueue(Reply(text="SUMMARY-manual: four greetings"), SUMMARY_REQUEST)
    asked = api.http.post(f"/v1/api/workstreams/{ws_id}/compact", json={})
    assert asked.status_code == 202, asked.text
    assert asked.json()["messages"] == 4  # of 8, the newest 4 stay whole
    done = sock.wait_type("compaction_done", reason="manual")
    assert done["count"] == 4 and done["turn_id"] is None
    summary = [m for m in api.history(ws_id) if m["role"] == "summary"]
    assert [m["id"] for m in summary] == [done["message_id"]]
    assert summary[0]["content"] == "SUMMARY-manual: four greetings"
    again = api.http.post(f"/v1/api/workstreams/{ws_id}/compact")
    assert again.status_code == 409  # what is left is the newest four
    sock.wait_turn_end(api.send(ws_id, "and now"))
    sent = model.history[-1].body["messages"]
    texts = [str(m.get("content")) for m in sent]
    assert "SUMMARY-manual" in texts[1] and not any("message 0" in t or "message 1" in t for t in texts)
    assert any("message 2" in t for t in texts)


@pytest.mark.parametrize("body", ["[1]", '"x"', "{" * 5000, '{"a": "\\u0000\\ud800"}'])
def test_compact_refuses_a_body_that_is_not_a_json_object(api, workdir, body):
    ws_id = api.create_workstream(working_dir=str(workdir))
    r = api.http.post(
        f"/v1/api/workstreams/{ws_id}/compact", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code in (400, 409) and r.json()["error"]
    missing = api.http.post("/v1/api/workstreams/nosuchworkstream/compact")
    assert missing.status_code == 404 and missing.json()["error"]


def test_a_model_without_a_configured_window_takes_its_servers(api, model, open_socket, workdir):
    """`discovered` sets no context_window: the fake server's /models says max_model_len (as
    vLLM does), and the service compacts ahead of it as if it were configured."""
    model.context = SMALL_WINDOW
    ws_id = api.create_workstream(working_dir=str(workdir), model="discovered", auto_approve=True)
    sock = open_socket(ws_id)
    _long_session(model)
    turn_id = api.send(ws_id, "run the fourteen commands")
    assert sock.wait_turn_end(turn_id, timeout=120)["state"] == "idle"
    assert _compactions(sock, "window") and model.overflowed == 0  # ahead, never refused
    assert any(path.endswith("/models") for path in model.listings)
