"""A model stream that breaks mid-reply starts again ("restart"), and a stop ends the
wait between tries at once: through the real SDKs, against the fake model server."""

from __future__ import annotations

import itertools
import time

import pytest

from app.providers import ModelEvent, ModelUnavailableError, stream_reply
from tests.fakes.model_server import BREAK_KINDS, FakeModelServer, Reply
from tests.unit.test_providers import FAST, HELLO, PROVIDERS, model_for, of_kind, reply_events

LONG_WAIT = 10.0  # seconds a back-off would last if nothing cut it short


@pytest.fixture
def server():
    with FakeModelServer() as fake:
        yield fake


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in of_kind(events, "content"))


@pytest.mark.parametrize("how", BREAK_KINDS)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_that_breaks_mid_reply_restarts_and_completes(server, provider, how):
    server.enqueue(Reply(chunks=["Half ", "an ", "answer"], break_after=2, break_how=how))
    server.enqueue(Reply(chunks=["The ", "whole ", "answer"]))

    events = reply_events(model_for(server, provider))

    kinds = [e.kind for e in events]
    assert kinds.count("restart") == 1
    restart = kinds.index("restart")
    assert text_of(events[:restart]) == "Half an "
    assert text_of(events[restart:]) == "The whole answer"
    assert "broke off" in events[restart].text
    assert events[-1].kind == "finish" and events[-1].finish_reason == "stop"
    assert len(server.history) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_restarts_spend_the_same_retry_budget(server, provider):
    server.enqueue(Reply(chunks=["one ", "two ", "three"], break_after=1))
    server.enqueue(Reply(status=503, error_message="overloaded"))
    server.enqueue(Reply(text="never sent"))
    seen: list[ModelEvent] = []

    with pytest.raises(ModelUnavailableError) as caught:
        for event in stream_reply(model_for(server, provider), HELLO, [], **{**FAST, "retries": 1}):
            seen.append(event)

    assert [e.kind for e in seen] == ["content", "retry", "restart"]  # the retry announced, then done
    message = str(caught.value)
    assert "stream interrupted" in message and "2 attempts" in message and "HTTP 503" in message
    assert len(server.history) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_restart_can_be_followed_by_quiet_retries(server, provider):
    server.enqueue(Reply(chunks=["one ", "two"], break_after=1, break_how="error_event"))
    server.enqueue(Reply(status=429, error_message="slow down"))
    server.enqueue(Reply(chunks=["fine ", "now"]))

    events = reply_events(model_for(server, provider))

    assert [e.kind for e in events].count("restart") == 1
    assert text_of(events[[e.kind for e in events].index("restart") :]) == "fine now"
    assert len(server.history) == 3


def stop_on_third_look():
    """A should_stop that turns true while the back-off is under way (its 3rd call)."""
    looks = itertools.count(1)
    return lambda: next(looks) >= 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stop_during_a_retry_after_wait_ends_the_stream_at_once(server, provider):
    server.enqueue(Reply(status=503, error_message="busy", retry_after=LONG_WAIT))
    model = model_for(server, provider)

    started = time.monotonic()
    events = list(stream_reply(model, HELLO, [], should_stop=stop_on_third_look(), **FAST))

    assert time.monotonic() - started < 1.0
    # Ended as a stop does: no error, no "finish"; only the retry that was waited for.
    assert [(e.kind, e.attempt, e.wait_seconds) for e in events] == [("retry", 2, LONG_WAIT)]
    assert len(server.history) == 1  # and no other try


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stop_after_a_restart_ends_the_stream_without_another_try(server, provider):
    server.enqueue(Reply(chunks=["one ", "two"], break_after=1))
    seen: list[ModelEvent] = []

    started = time.monotonic()
    for event in stream_reply(
        model_for(server, provider),
        HELLO,
        [],
        should_stop=lambda: any(e.kind == "restart" for e in seen),
        **{**FAST, "backoff_seconds": LONG_WAIT},
    ):
        seen.append(event)

    assert time.monotonic() - started < 1.0
    assert [e.kind for e in seen] == ["content", "retry", "restart"]
    assert len(server.history) == 1
