"""Anthropic Messages, streamed through the official `anthropic` SDK and turned
into `ModelEvent`s (the wire format conversion lives in `anthropic_format`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message

from app.providers import event_fields as fields
from app.providers import keepalive, prompt_cache, reply_parts
from app.providers.anthropic_format import (
    TOOL_SEARCH_BETA,
    convert_messages,
    convert_tools,
    has_tool_search,
    has_web_search,
    system_text,
    tool_input,
)
from app.providers.anthropic_whole import as_events
from app.providers.base import (
    api_key_for,
    cached_client,
    post_stream,
    sdk_failures,
    truncated_failure,
)
from app.providers.citations import Sources
from app.providers.errors import ModelNotConfiguredError
from app.providers.failure import AttemptFailedError, server_message
from app.providers.openai_whole import is_whole
from app.providers.reply_parts import ModelEvent, ToolCallRequest
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
    # Claude 4's streaming classifiers end a reply they stop with "refusal" (the Messages API's
    # stop reasons): OpenAI's word for an answer a filter ended.
    "refusal": "content_filter",
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
            messages,
            supports_vision=model.supports_vision,
            web_search=has_web_search(converted_tools),
            supports_pdf=model.supports_pdf,
        ),
        "stream": True,
    }
    if system := system_text(messages):
        params["system"] = system
    if model.thinking_budget_tokens:  # extended thinking; its blocks must go back signed, as they came
        params["thinking"] = {"type": "enabled", "budget_tokens": model.thinking_budget_tokens}
    if converted_tools:
        params["tools"] = converted_tools
        if has_tool_search(converted_tools):
            params["extra_headers"] = {"anthropic-beta": TOOL_SEARCH_BETA}
    return prompt_cache.mark_anthropic(params)


def attempt(
    model: ModelSettings,
    messages: list[dict],
    tools: list[dict],
    *,
    should_stop: Callable[[], bool],
    timeout_seconds: float,
    idle_seconds: float | None = None,
    cache_key: str | None = None,  # Anthropic's cache needs no key: the marks say what to keep
) -> Generator[ModelEvent, None, None]:
    """One streamed request; SDK failures leave as `AttemptFailedError`."""
    base_url = model.base_url or ANTHROPIC_DEFAULT_BASE_URL
    client = cached_client(anthropic.Anthropic, api_key_for(model), base_url, timeout_seconds, idle_seconds)
    params = request_params(model, messages, tools)
    # Unlike the openai SDK, this one lets transport errors out of a stream unwrapped.
    waited = idle_seconds or timeout_seconds
    failures = sdk_failures(anthropic, waited, transport_errors=(httpx2.TransportError,))
    keep_text = has_web_search(params.get("tools", []))
    with failures, _create(client, params) as stream:
        if is_whole(stream.response):  # a server that answers a streamed request in one body
            stream = as_events(stream.response.read())
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
    message of the history on every step). Its events come as the JSON they are
    (`Stream[object]`): read field by field here, not built into the SDK's models."""
    return post_stream(client, "/v1/messages", params, Message, _EndingStream)


class _EndingStream(anthropic.Stream[object]):
    """The SDK's stream, ended at `message_stop` (app/providers/keepalive.py): a server that
    holds the body open after it no longer holds the step."""

    def _iter_events(self) -> Iterator[Any]:
        return keepalive.ending_with(
            super()._iter_events(),
            self.response,
            lambda sse: sse.event == "message_stop",
            stopped=(anthropic.APIConnectionError,),
        )


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
            return reply_parts.tool_call(
                ToolCallRequest(id=self.id, name=self.name, arguments=self.json_text or "{}")
            )
        return reply_parts.server_block({**self.server_block, "input": tool_input(self.json_text)})


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
# call or result, a `redacted_thinking` block) and is kept as it came, to be sent back.
CLIENT_BLOCK_TYPES = frozenset({"text", "thinking", "tool_use"})


