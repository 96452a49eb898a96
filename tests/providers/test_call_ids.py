"""Servers that number their calls per reply ("0", "1": TGI) or send none: every call of a turn
still has an id of its own, and each result answers exactly one call."""

from __future__ import annotations

from tests.fakes.replay_server import http
from tests.providers.turn import check_refusable_fields, run_turn
from tests.providers.wire import ANSWER, tgi


def test_ids_repeated_from_step_to_step_are_made_unique_within_the_turn(api, replay, workdir):
    call = tgi.CASES["tool_call"]  # its call is "0", as every TGI reply numbers them
    seen = run_turn(api, replay, "tgi", str(workdir), call, call, tgi.CASES["text"])
    assert seen.answer["content"] == ANSWER
    last = seen.requests[-1].json()["messages"]
    asked = [c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert asked[0] == "0" and len(set(asked)) == 2 and answered == asked
    assert [r["call_id"] for r in seen.of_type("tool_result")] == asked
    check_refusable_fields(seen.requests[-1], "tgi")


def test_a_call_without_an_id_gets_one(api, replay, workdir):
    chunk = b'data: {"object":"chat.completion.chunk","id":"","created":1764950000,"model":"m","choices":'
    nameless = http(
        b"HTTP/1.1 200 OK\ncontent-type: text/event-stream\n\n"
        + chunk
        + b'[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":'
        b'{"name":"bash","arguments":"{\\"command\\":\\"echo one\\"}"}}]},'
        b'"logprobs":null,"finish_reason":null}]}\n\n'
        + chunk
        + b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":"eos_token"}]}\n\ndata: [DONE]\n\n'
    )
    seen = run_turn(api, replay, "tgi", str(workdir), nameless, tgi.CASES["text"])
    messages = seen.requests[1].json()["messages"]
    [call] = [c for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert call["id"].startswith("call_")
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == [call["id"]]
