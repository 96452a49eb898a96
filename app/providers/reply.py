"""`stream_reply`: one model turn as a stream of `ModelEvent`s, whichever the
provider, with retries (a broken stream starts again) and a way to stop early."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

from app import gc_settle
from app.providers.base import describe_target
from app.providers.errors import ModelNotConfiguredError
from app.providers.profiles import profile_for
from app.providers.reply_parts import ModelEvent
from app.providers.retry import RetryPolicy, Target, stream_chain
from app.settings import (
    DEFAULT_MODEL_BACKOFF_SECONDS,
    DEFAULT_MODEL_RETRIES,
    DEFAULT_MODEL_TIMEOUT_SECONDS,
    ModelSettings,
    Settings,
)

# Each provider's module, imported when a model of it is first asked: an SDK costs 15-45 MB
# of memory, and a process that never asks (the web tier, beat) should not hold it.
PROVIDERS = {"openai": "app.providers.openai_chat", "anthropic": "app.providers.anthropic_messages"}
DEFAULT_BASE_URL_NAMES = {"openai": "OPENAI_DEFAULT_BASE_URL", "anthropic": "ANTHROPIC_DEFAULT_BASE_URL"}


def _never() -> bool:
    return False


def service_options(settings: Settings) -> dict[str, Any]:
    """`stream_reply`'s retry and time-out keywords as the service is configured."""
    return {
        "retries": settings.model_retries,
        "backoff_seconds": settings.model_backoff_seconds,
        "timeout_seconds": settings.model_timeout_seconds,
        "idle_seconds": settings.model_stream_idle_seconds,
    }


def stream_reply(
    model: ModelSettings,
    messages: list[dict],
    tools: list[dict],
    *,
    should_stop: Callable[[], bool] = _never,
    retries: int = DEFAULT_MODEL_RETRIES,
    backoff_seconds: float = DEFAULT_MODEL_BACKOFF_SECONDS,
    timeout_seconds: float = DEFAULT_MODEL_TIMEOUT_SECONDS,
    idle_seconds: float | None = None,
    cache_key: str | None = None,
    fallbacks: Sequence[ModelSettings] = (),
) -> Iterator[ModelEvent]:
    """The model's reply to `messages` (OpenAI chat format), streamed.

    A complete reply ends with a "finish" event carrying the token usage. When a
    retryable failure breaks the stream after events went out, a "restart" event
    says so and the reply starts again from nothing: drop what came before it. Every
    retry is announced first by a "retry" event. `idle_seconds`: how long the server may
    send nothing before the stream counts as stalled (None: `timeout_seconds`). `cache_key`:
    what keeps one conversation's requests on one prompt cache (app/providers/prompt_cache.py).
    `fallbacks`: the models tried in turn when one fails in a way another server may not
    (429, 5xx, a time-out, unreachable): a "fallback" event names each switch.

    Raises `ModelNotConfiguredError` at once; `ModelUnavailableError`,
    `ModelRequestError` and its `ContextWindowError` while iterating. When
    `should_stop()` turns true (mid-stream, or during the wait between tries) the
    stream is closed and the iterator simply ends, without a "finish" event.
    """
    options = {
        "should_stop": should_stop,
        "timeout_seconds": timeout_seconds,
        "idle_seconds": idle_seconds,
        "cache_key": cache_key,
    }
    chain = [_target(model, messages, tools, retries, backoff_seconds, options)]
    for other in fallbacks:
        try:  # a fallback with no key is passed over; the first model's missing key is an error
            chain.append(_target(other, messages, portable(tools), retries, backoff_seconds, options))
        except ModelNotConfiguredError:
            continue
    return stream_chain(chain, should_stop=should_stop)


@dataclass(frozen=True)
class Text:
    """A reply read for its text alone (a side request: a title, a summary, a verdict, an answer
    about a page): the text as it finally stood, whether the reply finished, its token usage."""

    text: str
    finished: bool
    usage: dict[str, int]


def reply_text(events: Iterable[ModelEvent]) -> Text:
    """The text of a streamed reply: its content deltas joined, started again on a `restart`
    (a broken stream asked for anew), with `finished` and the usage once it ends."""
    parts: list[str] = []
    finished, usage = False, {}
    for event in events:
        if event.kind == "content":
            parts.append(event.text)
        elif event.kind == "restart":
            parts = []
        elif event.kind == "finish":
            finished, usage = True, dict(event.usage)
    return Text("".join(parts), finished, usage)


def _target(
    model: ModelSettings,
    messages: list[dict],
    tools: list[dict],
    retries: int,
    backoff_seconds: float,
    options: dict[str, Any],
) -> Target:
    """One model of the chain: its provider's attempt on the (neutral) conversation, converted to
    that provider's wire format by the provider module itself."""
    provider = _module(model.provider)
    provider.check_configured(model)
    profile = profile_for(model)
    return Target(
        attempt=partial(provider.attempt, model, messages, tools, **options),
        target=describe_target(model, getattr(provider, DEFAULT_BASE_URL_NAMES[model.provider])),
        policy=RetryPolicy(
            retries=retries, backoff_seconds=backoff_seconds, also_retryable=profile.retryable_statuses
        ),
        secret=model.api_key,
        family=profile.family,
        name=model.name,
    )


def portable(tools: list[dict]) -> list[dict]:
    """The tools a fallback is offered: the functions, not the first model's provider-side
    tools (its native web search), which another provider may not have."""
    return [t for t in tools if t.get("type", "function") == "function"]


def _module(provider: str) -> ModuleType:
    path = PROVIDERS.get(provider)
    if path is None:
        raise ValueError(f"unknown model provider {provider!r}")
    first = path not in sys.modules
    module = importlib.import_module(path)
    if first:  # its SDK is kept for the process's life: out of the collector's walks
        gc_settle.settle(collect=False)
    return module
