"""What a streamed reply is made of: the neutral events every provider yields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

EventKind = Literal["content", "reasoning", "tool_call", "finish"]


@dataclass(frozen=True)
class ToolCallRequest:
    """One complete tool call: `arguments` is the model's JSON text, unparsed."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelEvent:
    """One step of a reply: a text delta, a finished tool call, or the end.

    `finish_reason` uses the OpenAI words ("stop", "tool_calls", "length", ...);
    `usage` holds `input_tokens` and `output_tokens` when the server reported them.
    """

    kind: EventKind
    text: str = ""
    tool_call: ToolCallRequest | None = None
    finish_reason: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)


def content(text: str) -> ModelEvent:
    return ModelEvent(kind="content", text=text)


def reasoning(text: str) -> ModelEvent:
    return ModelEvent(kind="reasoning", text=text)


def tool_call(call: ToolCallRequest) -> ModelEvent:
    return ModelEvent(kind="tool_call", tool_call=call)


def finish(reason: str | None, usage: Mapping[str, int]) -> ModelEvent:
    return ModelEvent(kind="finish", finish_reason=reason, usage=dict(usage))
