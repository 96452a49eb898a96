"""What the provider modules share: the local-server placeholder key, how a model
is named in messages, and how an SDK error becomes a `Failure`."""

from __future__ import annotations

from collections.abc import Mapping

from app.providers.retry import Failure, parse_retry_after, server_message
from app.settings import ModelSettings

# Local OpenAI/Anthropic-compatible servers usually ignore the key, but both
# SDKs refuse to send a request without one.
LOCAL_SERVER_API_KEY = "not-needed"


def api_key_for(model: ModelSettings) -> str:
    return model.api_key or LOCAL_SERVER_API_KEY


def describe_target(model: ModelSettings, default_base_url: str) -> str:
    return f"{model.provider} model {model.model!r} at {model.base_url or default_base_url}"


def status_failure(status: int, headers: Mapping[str, str], body: object, fallback: str) -> Failure:
    # A status below 400 here is an error event inside a 200 stream: the
    # server broke down mid-reply, which is worth a retry like a 5xx.
    return Failure(
        status=status if status >= 400 else None,
        message=server_message(body, fallback),
        retry_after=parse_retry_after(headers),
    )


def truncated_failure() -> Failure:
    # A server killed mid-reply may close the connection cleanly; without this
    # check a cut-off reply would pass for a short, complete one.
    return Failure(status=None, message="the stream ended before the reply was complete")


def connection_failure(exc: BaseException, timeout_seconds: float) -> Failure:
    cause = exc.__cause__ or exc.__context__
    detail = f"{exc} ({cause})" if cause and str(cause) else str(exc)
    if "timed out" in detail.lower() or "timeout" in type(exc).__name__.lower():
        return Failure(status=None, message=f"timed out after {timeout_seconds:g} s: {detail}")
    return Failure(status=None, message=f"connection failed: {detail}")
