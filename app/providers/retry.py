"""The retry loop around one streamed request: when to try again, how long to wait
(a wait that a stop cuts short), and what the caller is told when the tries run out."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass

from app.metrics.definitions import MODEL_RETRIES
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
# The back-off doubles from `backoff_seconds` up to this, and each wait is drawn between half of
# it and all of it, so that the workers a rate limit or an overload hit at once come back apart.
MAX_BACKOFF_SECONDS = 20.0
JITTER = 0.5
# How often a back-off asks `should_stop()`: a cancel ends the wait within this.
STOP_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class RetryPolicy:
    retries: int  # tries after the first one
    backoff_seconds: float  # doubled on each retry
    also_retryable: frozenset[int] = frozenset()  # statuses the server family fails with now and then

    def delay(self, retry_number: int, failure: Failure) -> float:
        """The server's `retry-after` when it gave one (capped), else the jittered back-off."""
        if failure.retry_after is not None:
            return min(max(failure.retry_after, 0.0), MAX_RETRY_AFTER_SECONDS)
        ceiling = min(self.backoff_seconds * 2.0 ** min(retry_number, 32), MAX_BACKOFF_SECONDS)
        return ceiling * random.uniform(1 - JITTER, 1)


def _never() -> bool:
    return False


@dataclass(frozen=True)
class Target:
    """One model of a chain: how to make one attempt at it, and how it is retried and named."""

    attempt: Callable[[], Generator[ModelEvent, None, None]]
    target: str  # "openai model 'x' at URL", for errors
    policy: RetryPolicy
    secret: str | None = None
    family: str = "generic"
    name: str = ""  # its [models.NAME], for the fallback event


def stream_with_retries(
    attempt: Callable[[], Generator[ModelEvent, None, None]],
    *,
    target: str,
    policy: RetryPolicy,
    secret: str | None,
    should_stop: Callable[[], bool] = _never,
    family: str = "generic",
) -> Iterator[ModelEvent]:
    """One model's events, retried within `policy.retries` (`stream_chain` of one)."""
    return stream_chain([Target(attempt, target, policy, secret, family)], should_stop=should_stop)


def stream_chain(targets: Sequence[Target], should_stop: Callable[[], bool] = _never) -> Iterator[ModelEvent]:
    """Events of one attempt after another until one completes: the first model, and on a
    retryable failure the next (a "fallback" event says so, no wait), round the chain again
    after the last (with the back-off first), for `retries + 1` attempts in all, and at least
    one at each model.

    A retryable failure before any event went out is retried quietly; after events
    went out, a "restart" event first tells the caller to forget them. A
    `should_stop()` during the wait between tries ends the stream there, with no
    further try and no error (as a stop in the middle of a stream does).
    """
    n = len(targets)
    attempts = max(targets[0].policy.retries + 1, n)
    was_interrupted = False
    failures: dict[int, Failure] = {}
    for number in range(attempts):
        here, has_started = targets[number % n], False
        try:
            with contextlib.closing(here.attempt()) as attempt_events:
                for event in attempt_events:
                    has_started = True
                    yield event
            return
        except AttemptFailedError as exc:
            failure = exc.failure
        was_interrupted = was_interrupted or has_started
        failures[number % n] = failure
        last = number + 1 == attempts
        if error := _final_error(failure, here, number, was_interrupted, last, targets, failures):
            raise error
        going = targets[(number + 1) % n]
        wait = here.policy.delay(number // n, failure) if (number + 1) % n == 0 else 0.0
        MODEL_RETRIES.labels(family=here.family, reason=failure.reason).inc()
        reason = redact(failure.describe(), here.secret)
        yield reply_parts.retry(reason, attempt=number + 2, wait_seconds=wait)
        if going is not here:
            yield reply_parts.fallback(here.name, going.name, reason)
        if has_started:
            yield reply_parts.restart(redact(_restart_reason(failure), here.secret))
        if is_stopped_while_waiting(wait, should_stop):
            return
    raise AssertionError("unreachable: the last attempt returns or raises")


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
    here: Target,
    number: int,
    was_interrupted: bool,
    last: bool,
    targets: Sequence[Target],
    failures: dict[int, Failure],
) -> ModelError | None:
    """The error to raise for this failure, or None when another try is due."""
    target, policy, secret = here.target, here.policy, here.secret
    if failure.is_context_window_exceeded:
        return ContextWindowError(redact(_too_long(target, failure), secret), status=failure.status)
    if not failure.is_retryable and failure.status not in policy.also_retryable:
        message = f"{target} rejected the request: {failure.describe()}"
        return ModelRequestError(redact(message, secret), status=failure.status)
    if not last:
        return None
    attempts = number + 1
    if len(targets) > 1:
        return ModelUnavailableError(_chain_failed(targets, failures, attempts))
    if was_interrupted:
        return ModelUnavailableError(redact(_interrupted(target, failure, attempts), secret))
    return ModelUnavailableError(redact(_exhausted(target, failure, attempts), secret))


def _chain_failed(targets: Sequence[Target], failures: dict[int, Failure], attempts: int) -> str:
    each = "; ".join(
        f"{t.name or t.target}: {redact(failures[i].describe(), t.secret)}" for i, t in enumerate(targets)
    )
    return (
        f"every model of the fallback chain failed ({_tries(attempts)}); the last error of each: "
        f"{each}. Check that their servers are running and reachable, and within their rate limits."
    )


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
