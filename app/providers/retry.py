"""The retry loop around one streamed request: when to try again, how long to wait
(a wait that a stop cuts short), and what the caller is told when the tries run out."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

from app.providers import reply_parts
from app.providers.errors import (
    ContextWindowError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    redact,
)
from app.providers.failure import AttemptFailedError, Failure
from app.providers.reply_parts import ModelEvent

MAX_RETRY_AFTER_SECONDS = 30.0  # a server asking for longer is not waited for longer
# How often a back-off asks `should_stop()`: a cancel ends the wait within this.
STOP_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class RetryPolicy:
    retries: int  # tries after the first one
    backoff_seconds: float  # doubled on each retry

    def delay(self, retry_number: int, failure: Failure) -> float:
        if failure.retry_after is not None:
            return min(max(failure.retry_after, 0.0), MAX_RETRY_AFTER_SECONDS)
        return self.backoff_seconds * 2**retry_number


def _never() -> bool:
    return False


def stream_with_retries(
    attempt: Callable[[], Generator[ModelEvent, None, None]],
    *,
    target: str,
    policy: RetryPolicy,
    secret: str | None,
    should_stop: Callable[[], bool] = _never,
) -> Iterator[ModelEvent]:
    """Events of one attempt after another until one completes, within `policy.retries`.

    A retryable failure before any event went out is retried quietly; after events
    went out, a "restart" event first tells the caller to forget them. A
    `should_stop()` during the wait between tries ends the stream there, with no
    further try and no error (as a stop in the middle of a stream does).
    """
    was_interrupted = False
    for retry_number in itertools.count():
        has_started = False
        try:
            with contextlib.closing(attempt()) as attempt_events:
                for event in attempt_events:
                    has_started = True
                    yield event
            return
        except AttemptFailedError as exc:
            failure = exc.failure
        was_interrupted = was_interrupted or has_started
        if error := _final_error(failure, target, policy, retry_number, was_interrupted, secret):
            raise error
        if has_started:
            yield reply_parts.restart(redact(_restart_reason(failure), secret))
        if is_stopped_while_waiting(policy.delay(retry_number, failure), should_stop):
            return
    raise AssertionError("unreachable")  # itertools.count() never ends


def is_stopped_while_waiting(seconds: float, should_stop: Callable[[], bool]) -> bool:
    """Wait up to `seconds`; True as soon as `should_stop()` is (asked at least once)."""
    deadline = time.monotonic() + seconds
    while not should_stop():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, STOP_POLL_SECONDS))
    return True


def _final_error(
    failure: Failure,
    target: str,
    policy: RetryPolicy,
    retry_number: int,
    was_interrupted: bool,
    secret: str | None,
) -> ModelError | None:
    """The error to raise for this failure, or None when another try is due."""
    if failure.is_context_window_exceeded:
        return ContextWindowError(redact(_too_long(target, failure), secret), status=failure.status)
    if not failure.is_retryable:
        message = f"{target} rejected the request: {failure.describe()}"
        return ModelRequestError(redact(message, secret), status=failure.status)
    if retry_number < policy.retries:
        return None
    attempts = retry_number + 1
    if was_interrupted:
        return ModelUnavailableError(redact(_interrupted(target, failure, attempts), secret))
    return ModelUnavailableError(redact(_exhausted(target, failure, attempts), secret))


def _tries(attempts: int) -> str:
    return "1 attempt" if attempts == 1 else f"{attempts} attempts"


def _restart_reason(failure: Failure) -> str:
    return f"the model's reply broke off ({failure.describe()}); asking again"


def _too_long(target: str, failure: Failure) -> str:
    return (
        f"The conversation is longer than the context window of {target} "
        f"({failure.describe()}). Start a new workstream, or continue with a model "
        "that has a larger context window."
    )


def _interrupted(target: str, failure: Failure, attempts: int) -> str:
    return (
        f"{target}: stream interrupted after the reply had started, and {_tries(attempts)} "
        f"did not complete it; last error: {failure.describe()}. Try the turn again."
    )


def _exhausted(target: str, failure: Failure, attempts: int) -> str:
    return (
        f"{target} is unavailable after {_tries(attempts)}; last error: {failure.describe()}. "
        "Check that the server is running and reachable at that address, "
        "and that the account is within its rate limits."
    )
