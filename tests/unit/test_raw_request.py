"""Requests whose body we serialise ourselves reach the model as `create(**params)` would send
them: the same JSON, `extra_headers` as headers, `extra_body` merged into the body."""

from __future__ import annotations

import anthropic
import openai
import pytest

from app.providers import anthropic_messages, openai_chat
from app.providers.base import raw_request
from tests.fakes.model_server import FakeModelServer, Reply

HISTORY = [
    {"role": "user", "content": "héllo \u2603, \"quoted\" and \\ back"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
]  # fmt: skip


@pytest.fixture
def server():
    with FakeModelServer() as fake:
        yield fake


def test_the_openai_body_is_what_create_would_send(server):
    client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    params = {"model": "m", "messages": HISTORY, "stream": True}
    for send in (lambda: client.chat.completions.create(**params), lambda: openai_chat._post(client, params)):
        server.enqueue(Reply(text="ok"))
        with send() as stream:
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "ok"
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
