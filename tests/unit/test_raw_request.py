"""Requests whose body we serialise ourselves reach the model as `create(**params)` would send
them: the same JSON, `extra_headers` as headers, `extra_body` merged into the body."""

from __future__ import annotations

import copy
import json

import anthropic
import openai
import pytest

from app.providers import anthropic_messages, openai_chat
from app.providers.base import raw_request
from app.providers.content import SharedMessage, frozen
from app.settings import ModelSettings
from app.tools.core.registry import build_registry, default_handlers
from tests.fakes.model_server import FakeModelServer, Reply

HISTORY = [
    {"role": "user", "content": "héllo \u2603, \"quoted\" and \\ back"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
]  # fmt: skip


MODEL = ModelSettings(name="m", provider="openai", model="m")
VISION = {"supports_vision": True}
PNG = {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}
SEARCH_BLOCKS = [
    {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "turnstones"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srv1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://birds.example/",
                "title": "Birds",
                "encrypted_content": "e",
            }
        ],
    },
    {
        "type": "text",
        "text": "On the tundra.",
        "citations": [
            {
                "type": "web_search_result_location",
                "cited_text": "tundra",
                "url": "https://birds.example/",
                "title": "Birds",
                "encrypted_index": "i",
            }
        ],
    },
]
# Turns of one message and turns merged from several (two results and the user's next words).
LONGER = [
    *HISTORY,
    {"role": "assistant", "content": "Two at once.", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"pwd\"}"}},
        {"id": "c3", "type": "function", "function": {"name": "read_file", "arguments": "not json"}},
    ]},
    {"role": "tool", "tool_call_id": "c2", "content": "/w"},
    {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "a picture"}, PNG]},
    {"role": "user", "content": "and the birds?"},
    {"role": "assistant", "content": "On the tundra.\n\nSources: ...", "server_blocks": SEARCH_BLOCKS},
    {"role": "user", "content": "thanks"},
]  # fmt: skip


@pytest.fixture
def server():
    with FakeModelServer() as fake:
        yield fake


def test_the_openai_body_is_what_create_would_send(server):
    client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    tools = build_registry(default_handlers()).model_tools("interactive", "/w", None)  # shared schemas
    params = {"model": "m", "messages": HISTORY, "stream": True, "tools": tools}
    for send in (lambda: client.chat.completions.create(**params), lambda: openai_chat._post(client, params)):
        server.enqueue(Reply(text="ok"))
        with send() as stream:  # the SDK's chunk models, or the JSON they are made from (ours)
            chunks = [c if isinstance(c, dict) else c.to_dict() for c in stream]
            assert (
                "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "ok"
            )
    by_sdk, by_us = server.history[-2:]
    assert by_us.body == by_sdk.body
    assert by_us.headers["content-type"] == "application/json"


def test_extra_headers_and_extra_body_go_where_create_puts_them(server):
    client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0)
    server.enqueue(Reply(text="ok"))
    params = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "extra_headers": {"anthropic-beta": "some-beta"},
        "extra_body": {"metadata": {"user_id": "u1"}},
    }
    with anthropic_messages._post(client, params) as stream:
        list(stream)
    sent = server.history[-1]
    assert sent.headers["anthropic-beta"] == "some-beta"
    assert sent.body["metadata"] == {"user_id": "u1"}
    assert "extra_headers" not in sent.body and "extra_body" not in sent.body


def test_the_body_is_compact_utf8_json():
    body, headers = raw_request({"messages": [{"content": "\u2603"}]})
    assert body == '{"messages":[{"content":"\u2603"}]}'.encode()
    assert headers == {"Content-Type": "application/json"}
    tool = frozen({"type": "function", "function": {"name": "t", "description": "\u2603", "parameters": {}}})
    for params in (
        {},
        {"model": "m"},
        {"tools": [tool, {"type": "x"}]},
        {"model": "m", "tools": [tool], "messages": [SharedMessage(role="user", content="\u2603")]},
        {"model": "m", "tools": "not a list", "messages": None},
    ):
        body, _ = raw_request(params)
        assert body == json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode()


