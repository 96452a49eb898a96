"""`stream_reply` through the real openai and anthropic SDKs, against our fake server."""

from __future__ import annotations

import json
import socket
import time

import pytest

from app.providers import (
    ModelEvent,
    ModelNotConfiguredError,
    ModelRequestError,
    ModelUnavailableError,
    stream_reply,
)
from app.settings import ModelSettings
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

PROVIDERS = ["openai", "anthropic"]
FAST = {"retries": 3, "backoff_seconds": 0.01, "timeout_seconds": 5.0}
HELLO = [{"role": "user", "content": "hello"}]
BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}


@pytest.fixture
def server():
    with FakeModelServer() as fake:
        yield fake


def model_for(server: FakeModelServer, provider: str, **changes) -> ModelSettings:
    base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    return ModelSettings(name="default", provider=provider, model="fake-model", base_url=base_url, **changes)


def reply_events(model: ModelSettings, messages=HELLO, tools=(), **options) -> list[ModelEvent]:
    return list(stream_reply(model, list(messages), list(tools), **{**FAST, **options}))


def of_kind(events: list[ModelEvent], kind: str) -> list[ModelEvent]:
    return [e for e in events if e.kind == kind]


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_plain_text_streams_as_several_content_deltas(server, provider):
    server.enqueue(Reply(text="The quick brown fox jumps"))

    events = reply_events(model_for(server, provider))

    deltas = [e.text for e in of_kind(events, "content")]
    assert len(deltas) > 1
    assert "".join(deltas) == "The quick brown fox jumps"
    assert events[-1].kind == "finish"
    assert events[-1].finish_reason == "stop"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replies_come_over_one_kept_alive_connection(server, provider):
    model = model_for(server, provider)
    for n in range(3):
        server.enqueue(Reply(text=f"answer {n}"))
        assert "".join(e.text for e in of_kind(reply_events(model), "content")) == f"answer {n}"
    # No new connection (and, against a hosted API, no new TLS handshake) per step.
    assert len({r.peer for r in server.history}) == 1, [r.peer for r in server.history]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_held_open_after_its_end_is_taken_whole_within_about_a_second(server, provider):
    from app.providers import keepalive

    model = model_for(server, provider)
    server.enqueue(Reply(text="all of it", hold_open=30))
    started = time.monotonic()
    events = reply_events(model)
    took = time.monotonic() - started
    assert "".join(e.text for e in of_kind(events, "content")) == "all of it"
    assert events[-1].kind == "finish"
    assert took < keepalive.READ_ON_SECONDS + 1.5, took
    server.enqueue(Reply(text="next"))  # the held connection is not used again
    assert "".join(e.text for e in of_kind(reply_events(model), "content")) == "next"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_finish_reports_token_usage(server, provider):
    events = reply_events(model_for(server, provider))

    usage = events[-1].usage
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_call_is_assembled_from_pieces(server, provider):
    arguments = {"command": "ls -la /tmp && echo done"}
    server.enqueue(Reply(tool_calls=[ToolCall("bash", arguments, id="call_1")]))

    events = reply_events(model_for(server, provider), tools=[BASH_TOOL])

    [event] = of_kind(events, "tool_call")
    assert event.tool_call.id == "call_1"
    assert event.tool_call.name == "bash"
    assert json.loads(event.tool_call.arguments) == arguments
    assert events[-1].finish_reason == "tool_calls"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_several_tool_calls_keep_their_order(server, provider):
    calls = [ToolCall("bash", {"command": f"echo {n}"}, id=f"call_{n}") for n in range(3)]
    server.enqueue(Reply(text="Running three.", tool_calls=calls))

    events = reply_events(model_for(server, provider), tools=[BASH_TOOL])

    requested = [e.tool_call for e in of_kind(events, "tool_call")]
    assert [c.id for c in requested] == ["call_0", "call_1", "call_2"]
    assert [json.loads(c.arguments)["command"] for c in requested] == ["echo 0", "echo 1", "echo 2"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_raw_string_arguments_pass_through_unparsed(server, provider):
    server.enqueue(Reply(tool_calls=[ToolCall("bash", "ls -la", id="call_raw")]))

    events = reply_events(model_for(server, provider), tools=[BASH_TOOL])

    [event] = of_kind(events, "tool_call")
    assert event.tool_call.arguments == "ls -la"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reasoning_arrives_as_reasoning_events(server, provider):
    server.enqueue(Reply(reasoning="First think it over", text="Answer."))

    events = reply_events(model_for(server, provider))

    assert "".join(e.text for e in of_kind(events, "reasoning")) == "First think it over"
    assert "".join(e.text for e in of_kind(events, "content")) == "Answer."
    kinds = [e.kind for e in events]
    assert kinds.index("content") > len(kinds) - 1 - kinds[::-1].index("reasoning")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_after_429_then_succeeds(server, provider):
    server.enqueue(Reply(status=429, error_message="slow down"))
    server.enqueue(Reply(text="made it"))

    events = reply_events(model_for(server, provider))

    assert "".join(e.text for e in of_kind(events, "content")) == "made it"
    assert len(server.history) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_after_500_then_succeeds(server, provider):
    server.enqueue(Reply(status=500))
    server.enqueue(Reply(status=503))
    server.enqueue(Reply(text="made it"))

    events = reply_events(model_for(server, provider))

    assert "".join(e.text for e in of_kind(events, "content")) == "made it"
    assert len(server.history) == 3


def test_retry_waits_as_long_as_retry_after_says(server):
    server.enqueue(Reply(status=429, retry_after=0.3))

    started = time.monotonic()
    reply_events(model_for(server, "openai"), backoff_seconds=0.0)

    assert time.monotonic() - started >= 0.3
    assert len(server.history) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_gives_up_after_the_retries_are_spent(server, provider):
    for _ in range(3):
        server.enqueue(Reply(status=503, error_message="overloaded, come back later"))
    model = model_for(server, provider)

    with pytest.raises(ModelUnavailableError) as caught:
        reply_events(model, retries=2)

    assert len(server.history) == 3
    message = str(caught.value)
    assert server.url in message
    assert "HTTP 503" in message
    assert "overloaded, come back later" in message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_retry_on_400(server, provider):
    server.enqueue(Reply(status=400, error_message="messages: field required"))

    with pytest.raises(ModelRequestError) as caught:
        reply_events(model_for(server, provider))

    assert len(server.history) == 1
    assert caught.value.status == 400
    assert "messages: field required" in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_connection_refused_is_unavailable_quickly(provider):
    base_url = f"http://127.0.0.1:{unused_port()}"
    model = ModelSettings(name="default", provider=provider, model="m", base_url=base_url)

    started = time.monotonic()
    with pytest.raises(ModelUnavailableError) as caught:
        reply_events(model, retries=1, backoff_seconds=0.01)

    assert time.monotonic() - started < 5
    assert base_url in str(caught.value)
    assert "2 attempts" in str(caught.value)


def test_timeout_is_unavailable(server):
    server.enqueue(Reply(hang_seconds=3))

    with pytest.raises(ModelUnavailableError, match="timed out"):
        reply_events(model_for(server, "openai"), retries=0, timeout_seconds=0.3)


@pytest.mark.parametrize(
    ("provider", "hints"),
    [
        ("openai", ["OPENAI_API_KEY", "OPENAI_BASE_URL", "TURNSTONE_MODEL=openai:"]),
        ("anthropic", ["ANTHROPIC_API_KEY", "TURNSTONE_MODEL=anthropic:"]),
    ],
)
def test_not_configured_says_what_to_set(provider, hints):
    model = ModelSettings(name="default", provider=provider, model="m")

    with pytest.raises(ModelNotConfiguredError) as caught:
        stream_reply(model, HELLO, [])

    for hint in hints:
        assert hint in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_should_stop_ends_a_slow_stream_early(server, provider):
    words = [f"word{n} " for n in range(40)]
    server.enqueue(Reply(chunks=words, chunk_delay=0.05))
    seen: list[ModelEvent] = []

    started = time.monotonic()
    for event in stream_reply(
        model_for(server, provider), HELLO, [], should_stop=lambda: len(seen) >= 2, **FAST
    ):
        seen.append(event)

    assert time.monotonic() - started < 40 * 0.05
    assert 2 <= len(seen) < len(words)
    assert all(e.kind == "content" for e in seen)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream_cut_off_by_a_dying_server_restarts_until_the_tries_run_out(server, provider):
    server.enqueue(Reply(chunks=[f"w{n} " for n in range(20)], chunk_delay=0.05))
    events = stream_reply(model_for(server, provider), HELLO, [], **FAST)
    seen: list[ModelEvent] = []

    with pytest.raises(ModelUnavailableError, match="stream interrupted") as caught:
        for event in events:
            seen.append(event)
            if event.kind == "content":
                server.stop()  # the server dies mid-reply, and stays dead

    assert [e.kind for e in seen].count("restart") == 1
    assert "4 attempts" in str(caught.value)
    assert len(server.history) == 1


def tool_conversation() -> list[dict]:
    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "bash", "arguments": "not json"}},
    ]
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List files twice."},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_a", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Error: bad arguments"},
        {"role": "user", "content": "Thanks."},
    ]


