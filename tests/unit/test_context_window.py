"""A conversation past the model's context window is a `ContextWindowError` that says
what to do, in each server's phrasing, and is not retried."""

from __future__ import annotations

import pytest

from app.providers import ContextWindowError, ModelRequestError
from tests.fakes.model_server import FakeModelServer, Reply
from tests.unit.test_providers import PROVIDERS, model_for, reply_events


@pytest.fixture
def server():
    with FakeModelServer() as fake:
        yield fake


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_conversation_too_long_for_the_model_says_what_to_do(server, provider):
    server.enqueue(Reply(context_window_exceeded=True))

    with pytest.raises(ContextWindowError) as caught:
        reply_events(model_for(server, provider))

    error = caught.value
    assert isinstance(error, ModelRequestError) and error.status == 400
    message = str(error)
    assert "longer than the context window" in message and "'fake-model'" in message
    assert "start a new workstream" in message.lower()
    assert len(server.history) == 1  # the same conversation would fail again


@pytest.mark.parametrize(
    ("message", "error_type"),
    [
        pytest.param(
            "This model's maximum context length is 4096 tokens. However, your request has "
            "5000 input tokens. Please reduce the length of the input messages.",
            "BadRequestError",
            id="vllm",
        ),
        pytest.param(
            "The decoder prompt (length 5000) is longer than the maximum model length of 4096. "
            "Make sure that `max_model_len` is no smaller than the number of text tokens.",
            "BadRequestError",
            id="vllm-v1",
        ),
        pytest.param(
            "request (4476 tokens) exceeds the available context size (4096 tokens)",
            "exceed_context_size_error",
            id="llama.cpp",
        ),
        pytest.param(
            "the request exceeds the available context size, try increasing it",
            "invalid_request_error",
            id="llama.cpp-older",
        ),
        pytest.param("Too long.", "exceed_context_size_error", id="llama.cpp-type-only"),
    ],
)
def test_local_servers_phrasings_are_recognised(server, message, error_type):
    server.enqueue(Reply(status=400, error_message=message, error_type=error_type))

    with pytest.raises(ContextWindowError):
        reply_events(model_for(server, "openai"))


def test_the_openai_code_alone_is_enough(server):
    server.enqueue(Reply(status=400, error_message="Too long.", error_code="context_length_exceeded"))

    with pytest.raises(ContextWindowError):
        reply_events(model_for(server, "openai"))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_another_bad_request_is_not_a_context_window_error(server, provider):
    server.enqueue(Reply(status=400, error_message="messages.0.content: field required"))

    with pytest.raises(ModelRequestError) as caught:
        reply_events(model_for(server, provider))

    assert not isinstance(caught.value, ContextWindowError)
