"""Every server family's recorded answers, through a whole turn of the running service: what a
person sees, and the exact next request the server would receive."""

from __future__ import annotations

import pytest

from tests.providers.turn import (
    calls_of,
    check_refusable_fields,
    continue_turn,
    results_of,
    run_turn,
)
from tests.providers.wire import ANSWER, BEFORE_CALL, FAMILIES, family

pytestmark = pytest.mark.parametrize("name", FAMILIES)

ONE = {"command": "echo one"}
TWO = {"command": "echo two"}


def turn(api, replay, workdir, name, *cases):  # type: ignore[no-untyped-def]
    wire = family(name)
    return run_turn(api, replay, name, str(workdir), *(wire.CASES[case] for case in cases))


def test_plain_text_is_shown_and_its_usage_kept(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "text")
    assert seen.text() == ANSWER and not seen.errors
    assert (seen.answer["role"], seen.answer["content"]) == ("assistant", ANSWER)
    assert seen.answer["usage"] == family(name).USAGE
    [request] = seen.requests
    check_refusable_fields(request, name)
    body = request.json()
    assert body["model"] == family(name).MODEL and body["stream"] is True
    # The reply's limit under the name the family's server knows.
    key = "max_completion_tokens" if name == "openai" else "max_tokens"
    assert body[key] == 4096


def _check_answered(seen, name: str, calls: list[dict], outputs: list[str]) -> None:  # type: ignore[no-untyped-def]
    """The calls the model made were run once each, in order, and the next request answers
    each exactly once, under ids unique within the turn."""
    first, after = seen.requests[0], seen.requests[1]
    sent = calls_of(after)
    assert [(c["name"], c["input"]) for c in sent] == [("bash", c) for c in calls]
    ids = [c["id"] for c in sent]
    assert len(set(ids)) == len(ids) == len(calls)
    # Each call's result shown once (they run at once: in any order), under the id the model is told.
    results = {r["call_id"]: (r["name"], r["output"], r["is_error"]) for r in seen.of_type("tool_result")}
    assert len(seen.of_type("tool_result")) == len(ids)
    assert [results[i] for i in ids] == [("bash", o, False) for o in outputs]
    assert results_of(after) == list(zip(ids, outputs, strict=True))
    assert results_of(first) == []
    check_refusable_fields(after, name)


def test_one_tool_call_is_run_and_answered_once(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "tool_call", "text")
    _check_answered(seen, name, [ONE], ["one"])
    assert seen.answer["content"] == ANSWER and not seen.errors


def test_parallel_tool_calls_are_all_run_and_answered_in_order(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "parallel", "text")
    _check_answered(seen, name, [ONE, TWO], ["one", "two"])
    assert seen.answer["content"] == ANSWER


def test_text_before_a_tool_call_is_shown_and_sent_back(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "text_then_tool", "text")
    _check_answered(seen, name, [ONE], ["one"])
    assert seen.text().startswith(BEFORE_CALL)
    assistant = [m for m in seen.requests[1].json()["messages"] if m["role"] == "assistant"][-1]
    if isinstance(assistant["content"], list):
        texts = [b["text"] for b in assistant["content"] if b["type"] == "text"]
        assert texts == [BEFORE_CALL]
    else:
        assert assistant["content"] == BEFORE_CALL


def test_reasoning_is_shown_and_never_sent_back_as_text(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "reasoning")
    expected = family(name).REASONING
    assert seen.text("reasoning") == expected
    assert seen.answer["content"] == ANSWER and seen.answer.get("reasoning", "") == expected
    after = continue_turn(api, replay, seen.ws_id, "and again?", family(name).CASES["text"])
    request = after.requests[0]
    check_refusable_fields(request, name)
    if expected and name != "anthropic":  # Anthropic's thinking goes back signed: its own test
        assert expected.encode() not in request.raw


def test_a_refusal_is_shown_as_the_answer(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "refusal")
    assert seen.answer["content"] == family(name).REFUSAL and seen.text() == family(name).REFUSAL
    assert not seen.errors


def test_an_error_before_the_stream_is_retried_with_the_same_request(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "error_before", "text")
    assert seen.answer["content"] == ANSWER and not seen.errors
    first, second = seen.requests
    assert first.raw == second.raw


def test_an_error_that_persists_is_shown_in_the_servers_words(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "error_before", "error_before")  # the test service retries once
    [error] = seen.errors
    assert family(name).ERROR_TEXT in error
    assert "sk-" not in error


def test_an_error_inside_the_stream_discards_the_partial_answer_and_asks_again(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "error_mid", "text")
    assert seen.answer["content"] == ANSWER and not seen.errors
    assert seen.text() == ANSWER  # what streamed before the error was discarded
    assert any(e.get("discard") for e in seen.of_type("stream_end"))
    first, second = seen.requests
    assert first.raw == second.raw


def test_a_rate_limit_waits_as_long_as_the_server_asks(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "rate_limit", "text")
    assert seen.answer["content"] == ANSWER and not seen.errors
    first, second = seen.requests
    waited = second.arrived - first.arrived
    retry_after = family(name).RETRY_AFTER
    [retry] = seen.of_type("model_retry")  # the wait is shown, and why
    assert retry["attempt"] == 2 and ("429" in retry["reason"] or "503" in retry["reason"])
    if retry_after is not None:
        assert retry["wait_seconds"] == retry_after
        assert retry_after <= waited < retry_after + 5
    assert first.raw == second.raw


def test_a_whole_answer_to_a_streamed_request_is_shown(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "whole_text")
    assert seen.text() == ANSWER and seen.answer["content"] == ANSWER and not seen.errors


def test_a_whole_answer_with_a_tool_call_is_run_and_answered(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "whole_tool_call", "text")
    _check_answered(seen, name, [ONE], ["one"])


def test_a_whole_answer_with_parallel_calls_is_run_and_answered(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "whole_parallel", "text")
    _check_answered(seen, name, [ONE, TWO], ["one", "two"])


def test_a_whole_error_body_with_status_200_is_retried(api, replay, workdir, name):
    seen = turn(api, replay, workdir, name, "whole_error", "text")
    assert seen.answer["content"] == ANSWER and not seen.errors
    first, second = seen.requests
    assert first.raw == second.raw
