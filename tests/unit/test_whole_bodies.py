"""One JSON body answering a streamed request, read whole: what a server may send there,
hostile or broken, fails the attempt (retried) and never escapes as anything else."""

from __future__ import annotations

import json

import pytest

from app.providers.anthropic_whole import as_events
from app.providers.failure import AttemptFailedError
from app.providers.openai_whole import as_chunk

HOSTILE = [
    b"",
    b"\x00",
    b"not json",
    b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser's recursion
    b'"\\ud800"',  # a lone surrogate, as a whole body
    b"[1, 2]",
    b"null",
    b'{"choices": "many"}',
    b'{"choices": [{"message": {"tool_calls": {"0": 1}}}]}',
    b'{"choices": [{"message": {"tool_calls": [7]}}]}',
    b'{"content": {"type": "text"}}',
    b'{"content": [5]}',
]


@pytest.mark.parametrize("raw", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("read", [as_chunk, as_events])
def test_a_hostile_body_fails_the_attempt(read, raw):
    with pytest.raises(AttemptFailedError) as caught:
        read(raw)
    assert caught.value.failure.is_retryable


def test_an_error_body_carries_the_servers_words():
    with pytest.raises(AttemptFailedError, match="Provider returned error"):
        as_chunk(json.dumps({"error": {"code": 502, "message": "Provider returned error"}}).encode())
    with pytest.raises(AttemptFailedError, match="Overloaded"):
        as_events(b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')


def test_a_huge_text_with_nul_and_surrogates_is_passed_on_as_it_is():
    text = "a\x00b\ud800c" * 100_000
    body = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
    chunk = as_chunk(json.dumps(body).encode())
    assert chunk["choices"][0]["delta"]["content"] == text