def _events(stream: Any, should_stop: Callable[[], bool], *, keep_text: bool = False) -> Iterator[ModelEvent]:
    """The reply's events. With `keep_text` (the server could search the web) each text block
    is also kept whole, citations included, as a server block, so that the reply goes back
    exactly as it came; the pages cited are added to the text as links at the end."""
    tool_uses: dict[int, _PartialToolUse] = {}
    texts: dict[int, _PartialText] = {}
    # Thinking blocks, kept whole with their signature: the API refuses a tool-using turn whose
    # thinking does not come back unchanged ("Extended thinking" in Anthropic's docs).
    thinkings: dict[int, dict[str, str]] = {}
    sources = Sources()
    stop_reason: str | None = None
    usage = {"input_tokens": 0, "output_tokens": 0}
    is_complete = False
    for data in stream:
        if should_stop():
            return
        event = fields.obj(data, "an event")
        kind = fields.text(event.get("type"), "an event's type")
        if kind == "message_start":
            _add_usage(usage, fields.obj(event.get("message"), "message_start's message").get("usage"))
        elif kind == "content_block_start":
            block = fields.obj(event.get("content_block"), "a content block")
            index = _index(event)
            if fields.text(block.get("type"), "a content block's type") == "thinking":
                thinkings[index] = {"type": "thinking", "thinking": "", "signature": ""}
            yield from _block_start(index, block, tool_uses, texts, sources)
        elif kind == "content_block_delta":
            delta = fields.obj(event.get("delta"), "a delta")
            index = _index(event)
            yield from _delta_events(index, delta, tool_uses, texts.get(index), sources, thinkings.get(index))
        elif kind == "content_block_stop":
            index = _index(event)
            if index in tool_uses:
                yield tool_uses.pop(index).complete()
            elif index in thinkings:
                yield reply_parts.server_block(thinkings.pop(index))
            elif (text := texts.pop(index, None)) and keep_text and text.text:
                yield reply_parts.server_block(text.block())  # not empty: the API refuses those
        elif kind == "message_delta":
            delta = fields.obj(event.get("delta"), "message_delta's delta")
            stop_reason = fields.text(delta.get("stop_reason"), "stop_reason") or stop_reason
            _add_usage(usage, event.get("usage"))
        elif kind == "message_stop":
            is_complete = True
    if not is_complete:
        raise AttemptFailedError(truncated_failure())
    if cited := sources.text():
        yield reply_parts.content(cited)
    yield reply_parts.finish(FINISH_REASONS.get(stop_reason or "", stop_reason), usage)


def _index(event: dict[str, Any]) -> int:
    found = fields.index(event.get("index"), "a content block's index")
    if found is None:
        raise fields.malformed("a content block event has no index")
    return found


def _block_start(
    index: int,
    block: dict[str, Any],
    tool_uses: dict[int, _PartialToolUse],
    texts: dict[int, _PartialText],
    sources: Sources,
) -> Iterator[ModelEvent]:
    kind = fields.text(block.get("type"), "a content block's type")
    if kind == "text":
        texts[index] = _PartialText(citations=_citations(block, sources))
    elif kind in ("tool_use", "server_tool_use"):
        call_id = fields.text(block.get("id"), "a tool use's id")
        name = fields.text(block.get("name"), "a tool use's name")
        if not call_id or not name:  # its result could not be paired with it, nor the tool found
            raise fields.malformed(f"a {kind} block without its id or name")
        # a server_tool_use: the server runs it; the block is kept, to be sent back
        kept = dict(block) if kind == "server_tool_use" else None
        tool_uses[index] = _PartialToolUse(call_id, name, server_block=kept)
    elif kind not in CLIENT_BLOCK_TYPES:
        yield reply_parts.server_block(dict(block))


def _add_usage(usage: dict[str, int], reported: Any) -> None:
    """Counts from message_start or message_delta (cumulative there): newer ones win."""
    if not isinstance(reported, dict):
        return  # a report, not part of the reply
    for key in USAGE_KEYS:
        value = fields.count(reported.get(key))
        if value is None or (key in CACHE_USAGE_KEYS and value == 0):
            continue  # no cache keys when nothing was cached: most replies
        usage[key] = value


def _citations(block: dict[str, Any], sources: Sources) -> list[dict[str, Any]] | None:
    """A text block's opening citations (usually none: they come as deltas), noted as sources."""
    given = fields.items(block.get("citations"), "a text block's citations")
    if not given:
        return None
    citations = [dict(fields.obj(c, "a citation")) for c in given]
    for citation in citations:
        sources.add(citation.get("url"), citation.get("title"))
    return citations


def _delta_events(
    index: int,
    delta: dict[str, Any],
    tool_uses: dict[int, _PartialToolUse],
    text: _PartialText | None,
    sources: Sources,
    thinking: dict[str, str] | None = None,
) -> Iterator[ModelEvent]:
    kind = fields.text(delta.get("type"), "a delta's type")
    if kind == "text_delta" and (piece := fields.text(delta.get("text"), "a text delta")):
        if text is not None:
            text.text += piece
        yield reply_parts.content(piece)
    elif kind == "citations_delta" and text is not None:
        citation = dict(fields.obj(delta.get("citation"), "a citation"))
        text.citations = [*(text.citations or []), citation]
        sources.add(citation.get("url"), citation.get("title"))
    elif kind == "thinking_delta" and (piece := fields.text(delta.get("thinking"), "a thinking delta")):
        if thinking is not None:
            thinking["thinking"] += piece
        yield reply_parts.reasoning(piece)
    elif kind == "signature_delta" and thinking is not None:
        thinking["signature"] += fields.text(delta.get("signature"), "a thinking signature") or ""
    elif kind == "input_json_delta" and index in tool_uses:
        tool_uses[index].json_text += fields.text(delta.get("partial_json"), "a tool use's input") or ""
