"""What a streamed reply is made of: the neutral events every provider yields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal[
    "content", "reasoning", "tool_call", "server_block", "restart", "retry", "fallback", "finish"
]


@dataclass(frozen=True)
class ToolCallRequest:
    """One complete tool call: `arguments` is the model's JSON text, unparsed."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelEvent:
    """One step of a reply: a text delta, a finished tool call, a restart, or the end.

    "restart": the stream broke after events had gone out and the request is being
    sent again from scratch; everything before it (content, reasoning, tool calls)
    is void, and `text` says why in a few words. "finish" ends a complete reply:
    `finish_reason` uses the OpenAI words ("stop", "tool_calls", "length", ...) and
    `usage` holds `input_tokens` and `output_tokens` when the server reported them,
    plus `cache_read_input_tokens` / `cache_creation_input_tokens` when it reported
    those (OpenAI's input count includes cached tokens; Anthropic's leaves them out).
    An empty `usage` means the server reported none. "server_block" carries a content
    block the provider ran itself (`block`, in its wire form: Anthropic's tool search
    call and result); it is stored with the reply and sent back as it came. "retry": an
    attempt failed and another (`attempt`, counted from 1) follows after `wait_seconds`;
    `text` says why. It comes before the wait, and before a "restart" when events went out.
    "fallback": the next attempt goes to another model of the chain, `to_model` (after
    `from_model`, whose failure `text` gives); it follows its "retry" event.
    """

    kind: EventKind
    text: str = ""
    tool_call: ToolCallRequest | None = None
    finish_reason: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    block: Mapping[str, Any] | None = None
    attempt: int | None = None
    wait_seconds: float | None = None
    from_model: str | None = None
    to_model: str | None = None


def content(text: str) -> ModelEvent:
    return ModelEvent(kind="content", text=text)


def reasoning(text: str) -> ModelEvent:
    return ModelEvent(kind="reasoning", text=text)


def tool_call(call: ToolCallRequest) -> ModelEvent:
    return ModelEvent(kind="tool_call", tool_call=call)


def restart(reason: str) -> ModelEvent:
    return ModelEvent(kind="restart", text=reason)


def finish(reason: str | None, usage: Mapping[str, int]) -> ModelEvent:
    return ModelEvent(kind="finish", finish_reason=reason, usage=dict(usage))


def retry(reason: str, attempt: int, wait_seconds: float) -> ModelEvent:
    return ModelEvent(kind="retry", text=reason, attempt=attempt, wait_seconds=wait_seconds)


def server_block(block: Mapping[str, Any]) -> ModelEvent:
    return ModelEvent(kind="server_block", block=dict(block))


def fallback(from_model: str, to_model: str, reason: str) -> ModelEvent:
    return ModelEvent(kind="fallback", text=reason, from_model=from_model, to_model=to_model)
