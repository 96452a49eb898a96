"""The retry loop around one streamed request: which failures are worth another
try, how long to wait, and what the caller is told when the tries run out."""

from __future__ import annotations

import contextlib
import email.utils
import itertools
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass

from app.providers.errors import ModelRequestError, ModelUnavailableError, redact
from app.providers.events import ModelEvent

RETRYABLE_STATUSES = frozenset({408, 409, 429})  # and every 5xx
MAX_RETRY_AFTER_SECONDS = 30.0  # a server asking for longer is not waited for longer


@dataclass(frozen=True)
class Failure:
    """One failed attempt, described without any SDK type."""

    status: int | None  # None: the connection failed, timed out, or the stream broke
    message: str
    retry_after: float | None = None

    @property
    def is_retryable(self) -> bool:
        return self.status is None or self.status in RETRYABLE_STATUSES or self.status >= 500

    def describe(self) -> str:
        return self.message if self.status is None else f"HTTP {self.status}: {self.message}"


class AttemptFailedError(Exception):
    """A provider's single attempt failed; only the retry loop catches this."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


@dataclass(frozen=True)
class RetryPolicy:
    retries: int  # tries after the first one
    backoff_seconds: float  # doubled on each retry

    def delay(self, retry_number: int, failure: Failure) -> float:
        if failure.retry_after is not None:
            return min(max(failure.retry_after, 0.0), MAX_RETRY_AFTER_SECONDS)
        return self.backoff_seconds * 2**retry_number


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


def stream_with_retries(
    attempt: Callable[[], Generator[ModelEvent, None, None]],
    *,
    target: str,
    policy: RetryPolicy,
    secret: str | None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[ModelEvent]:
    """Events of the first attempt that gets going; a failure once an event is out is final."""
    for retry_number in itertools.count():
        started = False
        try:
            with contextlib.closing(attempt()) as events:
                for event in events:
                    started = True
                    yield event
            return
        except AttemptFailedError as exc:
            failure = exc.failure
        if started:
            raise ModelUnavailableError(redact(_interrupted(target, failure), secret))
        if not failure.is_retryable:
            message = f"{target} rejected the request: {failure.describe()}"
            raise ModelRequestError(redact(message, secret), status=failure.status)
        if retry_number >= policy.retries:
            message = _exhausted(target, failure, attempts=retry_number + 1)
            raise ModelUnavailableError(redact(message, secret))
        sleep(policy.delay(retry_number, failure))
    raise AssertionError("unreachable")  # itertools.count() never ends


def _interrupted(target: str, failure: Failure) -> str:
    return (
        f"{target}: stream interrupted after the reply had started ({failure.describe()}); "
        "the reply is incomplete, try the turn again"
    )


def _exhausted(target: str, failure: Failure, attempts: int) -> str:
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return (
        f"{target} is unavailable after {tries}; last error: {failure.describe()}. "
        "Check that the server is running and reachable at that address, "
        "and that the account is within its rate limits."
    )