def test_shared_messages_are_sent_as_the_same_json_and_cannot_be_changed(server):
    shared = [SharedMessage(m) for m in HISTORY]
    client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    for messages in (HISTORY, shared, shared):  # the last: their JSON as made the first time
        server.enqueue(Reply(text="ok"))
        params = openai_chat.request_params(MODEL, [{"role": "system", "content": "s"}, *messages], [])
        with openai_chat._post(client, params) as stream:
            list(stream)
    plain, first, again = server.history[-3:]
    assert plain.body == first.body == again.body
    assert [m is s for m, s in zip(params["messages"][1:], shared, strict=True)] == [True] * 3  # not copied
    with pytest.raises(TypeError, match="copy it first"):
        shared[0]["content"] = "changed"
    with pytest.raises(TypeError):
        shared[1].update(content="changed")
    copied = copy.deepcopy(shared[1])
    copied["content"] = "a copy is its taker's"
    assert shared[1]["content"] == "" and type(copied) is dict


@pytest.mark.parametrize("web_search", [True, False], ids=["web search offered", "web search not offered"])
def test_anthropic_turns_of_shared_messages_are_made_once_and_sent_as_create_would(server, web_search):
    model = ModelSettings("m", "anthropic", "m", max_tokens=100, capabilities=VISION)
    tools = [{"type": "native_web_search", "max_uses": 5}] if web_search else []
    system = {"role": "system", "content": "s"}
    shared = [SharedMessage(m) for m in LONGER]
    plain = anthropic_messages.request_params(model, [system, *LONGER], tools)
    first = anthropic_messages.request_params(model, [system, *shared], tools)
    again = anthropic_messages.request_params(model, [system, *shared], tools)
    assert first["messages"] == plain["messages"]
    for turn in first["messages"]:
        assert json.loads(turn.json_text()) == turn
    # a message alone in its turn gives the same turn every step (all but the merged fifth, two
    # results and the user's words, and the newest, which carries the prompt cache's mark); a
    # merged turn is made anew, of the same blocks
    kept = [a is b for a, b in zip(first["messages"], again["messages"], strict=True)]
    assert kept == [True, True, True, True, False, True, False]
    for turn, later in zip(first["messages"], again["messages"], strict=True):
        assert all(a is b for a, b in zip(turn["content"][:-1], later["content"][:-1], strict=True))
    search = {"server_tool_use", "web_search_tool_result"}
    search_sent = [b["type"] for t in first["messages"] for b in t["content"] if b["type"] in search]
    assert search_sent == (["server_tool_use", "web_search_tool_result"] if web_search else [])

    client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=0)
    for send in (
        lambda: client.messages.create(**plain),
        lambda: anthropic_messages._post(client, first),
        lambda: anthropic_messages._post(client, again),
    ):
        server.enqueue(Reply(text="ok"))
        with send() as stream:
            list(stream)
    by_sdk, by_us, by_us_again = server.history[-3:]
    assert by_sdk.body == by_us.body == by_us_again.body
    with pytest.raises(TypeError, match="copy it first"):
        first["messages"][0]["content"][0]["text"] = "changed"


def test_a_reply_that_was_only_a_web_search_leaves_no_turn_between_two_user_turns():
    model = ModelSettings("m", "anthropic", "m", max_tokens=100)
    search_only = {"role": "assistant", "content": "", "server_blocks": SEARCH_BLOCKS[:2]}
    messages = [{"role": "user", "content": "look it up"}, search_only, {"role": "user", "content": "well?"}]
    for history in (messages, [SharedMessage(m) for m in messages]):
        sent = anthropic_messages.request_params(model, history, [])["messages"]
        marked = {"cache_control": {"type": "ephemeral"}}  # the prompt cache's mark on the newest block
        texts = [{"type": "text", "text": "look it up"}, {"type": "text", "text": "well?", **marked}]
        assert sent == [{"role": "user", "content": texts}]
