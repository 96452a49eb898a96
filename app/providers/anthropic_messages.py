"""Anthropic Messages, streamed through the official `anthropic` SDK and turned
into `ModelEvent`s (the wire format conversion lives in `anthropic_format`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message, RawMessageStreamEvent

from app.providers import events
from app.providers.anthropic_format import (
    TOOL_SEARCH_BETA,
    convert_messages,
    convert_tools,
    has_tool_search,
    has_web_search,
    system_text,
    tool_input,
)
from app.providers.base import (
    api_key_for,
    cached_client,
    post_stream,
    sdk_failures,
    truncated_failure,
)
from app.providers.citations import Sources
from app.providers.errors import ModelNotConfiguredError
from app.providers.events import ModelEvent, ToolCallRequest
from app.providers.failure import AttemptFailedError, server_message
from app.settings import ModelSettings, default_max_tokens

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"

NOT_CONFIGURED_HINT = (
    "No Anthropic model is configured: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL "
    "for a compatible local server) and TURNSTONE_MODEL=anthropic:NAME to pick the model."
)

# Anthropic's stop reasons in the OpenAI words that `ModelEvent.finish_reason` uses.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


# Newer models refuse a request whose input plus `max_tokens` passes the context
# window ("input length and `max_tokens` exceed context limit: 178959 + 64000 >
# 200000, ..."), even when the reply would have fitted. Such a request is sent
# once more with the room that is left, unless that is less than this.
CONTEXT_LIMIT_PATTERN = re.compile(r"exceed context limit: (\d+) \+ (\d+) > (\d+)")
MIN_FITTED_MAX_TOKENS = 1024

# Usage keys reported on message_start and (cumulative) on message_delta.
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
CACHE_USAGE_KEYS = frozenset({"cache_creation_input_tokens", "cache_read_input_tokens"})


def check_configured(model: ModelSettings) -> None:
    if not model.api_key and not model.base_url:
        raise ModelNotConfiguredError(NOT_CONFIGURED_HINT)


def request_params(model: ModelSettings, messages: list[dict], tools: list[dict]) -> dict:
    converted_tools = convert_tools(tools) if tools else []
    params: dict[str, Any] = {
        "model": model.model,
        "max_tokens": model.max_tokens or default_max_tokens(model.model),
        "messages": convert_messages(
            messages, supports_vision=model.supports_vision, web_search=has_web_search(converted_tools)
        ),
        "stream": True,
    }
    if system := system_text(messages):
        params["system"] = system
    if converted_tools:
        params["tools"] = converted_tools
        if has_tool_search(converted_tools):
            params["extra_headers"] = {"anthropic-beta": TOOL_SEARCH_BETA}
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
        anthropic.Anthropic, api_key_for(model), model.base_url or ANTHROPIC_DEFAULT_BASE_URL, timeout_seconds
    )
    params = request_params(model, messages, tools)
    # Unlike the openai SDK, this one lets transport errors out of a stream unwrapped.
    failures = sdk_failures(anthropic, timeout_seconds, transport_errors=(httpx2.TransportError,))
    keep_text = has_web_search(params.get("tools", []))
    with failures, _create(client, params) as stream:
        yield from _events(stream, should_stop, keep_text=keep_text)


def _create(client: Any, params: dict) -> Any:
    """The opened stream; with less `max_tokens` if only that kept the request out."""
    try:
        return _post(client, params)
    except anthropic.BadRequestError as exc:
        room = output_room(server_message(exc.body, exc.message))
        if room is None or not MIN_FITTED_MAX_TOKENS <= room < params["max_tokens"]:
            raise
        return _post(client, {**params, "max_tokens": room})


def _post(client: Any, params: dict) -> Any:
    """`messages.create(**params)`, the body serialised once (the SDK's preparation copies every
    message of the history on every step)."""
    return post_stream(client, "/v1/messages", params, Message, anthropic.Stream[RawMessageStreamEvent])


def output_room(message: str) -> int | None:
    """Tokens left for the reply, from a "exceed context limit: IN + MAX > LIMIT" refusal."""
    found = CONTEXT_LIMIT_PATTERN.search(message)
    if found is None:
        return None
    input_tokens, _, limit = (int(n) for n in found.groups())
    return limit - input_tokens


@dataclass
class _PartialToolUse:
    id: str
    name: str
    json_text: str = ""
    server_block: dict[str, Any] | None = None  # a server_tool_use: the server runs it, we keep it

    def complete(self) -> ModelEvent:
        if self.server_block is None:
            return events.tool_call(
                ToolCallRequest(id=self.id, name=self.name, arguments=self.json_text or "{}")
            )
        return events.server_block({**self.server_block, "input": tool_input(self.json_text)})


@dataclass
class _PartialText:
    """A text block as it streams, with the citations that came with it (web search)."""

    text: str = ""
    citations: list[dict[str, Any]] | None = None

    def block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": self.text}
        if self.citations:
            block["citations"] = self.citations
        return block


# Blocks the client reads itself; any other block is the server's own (a server tool's
# call or result) and is kept as it came, to be sent back.
CLIENT_BLOCK_TYPES = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


def _events(stream: Any, should_stop: Callable[[], bool], *, keep_text: bool = False) -> Iterator[ModelEvent]:
    """The reply's events. With `keep_text` (the server could search the web) each text block
    is also kept whole, citations included, as a server block, so that the reply goes back
    exactly as it came; the pages cited are added to the text as links at the end."""
    tool_uses: dict[int, _PartialToolUse] = {}
    texts: dict[int, _PartialText] = {}
    sources = Sources()
    stop_reason: str | None = None
    usage = {"input_tokens": 0, "output_tokens": 0}
    is_complete = False
    for event in stream:
        if should_stop():
            return
        if event.type == "message_start":
            _add_usage(usage, event.message.usage)
        elif event.type == "content_block_start" and event.content_block.type == "text":
            texts[event.index] = _PartialText(citations=_citations(event.content_block, sources))
        elif event.type == "content_block_start" and event.content_block.type == "tool_use":
            block = event.content_block
            tool_uses[event.index] = _PartialToolUse(id=block.id, name=block.name)
        elif event.type == "content_block_start" and event.content_block.type == "server_tool_use":
            block = _as_dict(event.content_block)
            tool_uses[event.index] = _PartialToolUse(block["id"], block["name"], server_block=block)
        elif event.type == "content_block_start" and event.content_block.type not in CLIENT_BLOCK_TYPES:
            yield events.server_block(_as_dict(event.content_block))
        elif event.type == "content_block_delta":
            yield from _delta_events(event.index, event.delta, tool_uses, texts.get(event.index), sources)
        elif event.type == "content_block_stop" and event.index in tool_uses:
            yield tool_uses.pop(event.index).complete()
        elif event.type == "content_block_stop" and event.index in texts:
            text = texts.pop(event.index)
            if keep_text and text.text:  # the API refuses empty text blocks
                yield events.server_block(text.block())
        elif event.type == "message_delta":
            stop_reason = event.delta.stop_reason or stop_reason
            if event.usage is not None:
                _add_usage(usage, event.usage)
        elif event.type == "message_stop":
            is_complete = True
    if not is_complete:
        raise AttemptFailedError(truncated_failure())
    if cited := sources.text():
        yield events.content(cited)
    yield events.finish(FINISH_REASONS.get(stop_reason or "", stop_reason), usage)


def _as_dict(block: Any) -> dict[str, Any]:
    """A content block in its wire form (the SDK may not know the type: then a dict)."""
    if isinstance(block, dict):
        return dict(block)
    return block.to_dict(mode="json")


def _add_usage(usage: dict[str, int], reported: Any) -> None:
    """Counts from message_start or message_delta (cumulative there): newer ones win."""
    for key in USAGE_KEYS:
        value = getattr(reported, key, None)
        if not isinstance(value, int) or (key in CACHE_USAGE_KEYS and value == 0):
            continue  # no cache keys when nothing was cached: most replies
        usage[key] = value


def _citations(block: Any, sources: Sources) -> list[dict[str, Any]] | None:
    """A text block's opening citations (usually none: they come as deltas), noted as sources."""
    given = getattr(block, "citations", None)
    if not given:
        return None
    citations = [_as_dict(c) for c in given]
    for citation in citations:
        sources.add(citation.get("url"), citation.get("title"))
    return citations


def _delta_events(
    index: int,
    delta: Any,
    tool_uses: dict[int, _PartialToolUse],
    text: _PartialText | None,
    sources: Sources,
) -> Iterator[ModelEvent]:
    if delta.type == "text_delta" and delta.text:
        if text is not None:
            text.text += delta.text
        yield events.content(delta.text)
    elif delta.type == "citations_delta" and text is not None:
        citation = _as_dict(delta.citation)
        text.citations = [*(text.citations or []), citation]
        sources.add(citation.get("url"), citation.get("title"))
    elif delta.type == "thinking_delta" and delta.thinking:
        yield events.reasoning(delta.thinking)
    elif delta.type == "input_json_delta" and index in tool_uses:
        tool_uses[index].json_text += delta.partial_json
