"""`stream_reply`: one model turn as a stream of `ModelEvent`s, whichever the
provider, with retries (a broken stream starts again) and a way to stop early."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from app.providers import anthropic_messages, openai_chat
from app.providers.base import describe_target
from app.providers.events import ModelEvent
from app.providers.retry import RetryPolicy, stream_with_retries
from app.settings import (
    DEFAULT_MODEL_BACKOFF_SECONDS,
    DEFAULT_MODEL_RETRIES,
    DEFAULT_MODEL_TIMEOUT_SECONDS,
    ModelSettings,
)

PROVIDERS = {"openai": openai_chat, "anthropic": anthropic_messages}
DEFAULT_BASE_URLS = {
    "openai": openai_chat.OPENAI_DEFAULT_BASE_URL,
    "anthropic": anthropic_messages.ANTHROPIC_DEFAULT_BASE_URL,
}


def _never() -> bool:
    return False


def stream_reply(
    model: ModelSettings,
    messages: list[dict],
    tools: list[dict],
    *,
    should_stop: Callable[[], bool] = _never,
    retries: int = DEFAULT_MODEL_RETRIES,
    backoff_seconds: float = DEFAULT_MODEL_BACKOFF_SECONDS,
    timeout_seconds: float = DEFAULT_MODEL_TIMEOUT_SECONDS,
) -> Iterator[ModelEvent]:
    """The model's reply to `messages` (OpenAI chat format), streamed.

    A complete reply ends with a "finish" event carrying the token usage. When a
    retryable failure breaks the stream after events went out, a "restart" event
    says so and the reply starts again from nothing: drop what came before it.

    Raises `ModelNotConfiguredError` at once; `ModelUnavailableError`,
    `ModelRequestError` and its `ContextWindowError` while iterating. When
    `should_stop()` turns true (mid-stream, or during the wait between tries) the
    stream is closed and the iterator simply ends, without a "finish" event.
    """
    provider = PROVIDERS.get(model.provider)
    if provider is None:
        raise ValueError(f"unknown model provider {model.provider!r}")
    provider.check_configured(model)
    attempt = partial(
        provider.attempt,
        model,
        messages,
        tools,
        should_stop=should_stop,
        timeout_seconds=timeout_seconds,
    )
    return stream_with_retries(
        attempt,
        target=describe_target(model, DEFAULT_BASE_URLS[model.provider]),
        policy=RetryPolicy(retries=retries, backoff_seconds=backoff_seconds),
        secret=model.api_key,
        should_stop=should_stop,
    )
