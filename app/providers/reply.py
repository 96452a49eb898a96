"""`stream_reply`: one model turn as a stream of `ModelEvent`s, whichever the
provider, with retries (a broken stream starts again) and a way to stop early."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from functools import partial
from types import ModuleType

from app import gc_settle
from app.providers.base import describe_target
from app.providers.reply_parts import ModelEvent
from app.providers.retry import RetryPolicy, stream_with_retries
from app.settings import (
    DEFAULT_MODEL_BACKOFF_SECONDS,
    DEFAULT_MODEL_RETRIES,
    DEFAULT_MODEL_TIMEOUT_SECONDS,
    ModelSettings,
)

# Each provider's module, imported when a model of it is first asked: an SDK costs 15-45 MB
# of memory, and a process that never asks (the web tier, beat) should not hold it.
PROVIDERS = {"openai": "app.providers.openai_chat", "anthropic": "app.providers.anthropic_messages"}
DEFAULT_BASE_URL_NAMES = {"openai": "OPENAI_DEFAULT_BASE_URL", "anthropic": "ANTHROPIC_DEFAULT_BASE_URL"}


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
    provider = _module(model.provider)
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
        target=describe_target(model, getattr(provider, DEFAULT_BASE_URL_NAMES[model.provider])),
        policy=RetryPolicy(retries=retries, backoff_seconds=backoff_seconds),
        secret=model.api_key,
        should_stop=should_stop,
    )


def _module(provider: str) -> ModuleType:
    path = PROVIDERS.get(provider)
    if path is None:
        raise ValueError(f"unknown model provider {provider!r}")
    first = path not in sys.modules
    module = importlib.import_module(path)
    if first:  # its SDK is kept for the process's life: out of the collector's walks
        gc_settle.settle(collect=False)
    return module