def test_anthropic_request_converts_tool_calls_and_results(server):
    model = model_for(server, "anthropic", max_tokens=1234)

    reply_events(model, messages=tool_conversation(), tools=[BASH_TOOL])

    body = server.history[0].body
    # the prompt cache's breakpoints: the system prompt, the last tool, the newest message
    cached = {"cache_control": {"type": "ephemeral"}}
    assert body["system"] == [{"type": "text", "text": "You are terse.", **cached}]
    assert body["max_tokens"] == 1234
    assert body["tools"] == [
        {
            "name": "bash",
            "description": "Run a shell command.",
            "input_schema": BASH_TOOL["function"]["parameters"],
            **cached,
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "List files twice."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_a", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "call_b", "name": "bash", "input": {"raw_arguments": "not json"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "a.txt"},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "Error: bad arguments"},
                {"type": "text", "text": "Thanks.", **cached},
            ],
        },
    ]


def test_openai_request_carries_the_conversation_as_is(server):
    conversation = tool_conversation()

    reply_events(model_for(server, "openai"), messages=conversation, tools=[BASH_TOOL])

    body = server.history[0].body
    assert body["messages"] == conversation
    assert body["tools"] == [BASH_TOOL]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_tools_sends_no_tools_key(server, provider):
    reply_events(model_for(server, provider))

    assert "tools" not in server.history[0].body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_api_key_never_appears_in_error_messages(server, provider):
    key = "sk-test-do-not-leak-1234567890"
    server.enqueue(Reply(status=401, error_message=f"Incorrect API key provided: {key}"))
    for _ in range(2):
        server.enqueue(Reply(status=503, error_message=f"overloaded for {key}"))
    model = model_for(server, provider, api_key=key)

    with pytest.raises(ModelRequestError) as rejected:
        reply_events(model)
    with pytest.raises(ModelUnavailableError) as unavailable:
        reply_events(model, retries=1)

    assert "Incorrect API key" in str(rejected.value)
    for error in (rejected.value, unavailable.value):
        assert key not in str(error)


