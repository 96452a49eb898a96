"""One failed attempt described without SDK types: its status, the server's words,
how long it asked us to wait, and whether another try could help."""

from __future__ import annotations

import contextlib
import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass

RETRYABLE_STATUSES = frozenset({408, 409, 429})  # and every 5xx
# How a failure with no status begins when the server was silent, or never reached.
TIMED_OUT = "no answer within"
CONNECTION_FAILED = "connection failed"

# How servers say "the conversation does not fit the context window" (lower-cased).
# Codes and types: OpenAI `context_length_exceeded`, llama.cpp `exceed_context_size_error`.
CONTEXT_WINDOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
CONTEXT_WINDOW_PHRASES = (
    "maximum context length",  # OpenAI, vLLM
    "prompt is too long",  # Anthropic
    "exceed context limit",  # Anthropic: input plus max_tokens, with no room left to shrink
    "exceeds the available context size",  # llama.cpp
    "longer than the maximum model length",  # vLLM (V1 engine)
    "context length exceeded",
    "exceeds the context window",
    "input is too long",  # Anthropic models on Bedrock
)


@dataclass(frozen=True)
class Failure:
    """One failed attempt."""

    status: int | None  # None: the connection failed, timed out, or the stream broke
    message: str
    retry_after: float | None = None
    code: str | None = None  # the error body's `code` or `type`, when it is a word

    @property
    def is_retryable(self) -> bool:
        if self.is_context_window_exceeded:
            return False  # the same conversation will not fit next time either
        return self.status is None or self.status in RETRYABLE_STATUSES or self.status >= 500

    @property
    def is_context_window_exceeded(self) -> bool:
        if self.code in CONTEXT_WINDOW_CODES:
            return True
        text = self.message.lower()
        return any(phrase in text for phrase in CONTEXT_WINDOW_PHRASES)

    @property
    def reason(self) -> str:
        """What kind of failure, in one word (a metric's label, bounded)."""
        if self.status == 429:
            return "rate_limited"
        # Anthropic answers 529 `overloaded_error`, and sends that error type inside streams.
        if self.status == 529 or (self.code or "").startswith("overloaded"):
            return "overloaded"
        if self.status is not None:
            return "server_error"
        if self.message.startswith(TIMED_OUT):
            return "stalled"
        if self.message.startswith(CONNECTION_FAILED):
            return "connection"
        return "broken_stream"

    def describe(self) -> str:
        return self.message if self.status is None else f"HTTP {self.status}: {self.message}"


class AttemptFailedError(Exception):
    """A provider's single attempt failed; only the retry loop catches this."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (a number or an HTTP date)."""
    if millis := headers.get("retry-after-ms"):
        with contextlib.suppress(ValueError):
            return float(millis) / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return moment.timestamp() - time.time()


def server_message(body: object, fallback: str) -> str:
    """The human text inside an error body of either wire format."""
    if isinstance(body, Mapping):
        if "error" in body:
            return server_message(body["error"], fallback)
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body:
        return body
    return fallback


def server_code(body: object) -> str | None:
    """The error's `code` (OpenAI) or `type` (Anthropic, llama.cpp), when it is a word."""
    if not isinstance(body, Mapping):
        return None
    if isinstance(body.get("error"), Mapping):
        return server_code(body["error"])
    for key in ("code", "type"):
        value = body.get(key)
        if isinstance(value, str) and value and value != "error":
            return value
    return None
