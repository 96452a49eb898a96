"""Fallback chains in the provider layer, through the real SDKs against fake model servers: a
retryable failure moves the next attempt to the next model at once; a request the server
refuses does not; the budget covers every model; the settings name only configured models."""

from __future__ import annotations

import dataclasses
import time

import pytest

from app.providers import ModelRequestError, ModelUnavailableError, stream_reply
from app.settings import Settings, SettingsError
from tests.fakes.model_server import FakeModelServer, Reply
from tests.unit.test_providers import BASH_TOOL, FAST, HELLO, model_for, of_kind, unused_port


@pytest.fixture
def servers():
    with FakeModelServer() as first, FakeModelServer() as second:
        yield first, second


def chain(first: FakeModelServer, second: FakeModelServer):
    head = dataclasses.replace(model_for(first, "openai"), name="head", fallbacks=("tail",))
    return head, dataclasses.replace(model_for(second, "anthropic"), name="tail")


def test_a_failure_before_any_event_moves_to_the_fallback_at_once(servers):
    first, second = servers
    head, tail = chain(first, second)
    first.enqueue(Reply(status=429, error_message="slow down", retry_after=20))
    second.enqueue(Reply(text="from the tail"))
    started = time.monotonic()
    events = list(stream_reply(head, HELLO, [BASH_TOOL], fallbacks=[tail], **FAST))
    assert time.monotonic() - started < 15  # not the 20 s the first server asked for
    kinds = [e.kind for e in events]
    assert events[0].wait_seconds == 0
    assert kinds[:2] == ["retry", "fallback"] and "restart" not in kinds
    switch = events[1]
    assert (switch.from_model, switch.to_model) == ("head", "tail") and "HTTP 429" in switch.text
    assert "".join(e.text for e in of_kind(events, "content")) == "from the tail"
    assert [t["name"] for t in second.history[0].body["tools"]] == ["bash"]  # in Anthropic's form


def test_a_refused_request_does_not_fall_back(servers):
    first, second = servers
    head, tail = chain(first, second)
    first.enqueue(Reply(status=401, error_message="bad key"))
    with pytest.raises(ModelRequestError):
        list(stream_reply(head, HELLO, [], fallbacks=[tail], **FAST))
    assert second.history == []


def test_the_budget_goes_round_the_chain_and_the_error_names_each_model(servers):
    first, second = servers
    head, tail = chain(first, second)
    for _ in range(2):
        first.enqueue(Reply(status=503, error_message="down"))
        second.enqueue(Reply(status=529, error_message="overloaded"))
    with pytest.raises(ModelUnavailableError) as caught:
        events = []
        for event in stream_reply(head, HELLO, [], fallbacks=[tail], **FAST):  # retries 3: 4 attempts
            events.append(event)
    assert (len(first.history), len(second.history)) == (2, 2)
    assert [e.to_model for e in of_kind(events, "fallback")] == ["tail", "head", "tail"]
    waits = [e.wait_seconds for e in of_kind(events, "retry")]
    assert waits[0] == waits[2] == 0 and waits[1] > 0  # a wait only before going round again
    message = str(caught.value)
    assert "4 attempts" in message and "head: HTTP 503: down" in message and "tail: HTTP 529" in message


def test_a_fallback_that_is_unreachable_is_one_more_failure(servers):
    first, _ = servers
    head = dataclasses.replace(model_for(first, "openai"), name="head")
    nowhere = dataclasses.replace(model_for(first, "anthropic"), name="nowhere")
    nowhere = dataclasses.replace(nowhere, base_url=f"http://127.0.0.1:{unused_port()}")
    first.enqueue(Reply(status=502, error_message="bad gateway"))
    first.enqueue(Reply(text="second time lucky"))
    events = list(stream_reply(head, HELLO, [], fallbacks=[nowhere], **{**FAST, "retries": 2}))
    assert [e.to_model for e in of_kind(events, "fallback")] == ["nowhere", "head"]
    assert "".join(e.text for e in of_kind(events, "content")) == "second time lucky"


def model_entry(**extra):
    return {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:1", **extra}


def test_fallbacks_must_name_other_configured_chat_models():
    ok = Settings.from_mapping({"models": {"a": model_entry(fallbacks=["b"]), "b": model_entry()}}, {})
    assert ok.models["a"].fallbacks == ("b",)
    for bad in (["nope"], ["a"], ["b", "b"], "b", [1]):
        with pytest.raises(SettingsError, match="fallbacks"):
            Settings.from_mapping({"models": {"a": model_entry(fallbacks=bad), "b": model_entry()}}, {})