def test_default_reply_echoes_the_last_user_message(server):
    events = reply_events(model_for(server, "anthropic"), messages=tool_conversation())

    assert "".join(e.text for e in of_kind(events, "content")) == "ok: Thanks."


def test_scripted_reply_with_match_goes_only_to_its_conversation(server):
    server.enqueue(Reply(text="for beta"), match="beta")
    model = model_for(server, "openai")

    alpha = reply_events(model, messages=[{"role": "user", "content": "alpha"}])
    beta = reply_events(model, messages=[{"role": "user", "content": "beta"}])

    assert "".join(e.text for e in of_kind(alpha, "content")) == "ok: alpha"
    assert "".join(e.text for e in of_kind(beta, "content")) == "for beta"
    assert server.wait_for_requests(2, timeout=1)


PNG_DATA = "iVBORw0KGgo="  # base64 of the PNG signature: the providers never decode it


def image_conversation(media_type: str = "image/png") -> list[dict]:
    """A batch of two results, the first an image (as `conversation.for_model` gives it)."""
    calls = [
        {"id": "call_img", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        {"id": "call_txt", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
    ]
    image = [
        {"type": "text", "text": "[image: /w/pic.png, image/png, 8 bytes]"},
        {"type": "image", "media_type": media_type, "data": PNG_DATA},
    ]
    return [
        {"role": "user", "content": "Look at the picture."},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_img", "content": image},
        {"role": "tool", "tool_call_id": "call_txt", "content": "done"},
    ]


def test_openai_sends_an_image_in_a_user_message_after_the_tool_results(server):
    reply_events(model_for(server, "openai", capabilities={"supports_vision": True}), image_conversation())

    messages = server.history[-1].body["messages"]
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_img", "content": "[image: /w/pic.png, image/png, 8 bytes]"},
        {"role": "tool", "tool_call_id": "call_txt", "content": "done"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Image from call_img: [image: /w/pic.png, image/png, 8 bytes]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_DATA}"}},
            ],
        },
    ]


def test_openai_images_come_before_the_next_user_text(server):
    conversation = [*image_conversation(), {"role": "user", "content": "And now?"}]

    reply_events(model_for(server, "openai", capabilities={"supports_vision": True}), conversation)

    roles = [m["role"] for m in server.history[-1].body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "user"]
    assert server.history[-1].body["messages"][-1] == {"role": "user", "content": "And now?"}


def test_anthropic_puts_an_image_inside_its_tool_result(server):
    reply_events(model_for(server, "anthropic", capabilities={"supports_vision": True}), image_conversation())

    results = server.history[-1].body["messages"][-1]["content"]
    assert results == [
        {
            "type": "tool_result",
            "tool_use_id": "call_img",
            "content": [
                {"type": "text", "text": "[image: /w/pic.png, image/png, 8 bytes]"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_DATA}},
            ],
        },
        {
            "type": "tool_result",
            "tool_use_id": "call_txt",
            "content": "done",
            "cache_control": {"type": "ephemeral"},
        },
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_without_vision_gets_only_the_text(server, provider):
    reply_events(model_for(server, provider, capabilities={"supports_vision": False}), image_conversation())

    body = json.dumps(server.history[-1].body)
    assert PNG_DATA not in body
    assert "[image: /w/pic.png, image/png, 8 bytes] (not shown: the current model cannot view images)" in body
    assert len(server.history[-1].body["messages"]) == (4 if provider == "openai" else 3)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_image_type_the_wire_format_refuses_is_not_sent(server, provider):
    model = model_for(server, provider, capabilities={"supports_vision": True})

    reply_events(model, image_conversation(media_type="image/bmp"))

    body = json.dumps(server.history[-1].body)
    assert PNG_DATA not in body
    assert "(not shown: image/bmp images cannot be sent to the model)" in body


