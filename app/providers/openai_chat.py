"""OpenAI-compatible chat completions (OpenAI itself, vLLM, llama.cpp, ...),
streamed through the official `openai` SDK and turned into `ModelEvent`s."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from app.providers import events
from app.providers.base import (
    api_key_for,
    cached_client,
    post_stream,
    sdk_failures,
    truncated_failure,
)
from app.providers.citations import Sources, cited, split_tools
from app.providers.errors import ModelNotConfiguredError
from app.providers.events import ModelEvent, ToolCallRequest
from app.providers.failure import AttemptFailedError, server_message
from app.providers.openai_format import convert_messages
from app.settings import ModelSettings

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

NOT_CONFIGURED_HINT = (
    "No OpenAI model is configured: set OPENAI_API_KEY (hosted OpenAI), or "
    "OPENAI_BASE_URL and OPENAI_API_KEY for a local OpenAI-compatible server, "
    "and TURNSTONE_MODEL=openai:NAME to pick the model."
)


# Base URLs whose server refused `stream_options` (older or stricter OpenAI-compatible
# servers): they are asked without it from then on, and report usage only if they
# do so unasked. Per worker process; a set is safe to share between threads.
_REFUSES_STREAM_OPTIONS: set[str] = set()
STREAM_OPTIONS_REFUSAL_STATUSES = frozenset({400, 422})


def check_configured(model: ModelSettings) -> None:
    if not model.api_key and not model.base_url:
        raise ModelNotConfiguredError(NOT_CONFIGURED_HINT)


def request_params(
    model: ModelSettings, messages: list[dict], tools: list[dict], *, ask_usage: bool = True
) -> dict:
    """The chat completion request: the neutral messages are nearly this wire format."""
    params: dict[str, Any] = {
        "model": model.model,
        "messages": convert_messages(messages, supports_vision=model.supports_vision),
        "stream": True,
    }
    if ask_usage:  # a streamed reply reports usage only when asked
        params["stream_options"] = {"include_usage": True}
    functions, native_search = split_tools(tools)
    if functions:
        params["tools"] = functions
    if native_search is not None:  # a search model: it searches before it answers, no tool call
        params["web_search_options"] = {}
    if model.max_tokens is not None:
        # Hosted OpenAI's reasoning models refuse the older name; other servers
        # (vLLM, llama.cpp, ...) have long known `max_tokens`, not all the newer one.
        is_hosted = model.base_url in (None, OPENAI_DEFAULT_BASE_URL)
        key = "max_completion_tokens" if is_hosted else "max_tokens"
        params[key] = model.max_tokens
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
    base_url = model.base_url or OPENAI_DEFAULT_BASE_URL
    client = cached_client(openai.OpenAI, api_key_for(model), base_url, timeout_seconds)
    params = request_params(model, messages, tools, ask_usage=base_url not in _REFUSES_STREAM_OPTIONS)
    with sdk_failures(openai, timeout_seconds), _create(client, params, base_url) as stream:
        yield from _events(stream, should_stop)


def _create(client: Any, params: dict, base_url: str) -> Any:
    """The opened stream; asked again without `stream_options` if the server refused it."""
    try:
        return _post(client, params)
    except openai.APIStatusError as exc:
        if "stream_options" not in params or not _is_stream_options_refusal(exc):
            raise
        _REFUSES_STREAM_OPTIONS.add(base_url)
        without = {key: value for key, value in params.items() if key != "stream_options"}
        return _post(client, without)


def _post(client: Any, params: dict) -> Any:
    """`chat.completions.create(**params)`, the body serialised once (the SDK's preparation walks
    every message through its type annotations, about 0.2 ms a message, on every step)."""
    chunks = openai.Stream[ChatCompletionChunk]
    return post_stream(client, "/chat/completions", params, ChatCompletion, chunks)


def _is_stream_options_refusal(exc: openai.APIStatusError) -> bool:
    text = server_message(exc.body, exc.message)
    return exc.status_code in STREAM_OPTIONS_REFUSAL_STATUSES and (
        "stream_options" in text or "include_usage" in text
    )


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
    sources = Sources()  # the pages a search model cited (url_citation annotations)
    finish_reason: str | None = None
    usage: dict[str, int] = {}
    for chunk in stream:
        if should_stop():
            return
        if chunk.usage is not None:
            usage = _usage(chunk.usage)
        for choice in chunk.choices:
            yield from _delta_events(choice.delta, calls, sources)
            finish_reason = choice.finish_reason or finish_reason
    if finish_reason is None:
        raise AttemptFailedError(truncated_failure())
    if text := sources.text():
        yield events.content(text)
    # Tool calls go out whole, in the order the model made them.
    for index in sorted(calls):
        yield events.tool_call(calls[index].complete())
    yield events.finish(finish_reason, usage)


def _usage(reported: Any) -> dict[str, int]:
    usage = {
        "input_tokens": reported.prompt_tokens or 0,
        "output_tokens": reported.completion_tokens or 0,
    }
    details = getattr(reported, "prompt_tokens_details", None)
    if cached := getattr(details, "cached_tokens", None):  # part of input_tokens, not extra
        usage["cache_read_input_tokens"] = cached
    return usage


def _delta_events(delta: Any, calls: dict[int, _PartialCall], sources: Sources) -> Iterator[ModelEvent]:
    if delta is None:
        return
    # Not a declared field of the SDK's delta: a search model's citations arrive as plain
    # dicts, on the delta that carries the cited text or on a later one.
    annotations = getattr(delta, "annotations", None)
    for url, title in cited(annotations if isinstance(annotations, list) else []):
        sources.add(url, title)
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
