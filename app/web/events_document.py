"""The websocket's AsyncAPI 3.0 document: the events a client receives and the commands it may
send, from the same models the HTTP API uses for the commands (app/web/shapes.py) and one model
per event type below. docs/events.md tells the same in prose; a test keeps the table there, the
event types of app/events.py and these models the same set."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import models_json_schema

from app.web import shapes
from app.web.contract import Answer

CHANNEL = "/v1/ws/workstreams/{ws_id}"


class Envelope(Answer):
    """What every event carries."""

    id: int | None = Field(description="increasing per workstream: the cursor to pass as `after`")
    ws_id: str
    turn_id: str | None
    type: str
    ts: float | None = Field(None, description="server time, Unix seconds")


class StateChange(Envelope):
    type: Literal["state_change"]
    state: Literal["idle", "thinking", "running", "attention", "error"]
    current: bool | None = Field(None, description="true (with id null) only right after replay_truncated")


class MessageEvent(Envelope):
    type: Literal["message"]
    role: str
    content: str
    origin: str | None = None
    held: bool | None = None
    attachments: list[shapes.SentAttachment] | None = Field(None, description="user: the files sent with it")


class TurnQueued(Envelope):
    type: Literal["turn_queued"]
    message: str
    origin: str | None = None
    attachments: list[shapes.SentAttachment] | None = Field(None, description="the files sent with it")


class Content(Envelope):
    type: Literal["content"]
    step: int
    text: str


class Reasoning(Envelope):
    type: Literal["reasoning"]
    step: int
    text: str


class StreamEnd(Envelope):
    type: Literal["stream_end"]
    step: int
    discard: bool | None = None
    reason: str | None = None
    usage: shapes.Usage | None = None


class ModelRetry(Envelope):
    type: Literal["model_retry"]
    step: int
    attempt: int
    wait_seconds: float
    reason: str


class ModelWaiting(Envelope):
    type: Literal["model_waiting"]
    step: int
    model: str
    limit: int = Field(description="the model's max_concurrent: requests to it at once")


class ModelFallback(Envelope):
    type: Literal["model_fallback"]
    step: int
    from_model: str
    to_model: str
    attempt: int
    reason: str


class ToolInfo(Envelope):
    type: Literal["tool_info"]
    step: int
    items: list[shapes.ToolItem]


class ApproveRequest(Envelope):
    type: Literal["approve_request"]
    step: int
    items: list[shapes.ToolItem]


class ApprovalResolved(Envelope):
    type: Literal["approval_resolved"]
    call_ids: list[str]
    approved: bool
    feedback: str | None
    always: bool | None
    by: str | None
    how: str | None
    via: Literal["http", "websocket", "cli"] | None
    arguments: dict[str, Any] | None = Field(
        None, description="only when the one call decided was approved as edited: the arguments it runs with"
    )


class VerdictEvent(Envelope):
    type: Literal["verdict"]
    call_id: str
    verdict: shapes.Verdict = Field(
        description="the judge model's, which now stands on the call (`heuristic`: the one it replaced)"
    )


class ToolOutputChunk(Envelope):
    type: Literal["tool_output_chunk"]
    call_id: str
    text: str


class OutputWarning(Envelope):
    type: Literal["output_warning"]
    call_id: str | None = Field(None, description="the call whose result it was; null for a watch's report")
    watch_id: str | None = Field(None, description="the watch whose report it was, when it was one")
    name: str = Field(description="the tool, or `watch`")
    redacted: dict[str, int] = Field(description="credentials redacted from the result, by kind: how many")
    signs: list[str] = Field(
        description="injection signs seen in the result; the model read a note about them"
    )


class ToolResult(Envelope):
    type: Literal["tool_result"]
    call_id: str
    name: str
    output: str
    is_error: bool


class PreviewEvent(Envelope):
    type: Literal["preview"]
    call_id: str | None
    preview_id: str
    kind: str
    title: str


class WorkstreamDeleted(Envelope):
    type: Literal["workstream_deleted"]


class WorkstreamChanged(Envelope):
    """Only the fields that changed are present."""

    type: Literal["workstream_changed"]
    name: str | None = None
    model: str | None = Field(None, description="null: the default model")
    auto_approve: bool | None = None
    smart_approve: bool | None = None
    notify_approvals: bool | None = None
    pinned: bool | None = None
    archived: bool | None = None


class Cancelled(Envelope):
    type: Literal["cancelled"]
    queued: bool | None = None


class ErrorEvent(Envelope):
    type: Literal["error"]
    message: str
    status: int | None = Field(None, description="a refused socket: the HTTP status it would have had")


class Subagent(Envelope):
    type: Literal["subagent"]
    call_id: str | None = Field(description="the parent's task_agent call; null for a coordinator's child")
    child_ws_id: str
    event: dict[str, Any] = Field(description="the sub-agent's own event, whole")


class ReplayTruncated(Envelope):
    type: Literal["replay_truncated"]
    after: int
    oldest: int | None
    message: str


class WatchEvent(Envelope):
    type: Literal["watch"]
    watch: shapes.Watch


class BranchChanged(Envelope):
    type: Literal["branch_changed"]
    branch: str | None
    archived: int
    restored: str | None
    after_message_id: int


class TasksChanged(Envelope):
    type: Literal["tasks_changed"]
    tasks: list[shapes.CoordinatorTask]


class WorkstreamClosed(Envelope):
    type: Literal["workstream_closed"]
    by: str


class CompactionStarted(Envelope):
    type: Literal["compaction_started"]
    reason: Literal["window", "overflow", "manual"]
    messages: int = Field(description="how many messages the summary will stand for")


class CompactionDone(Envelope):
    type: Literal["compaction_done"]
    reason: Literal["window", "overflow", "manual"]
    message_id: int | None = Field(None, description="the summary (role summary); absent with error")
    covers_from: int | None = None
    covers_to: int | None = None
    count: int | None = None
    error: str | None = Field(None, description="the summary could not be written; nothing changed")


class RequiresAction(Envelope):
    type: Literal["requires_action"]
    call_id: str
    name: str = Field(description="the client tool the model called")
    arguments: dict[str, Any] = Field(description="its arguments, checked against the declared schema")


class Reply(BaseModel):
    """The answer to a command sent on the socket (not stored, not replayed)."""

    type: Literal["reply"]
    request_id: str | int | None
    status: int = Field(description="the HTTP status the same call would have had")
    body: dict[str, Any] = Field(description="the HTTP call's JSON body")


EVENTS: tuple[type[BaseModel], ...] = (
    StateChange,
    MessageEvent,
    TurnQueued,
    Content,
    Reasoning,
    StreamEnd,
    ModelRetry,
    ModelFallback,
    ModelWaiting,
    ToolInfo,
    ApproveRequest,
    ApprovalResolved,
    ToolOutputChunk,
    OutputWarning,
    VerdictEvent,
    ToolResult,
    PreviewEvent,
    WorkstreamDeleted,
    WorkstreamChanged,
    Cancelled,
    ErrorEvent,
    Subagent,
    ReplayTruncated,
    WatchEvent,
    BranchChanged,
    TasksChanged,
    WorkstreamClosed,
    CompactionStarted,
    CompactionDone,
    RequiresAction,
    Reply,
)

# The commands a client sends: {"type": ..., "request_id"?: ..., plus the HTTP call's body}.
COMMANDS: dict[str, type[BaseModel]] = {
    "send": shapes.Send,
    "approve": shapes.Approve,
    "cancel": shapes.Cancel,
}


def event_types() -> list[str]:
    return [model.model_fields["type"].annotation.__args__[0] for model in EVENTS]  # type: ignore[union-attr]


def build() -> dict[str, Any]:
    models: list[type[BaseModel]] = [*EVENTS, *COMMANDS.values()]
    _, defs = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    schemas = defs.get("$defs", {})
    messages: dict[str, Any] = {}
    for model, name in zip(EVENTS, event_types(), strict=True):
        messages[name] = {
            "name": name,
            "title": name,
            "summary": (model.__doc__ or "").strip().split("\n")[0] or name,
            "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
        }
    for kind, model in COMMANDS.items():
        messages[f"command_{kind}"] = {
            "name": kind,
            "title": f"{kind} (a command)",
            "summary": f"The body of POST .../{kind}, with type '{kind}' and an optional request_id, "
            "answered by a reply",
            "payload": {
                "allOf": [
                    {"$ref": f"#/components/schemas/{model.__name__}"},
                    {
                        "type": "object",
                        "required": ["type"],
                        "properties": {
                            "type": {"const": kind},
                            "request_id": {
                                "type": ["string", "integer"],
                                "description": "echoed in the reply",
                            },
                        },
                    },
                ]
            },
        }
    channel_messages = {name: {"$ref": f"#/components/messages/{name}"} for name in messages}
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "turnstone-jobs workstream events",
            "version": "1",
            "description": "One websocket per workstream: stored events after the cursor `after`, then "
            "live ones, in order (docs/events.md); commands may be sent on it.",
        },
        "servers": {
            "service": {
                "host": "localhost:8080",
                "protocol": "ws",
                "description": "the service's own address; wss behind TLS",
            }
        },
        "channels": {
            "workstream": {
                "address": CHANNEL,
                "parameters": {"ws_id": {"description": "the workstream"}},
                "messages": channel_messages,
                "bindings": {
                    "ws": {
                        "query": {
                            "type": "object",
                            "properties": {
                                "after": {"type": "integer", "minimum": 0, "description": "the cursor"},
                                "token": {"type": "string", "description": "or Authorization: Bearer"},
                            },
                        }
                    }
                },
            }
        },
        "operations": {
            "receiveEvents": _operation("receive", [n for n in messages if not n.startswith("command_")]),
            "sendCommands": _operation("send", [n for n in messages if n.startswith("command_")]),
        },
        "components": {"schemas": schemas, "messages": messages},
    }


def _operation(action: str, names: list[str]) -> dict[str, Any]:
    return {
        "action": action,
        "channel": {"$ref": "#/channels/workstream"},
        "messages": [{"$ref": f"#/channels/workstream/messages/{name}"} for name in names],
    }
