"""OpenAI-compatible chat completions (OpenAI itself, vLLM, llama.cpp, ...),
streamed through the official `openai` SDK and turned into `ModelEvent`s."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import openai

from app.providers import events
from app.providers.base import (
    api_key_for,
    cached_client,
    sdk_failures,
    truncated_failure,
)
from app.providers.errors import ModelNotConfiguredError
from app.providers.events import ModelEvent, ToolCallRequest
from app.providers.openai_format import convert_messages
from app.providers.retry import AttemptFailedError
from app.settings import ModelSettings

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

NOT_CONFIGURED_HINT = (
    "No OpenAI model is configured: set OPENAI_API_KEY (hosted OpenAI), or "
    "OPENAI_BASE_URL and OPENAI_API_KEY for a local OpenAI-compatible server, "
    "and TURNSTONE_MODEL=openai:NAME to pick the model."
)


def check_configured(model: ModelSettings) -> None:
    if not model.api_key and not model.base_url:
        raise ModelNotConfiguredError(NOT_CONFIGURED_HINT)


def request_params(model: ModelSettings, messages: list[dict], tools: list[dict]) -> dict:
    """The chat completion request: the neutral messages are nearly this wire format."""
    params: dict[str, Any] = {
        "model": model.model,
        "messages": convert_messages(messages, supports_vision=model.supports_vision),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        params["tools"] = tools
    return params


def attempt(
    model: ModelSettings,
    messages: list[dict],
    tools: list[dict],
    *,
    should_stop: Callable[[], bool],
    timeout_seconds: float,
) -> Generator[ModelEvent, None, None]:
    """One streamed request; SDK failures leave as `AttemptFailedError`."""
    client = cached_client(
        openai.OpenAI, api_key_for(model), model.base_url or OPENAI_DEFAULT_BASE_URL, timeout_seconds
    )
    params = request_params(model, messages, tools)
    with sdk_failures(openai, timeout_seconds), client.chat.completions.create(**params) as stream:
        yield from _events(stream, should_stop)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""

    def complete(self) -> ToolCallRequest:
        # Some local servers send no id; the conversation still needs one to pair results.
        return ToolCallRequest(
            id=self.id or f"call_{uuid.uuid4().hex[:24]}",
            name=self.name,
            arguments=self.arguments,
        )


def _events(stream: Any, should_stop: Callable[[], bool]) -> Iterator[ModelEvent]:
    calls: dict[int, _PartialCall] = {}
    finish_reason: str | None = None
    usage: dict[str, int] = {}
    for chunk in stream:
        if should_stop():
            return
        if chunk.usage is not None:
            usage = {
                "input_tokens": chunk.usage.prompt_tokens or 0,
                "output_tokens": chunk.usage.completion_tokens or 0,
            }
        for choice in chunk.choices:
            yield from _delta_events(choice.delta, calls)
            finish_reason = choice.finish_reason or finish_reason
    if finish_reason is None:
        raise AttemptFailedError(truncated_failure())
    # Tool calls go out whole, in the order the model made them.
    for index in sorted(calls):
        yield events.tool_call(calls[index].complete())
    yield events.finish(finish_reason, usage)


def _delta_events(delta: Any, calls: dict[int, _PartialCall]) -> Iterator[ModelEvent]:
    if delta is None:
        return
    # vLLM and llama.cpp stream thinking as `reasoning_content`; others call it `reasoning`.
    thinking = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
    if isinstance(thinking, str) and thinking:
        yield events.reasoning(thinking)
    if delta.content:
        yield events.content(delta.content)
    for piece in delta.tool_calls or []:
        _add_piece(calls, piece)


def _add_piece(calls: dict[int, _PartialCall], piece: Any) -> None:
    index = piece.index
    if index is None:  # tolerated: servers that omit the index send one call at a time
        index = len(calls) if piece.id or not calls else max(calls)
    call = calls.setdefault(index, _PartialCall())
    if piece.id:
        call.id = piece.id
    if piece.function is not None:
        if piece.function.name:  # never split; some servers repeat it on every piece
            call.name = piece.function.name
        if piece.function.arguments:
            call.arguments += piece.function.arguments
