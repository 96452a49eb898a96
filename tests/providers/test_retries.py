"""Retries against real servers' shapes: a stalled stream, an overloaded server, a rate limit;
each retry shown to whoever watches the workstream and counted in /metrics."""

from __future__ import annotations

import re

import httpx

from tests.fakes.replay_server import ReplayServer
from tests.integration.services import Services
from tests.providers.conftest import METRICS_TOKEN, STREAM_IDLE_SECONDS
from tests.providers.turn import run_turn
from tests.providers.wire import ANSWER
from tests.providers.wire import anthropic as claude
from tests.providers.wire import openai as gpt


def retries_counted(service: Services, family: str, reason: str) -> float:
    text = httpx.get(
        service.base_url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
    ).text
    for labels, value in re.findall(r"^turnstone_model_retries_total\{([^}]*)\} (\S+)$", text, re.M):
        if f'family="{family}"' in labels and f'reason="{reason}"' in labels:
            return float(value)
    return 0.0


def test_a_stream_that_stalls_midway_is_asked_for_again(api, replay: ReplayServer, workdir, provider_service):
    before = retries_counted(provider_service, "openai", "stalled")
    seen = run_turn(api, replay, "openai", str(workdir), gpt.CASES["text"].stalled(2), gpt.CASES["text"])
    assert seen.answer["content"] == ANSWER and not seen.errors
    [retry] = seen.of_type("model_retry")
    assert retry["attempt"] == 2 and f"no answer within {STREAM_IDLE_SECONDS} s" in retry["reason"]
    assert any(e.get("discard") for e in seen.of_type("stream_end"))  # "The answer" was shown, then dropped
    first, second = seen.requests
    assert STREAM_IDLE_SECONDS <= second.arrived - first.arrived < STREAM_IDLE_SECONDS + 5
    assert first.raw == second.raw
    assert retries_counted(provider_service, "openai", "stalled") == before + 1


def test_a_server_silent_before_its_first_byte_is_asked_again_quietly(api, replay, workdir):
    seen = run_turn(
        api, replay, "anthropic", str(workdir), claude.CASES["text"].stalled(0), claude.CASES["text"]
    )
    assert seen.answer["content"] == ANSWER and not seen.errors
    assert [r["attempt"] for r in seen.of_type("model_retry")] == [2]
    assert not any(e.get("discard") for e in seen.of_type("stream_end"))  # nothing was shown to drop


def test_an_overloaded_server_is_backed_off_and_counted(api, replay, workdir, provider_service):
    before = retries_counted(provider_service, "anthropic", "overloaded")
    seen = run_turn(
        api, replay, "anthropic", str(workdir), claude.CASES["error_before"], claude.CASES["text"]
    )
    assert seen.answer["content"] == ANSWER
    [retry] = seen.of_type("model_retry")
    assert retry["reason"] == "HTTP 529: Overloaded"
    assert 0 < retry["wait_seconds"] <= 0.05  # the test service's back-off: 0.05 s, jittered down
    assert retries_counted(provider_service, "anthropic", "overloaded") == before + 1


def test_an_overloaded_error_inside_the_stream_counts_as_overload(api, replay, workdir, provider_service):
    before = retries_counted(provider_service, "anthropic", "overloaded")
    seen = run_turn(api, replay, "anthropic", str(workdir), claude.CASES["error_mid"], claude.CASES["text"])
    assert seen.answer["content"] == ANSWER
    assert retries_counted(provider_service, "anthropic", "overloaded") == before + 1


def test_a_rate_limit_is_counted_by_family(api, replay, workdir, provider_service):
    before = retries_counted(provider_service, "openai", "rate_limited")
    run_turn(api, replay, "openai", str(workdir), gpt.CASES["rate_limit"], gpt.CASES["text"])
    assert retries_counted(provider_service, "openai", "rate_limited") == before + 1