# What a broken or hostile server may put in a stream's event: valid JSON, wrong shapes.
MALFORMED_EVENTS = {
    "openai": [
        "[1, 2]",
        '"text"',
        "null",
        '{"choices": "x"}',
        '{"choices": [null]}',
        '{"choices": [{"delta": "x"}]}',
        '{"choices": [{"delta": {"content": 5}}]}',
        '{"choices": [{"delta": {"tool_calls": {"index": 0}}}]}',
        '{"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]}',
        '{"choices": [{"delta": {"tool_calls": [{"index": true}]}}]}',
        '{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": 3}}]}}]}',
        # (an object is taken as its text: TGI sends arguments so, tests/providers/wire/tgi.py)
        '{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": 5}}]}}]}',
        '{"choices": [{"delta": {}, "finish_reason": 7}]}',
        '{"usage": "lots", "choices": []}',
        "[" * 100_000 + "]" * 100_000,  # deeper than the JSON parser's recursion
    ],
    "anthropic": [
        "[1]",
        '"x"',
        '{"type": 5}',
        '{"type": "content_block_start", "index": 0, "content_block": "text"}',
        '{"type": "content_block_start", "content_block": {"type": "text", "text": ""}}',
        '{"type": "content_block_start", "index": "0", "content_block": {"type": "text", "text": ""}}',
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": 1}}',
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "name": "bash"}}',
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use"}}',
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "citations": {}}}',
        '{"type": "content_block_delta", "index": 0, "delta": null}',
        '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}}',
        '{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": {}}}',
        '{"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}}',
        '{"type": "message_start", "message": []}',
        "[" * 100_000 + "]" * 100_000,
    ],
}


@pytest.mark.parametrize(
    ("provider", "raw"), [(provider, raw) for provider in PROVIDERS for raw in MALFORMED_EVENTS[provider]]
)
def test_a_malformed_event_is_a_broken_stream_and_is_asked_again(server, provider, raw):
    server.enqueue(Reply(text="Never this", raw_event=raw))
    server.enqueue(Reply(text="The whole answer"))

    events = reply_events(model_for(server, provider))

    shown = "".join(e.text for e in of_kind(events, "content"))
    assert shown == "The whole answer"
    assert of_kind(events, "finish")[0].finish_reason == "stop"
    assert len(server.history) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_that_only_sends_malformed_events_gives_up_saying_what_was_wrong(server, provider):
    raw = {"openai": '{"choices": [{"delta": {"content": 5}}]}', "anthropic": '{"type": "message_start"}'}
    for _ in range(2):
        server.enqueue(Reply(text="Never this", raw_event=raw[provider]))

    with pytest.raises(ModelUnavailableError) as caught:
        reply_events(model_for(server, provider), retries=1)

    said = {"openai": "content is a number, not a string", "anthropic": "message_start's message is null"}
    assert f"malformed event ({said[provider]}" in str(caught.value)
    assert len(server.history) == 2


def test_reasoning_that_is_not_text_is_left_out_and_the_reply_kept(server):
    raw = '{"choices": [{"delta": {"reasoning": {"summary": "private"}, "reasoning_content": ["a"]}}]}'
    server.enqueue(Reply(text="Kept whole", raw_event=raw))

    events = reply_events(model_for(server, "openai"))

    assert "".join(e.text for e in of_kind(events, "content")) == "Kept whole"
    assert of_kind(events, "reasoning") == []
    assert len(server.history) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_of_the_wrong_type_is_left_out_and_the_reply_kept(server, provider):
    raw = {
        "openai": '{"choices": [], "usage": {"prompt_tokens": "many", "completion_tokens": -1}}',
        "anthropic": '{"type": "message_delta", "delta": {}, "usage": {"output_tokens": "many"}}',
    }
    server.enqueue(Reply(text="Kept whole", raw_event=raw[provider], output_tokens=4))

    events = reply_events(model_for(server, provider))

    assert "".join(e.text for e in of_kind(events, "content")) == "Kept whole"
    usage = of_kind(events, "finish")[0].usage
    assert all(isinstance(n, int) and n >= 0 for n in usage.values())
    assert len(server.history) == 1
