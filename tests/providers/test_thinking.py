"""Anthropic's extended thinking through a tool-using turn: its signed thinking and its redacted
thinking go back to the server exactly as they came, or the next request is refused."""

from __future__ import annotations

import json

from tests.fakes.replay_server import http
from tests.providers.turn import check_refusable_fields, continue_turn, run_turn
from tests.providers.wire import anthropic as wire

THINKING = {"type": "thinking", "thinking": wire.REASONING, "signature": wire.SIGNATURE}
REDACTED = {"type": "redacted_thinking", "data": wire.REDACTED}
CALL = {"type": "tool_use", "id": wire.TOOL_USE_ID, "name": "bash", "input": {"command": "echo one"}}


def test_thinking_blocks_go_back_byte_for_byte_before_the_call(api, replay, workdir):
    seen = run_turn(api, replay, "anthropic", str(workdir), wire.CASES["text_then_tool"], wire.CASES["text"])
    assert seen.text("reasoning") == wire.REASONING
    first, after = seen.requests
    assert json.loads(first.raw)["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    body = after.json()
    assistant = body["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": [
            THINKING,
            REDACTED,
            {"type": "text", "text": "Let me check."},
            CALL,
        ],
    }
    # The newest message carries the prompt cache's breakpoint (app/providers/prompt_cache.py).
    result = {"type": "tool_result", "tool_use_id": wire.TOOL_USE_ID, "content": "one"}
    assert body["messages"][2] == {
        "role": "user",
        "content": [{**result, "cache_control": {"type": "ephemeral"}}],
    }
    # The signature and the redacted data are sent as the exact text that came, once each.
    assert after.raw.count(json.dumps(wire.SIGNATURE).encode()) == 1
    assert after.raw.count(json.dumps(wire.REDACTED).encode()) == 1
    check_refusable_fields(after, "anthropic")


def test_a_later_turn_sends_the_earlier_thinking_back_unchanged(api, replay, workdir):
    seen = run_turn(api, replay, "anthropic", str(workdir), wire.CASES["reasoning"])
    assert seen.answer["content"] == "The answer is 42."
    later = continue_turn(api, replay, seen.ws_id, "and again?", wire.CASES["text"])
    assistant = later.requests[0].json()["messages"][1]
    assert assistant["content"] == [THINKING, {"type": "text", "text": "The answer is 42."}]


def test_thinking_in_a_whole_body_goes_back_signed(api, replay, workdir):
    whole = (
        b"HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
        + json.dumps(
            {
                "id": "msg_01W",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [THINKING, REDACTED, {**CALL, "id": "toolu_01W"}],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 20},
            }
        ).encode()
    )
    seen = run_turn(api, replay, "anthropic", str(workdir), http(whole), wire.CASES["text"])
    content = seen.requests[1].json()["messages"][1]["content"]
    assert content[:2] == [THINKING, REDACTED] and content[2]["id"] == "toolu_01W"
