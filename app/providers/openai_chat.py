"""OpenAI-compatible chat completions (OpenAI itself, vLLM, llama.cpp, ...),
streamed through the official `openai` SDK and turned into `ModelEvent`s."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion

from app.providers import event_fields as fields
from app.providers import keepalive, reply_parts
from app.providers.base import (
    api_key_for,
    cached_client,
    post_stream,
    sdk_failures,
    truncated_failure,
)
from app.providers.citations import Sources, cited, split_tools
from app.providers.errors import ModelNotConfiguredError
from app.providers.failure import AttemptFailedError, Failure, server_message
from app.providers.openai_format import convert_messages
from app.providers.openai_whole import as_chunk, is_whole
from app.providers.profiles import profile_for
from app.providers.reply_parts import ModelEvent, ToolCallRequest
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
    model: ModelSettings,
    messages: list[dict],
    tools: list[dict],
    *,
    ask_usage: bool = True,
    cache_key: str | None = None,
) -> dict:
    """The chat completion request: the neutral messages are nearly this wire format."""
    params: dict[str, Any] = {
        "model": model.model,
        "messages": convert_messages(
            messages, supports_vision=model.supports_vision, supports_pdf=model.supports_pdf
        ),
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
        params[profile_for(model).max_tokens_key] = model.max_tokens
    if cache_key is not None and profile_for(model).family == "openai":  # others may refuse the key
        params["prompt_cache_key"] = cache_key
    return params


def attempt(
    model: ModelSettings,
    messages: list[dict],
    tools: list[dict],
    *,
    should_stop: Callable[[], bool],
    timeout_seconds: float,
    idle_seconds: float | None = None,
    cache_key: str | None = None,
) -> Generator[ModelEvent, None, None]:
    """One streamed request; SDK failures leave as `AttemptFailedError`."""
    base_url = model.base_url or OPENAI_DEFAULT_BASE_URL
    client = cached_client(openai.OpenAI, api_key_for(model), base_url, timeout_seconds, idle_seconds)
    ask_usage = base_url not in _REFUSES_STREAM_OPTIONS
    params = request_params(model, messages, tools, ask_usage=ask_usage, cache_key=cache_key)
    waited = idle_seconds or timeout_seconds
    failures = sdk_failures(openai, waited, transport_errors=(httpx2.TransportError,))
    with failures, _create(client, params, base_url) as stream:
        if is_whole(stream.response):  # a server that answers a streamed request in one body
            yield from _events([as_chunk(stream.response.read())], should_stop)
        else:
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
    every message through its type annotations, about 0.2 ms a message, on every step). Its
    chunks come as the JSON they are (`Stream[object]`): read field by field here, not built
    into the SDK's models (about 0.1 ms a chunk, and a reply may stream thousands)."""
    return post_stream(client, "/chat/completions", params, ChatCompletion, _KeptStream)


class _KeptStream(openai.Stream[object]):
    """The SDK's stream, but its connection goes back to the pool after `[DONE]`
    (app/providers/keepalive.py): the body is read to its end before the SDK closes it."""

    def _iter_events(self) -> Iterator[Any]:
        return keepalive.ending_with(
            super()._iter_events(),
            self.response,
            lambda sse: sse.data.startswith("[DONE]"),
            stopped=(openai.APIConnectionError,),
        )


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
    for data in stream:
        if should_stop():
            return
        chunk = fields.obj(data, "a chunk")
        if chunk.get("object") == "error":
            # vLLM's error inside a 200 stream (its ErrorResponse: `object: "error"`, `message`
            # and `code` at the top level), which the SDK lets through as a chunk.
            raise AttemptFailedError(Failure(status=None, message=server_message(chunk, "the server failed")))
        if (reported := fields.optional_obj(chunk.get("usage"), "usage")) is not None:
            usage = _usage(reported)
        for choice in fields.items(chunk.get("choices"), "choices"):
            choice = fields.obj(choice, "a choice")
            yield from _delta_events(fields.optional_obj(choice.get("delta"), "a delta"), calls, sources)
            finish_reason = fields.text(choice.get("finish_reason"), "finish_reason") or finish_reason
    if finish_reason is None:
        raise AttemptFailedError(truncated_failure())
    if text := sources.text():
        yield reply_parts.content(text)
    # Tool calls go out whole, in the order the model made them.
    for index in sorted(calls):
        yield reply_parts.tool_call(calls[index].complete())
    yield reply_parts.finish(finish_reason, usage)


def _usage(reported: dict[str, Any]) -> dict[str, int]:
    usage = {
        "input_tokens": fields.count(reported.get("prompt_tokens")) or 0,
        "output_tokens": fields.count(reported.get("completion_tokens")) or 0,
    }
    details = reported.get("prompt_tokens_details")
    if isinstance(details, dict) and (cached := fields.count(details.get("cached_tokens"))):
        usage["cache_read_input_tokens"] = cached  # part of input_tokens, not extra
    # DeepSeek reports its context cache beside the counts, not in prompt_tokens_details
    # (api-docs.deepseek.com, "Context Caching": prompt_cache_hit_tokens / _miss_tokens).
    elif cached := fields.count(reported.get("prompt_cache_hit_tokens")):
        usage["cache_read_input_tokens"] = cached
    return usage


def _delta_events(
    delta: dict[str, Any] | None, calls: dict[int, _PartialCall], sources: Sources
) -> Iterator[ModelEvent]:
    if delta is None:
        return
    # Not a field of the API's own delta: a search model's citations, on the delta that
    # carries the cited text or on a later one.
    annotations = delta.get("annotations")
    for url, title in cited(annotations if isinstance(annotations, list) else []):
        sources.add(url, title)
    # vLLM and llama.cpp stream thinking as `reasoning_content`; others call it `reasoning`
    # (a few send an object of their own there: only text is shown, as before).
    for thinking in (delta.get("reasoning_content"), delta.get("reasoning")):
        if isinstance(thinking, str) and thinking:
            yield reply_parts.reasoning(thinking)
            break
    if content := fields.text(delta.get("content"), "content"):
        yield reply_parts.content(content)
    # OpenAI's models may decline in a field of its own (the API reference's `refusal`, on the
    # delta and on the message): the person sees it as the answer.
    if refusal := fields.text(delta.get("refusal"), "refusal"):
        yield reply_parts.content(refusal)
    for piece in fields.items(delta.get("tool_calls"), "tool_calls"):
        _add_piece(calls, fields.obj(piece, "a tool call"))


def _add_piece(calls: dict[int, _PartialCall], piece: dict[str, Any]) -> None:
    index = fields.index(piece.get("index"), "a tool call's index")
    call_id = fields.text(piece.get("id"), "a tool call's id")
    if index is None:  # tolerated: servers that omit the index send one call at a time
        index = len(calls) if call_id or not calls else max(calls)
    call = calls.setdefault(index, _PartialCall())
    if call_id:
        call.id = call_id
    function = fields.optional_obj(piece.get("function"), "a tool call's function")
    if function is not None:
        if name := fields.text(function.get("name"), "a tool call's name"):
            call.name = name  # never split; some servers repeat it on every piece
        if arguments := _arguments(function.get("arguments")):
            call.arguments += arguments


def _arguments(value: Any) -> str | None:
    """A piece of a call's argument text. TGI has sent the whole arguments as a JSON object,
    not as the text of one (huggingface/text-generation-inference#2461): kept as its text."""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return fields.text(value, "a tool call's arguments")
