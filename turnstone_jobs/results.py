"""Typed results: what the service's JSON answers and events become on the client side."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Workstream:
    ws_id: str
    name: str
    state: str
    model: str | None = None
    auto_approve: bool = False
    working_dir: str | None = None
    active_turn_id: str | None = None
    skill: str | None = None
    tool_search: dict[str, Any] | None = None
    network: str | None = None  # where its commands may connect: none, proxy or host
    forked_from: str | None = None  # a fork: the workstream it was copied from
    kind: str = "interactive"  # or "coordinator" (runs child workstreams), "task" (a sub-agent)
    parent_id: str | None = None  # a coordinator's child, or a sub-agent: its parent
    closed: bool = False  # closed: it takes no more messages
    pending_approvals: list[ApprovalItem] = field(default_factory=list)
    queued_messages: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Workstream:
        return cls(
            ws_id=str(data["ws_id"]),
            name=str(data.get("name") or ""),
            state=str(data.get("state") or "idle"),
            model=_text(data, "model"),
            auto_approve=bool(data.get("auto_approve")),
            working_dir=_text(data, "working_dir"),
            active_turn_id=_text(data, "active_turn_id"),
            skill=_text(data, "skill"),
            tool_search=data.get("tool_search") if isinstance(data.get("tool_search"), dict) else None,
            network=_text(data, "network"),
            forked_from=_text(data, "forked_from"),
            kind=_text(data, "kind") or "interactive",
            parent_id=_text(data, "parent_id"),
            closed=bool(data.get("closed")),
            pending_approvals=[ApprovalItem.from_json(i) for i in data.get("pending_approvals") or []],
            queued_messages=int(data.get("queued_messages") or 0),
            raw=data,
        )


@dataclass(frozen=True)
class ApprovalItem:
    """A tool call of a step, as `approve_request`/`tool_info` and `pending_approvals` show it.
    `child_ws_id` is set for a sub-agent's call (decided on the parent)."""

    call_id: str
    func_name: str
    header: str = ""
    preview: str = ""
    needs_approval: bool = False
    error: str | None = None
    child_ws_id: str | None = None
    args: dict[str, Any] | None = None  # a call waiting for a decision: its arguments, to edit
    # The admin's policy rule that asked for a person, and the intent judge's verdict (risk,
    # reason, confidence, by), as the service sent them.
    rule: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any], child_ws_id: str | None = None) -> ApprovalItem:
        return cls(
            call_id=str(data.get("call_id") or ""),
            func_name=str(data.get("func_name") or ""),
            header=str(data.get("header") or ""),
            preview=str(data.get("preview") or ""),
            needs_approval=bool(data.get("needs_approval")),
            error=_text(data, "error"),
            child_ws_id=child_ws_id or _text(data, "child_ws_id"),
            args=data["args"] if isinstance(data.get("args"), dict) else None,
            rule=data["rule"] if isinstance(data.get("rule"), dict) else None,
            verdict=data["verdict"] if isinstance(data.get("verdict"), dict) else None,
            raw=data,
        )


@dataclass(frozen=True)
class Event:
    """One workstream event (docs/events.md); `data` is the whole JSON object."""

    type: str
    id: int | None
    turn_id: str | None
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        raw_id = data.get("id")
        return cls(
            type=str(data.get("type") or ""),
            id=raw_id if isinstance(raw_id, int) and not isinstance(raw_id, bool) else None,
            turn_id=_text(data, "turn_id"),
            data=data,
        )

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


@dataclass(frozen=True)
class Attachment:
    """A file attached to a workstream: send it with a message (`send(..., attachments=[id])`)."""

    attachment_id: str
    filename: str
    media_type: str
    size: int
    pages: int | None = None  # a PDF's
    text_note: str | None = None  # a PDF whose text the model will not get: why

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Attachment:
        return cls(
            attachment_id=str(data["attachment_id"]),
            filename=str(data["filename"]),
            media_type=str(data["media_type"]),
            size=int(data["size"]),
            pages=data.get("pages"),
            text_note=data.get("text_note"),
        )


@dataclass(frozen=True)
class SendReceipt:
    turn_id: str
    status: str  # "active" (started) or "queued" (behind a running turn)


@dataclass(frozen=True)
class DecisionResult:
    decided: list[str]
    pending: list[str]
    resumed: bool


@dataclass(frozen=True)
class Decision:
    """What an `on_approval` callback may return instead of a plain bool."""

    approved: bool
    feedback: str | None = None
    always: bool = False
    arguments: dict[str, Any] | None = None  # approve the call with these instead of the model's


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    output: str
    is_error: bool


@dataclass(frozen=True)
class Message:
    role: str
    content: Any
    turn_id: str | None = None
    name: str | None = None
    tool_call_id: str | None = None
    is_error: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        return cls(
            role=str(data.get("role") or ""),
            content=data.get("content"),
            turn_id=_text(data, "turn_id"),
            name=_text(data, "name"),
            tool_call_id=_text(data, "tool_call_id"),
            is_error=bool(data.get("is_error")),
            raw=data,
        )


@dataclass(frozen=True)
class History:
    ws_id: str
    last_event_id: int
    messages: list[Message]


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended: `state` is "idle" (done), "error" or "cancelled"; `answer` is the text
    of the model's last step; `tool_results` every call's result, in the order they came."""

    turn_id: str
    state: str
    answer: str
    tool_results: list[ToolResult]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "idle"
