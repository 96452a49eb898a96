"""The client's sans-I/O core, shared by Client and AsyncClient: URLs, answers, the event
cursor that makes reconnection lose and repeat nothing, and what a turn's events add up to."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from turnstone_jobs.errors import ApiError, ServerError, api_error
from turnstone_jobs.results import ApprovalItem, Decision, Event, SendReceipt, ToolResult, TurnResult

API = "/v1/api"
LISTED = {"schedules": "schedules", "webhooks": "endpoints"}  # a listing's key in its answer
END_STATES = ("idle", "error")
MAX_FRAME_BYTES = 64 * 1024 * 1024  # one event (a long tool result) may be far above websockets' 1 MiB
RECONNECT_DELAYS = (0.1, 0.25, 0.5, 1.0, 2.0)  # then 2 s apart, until reconnect_timeout
BUSY_DELAYS = (1.0, 2.0, 4.0, 8.0, 15.0)  # after a socket refused at a cap: then 15 s apart
TRY_LATER = 1013  # the close code of a socket refused at a cap on open sockets (docs/events.md)
BUSY = 429  # the status of the `error` event sent before that close


def refresh_body(server: str | None, reconnect: bool) -> dict[str, Any]:
    """POST .../mcp/refresh's body: one server or all, connected anew or only rediscovered."""
    body: dict[str, Any] = {"server": server} if server else {}
    return {**body, "reconnect": True} if reconnect else body


def ws_path(ws_id: str, suffix: str = "") -> str:
    return f"{API}/workstreams/{quote(ws_id, safe='')}{suffix}"


def branch_path(ws_id: str, branch_id: str, suffix: str = "") -> str:
    return ws_path(ws_id, f"/branches/{quote(branch_id, safe='')}{suffix}")


def socket_url(base_url: str, ws_id: str, after: int) -> str:
    scheme, rest = base_url.split("://", 1)
    ws_scheme = "wss" if scheme == "https" else "ws"
    query = urlencode({"after": after}) if after else ""
    return f"{ws_scheme}://{rest.rstrip('/')}/v1/ws/workstreams/{quote(ws_id, safe='')}" + (
        f"?{query}" if query else ""
    )


def request_args(body: dict[str, Any] | None, headers: dict[str, str] | None) -> dict[str, Any]:
    """httpx arguments for a JSON body written as ASCII: a lone surrogate in a message then
    travels as an escape the service refuses with a 400 that says so, instead of failing here."""
    if body is None:
        return {"headers": headers}
    return {"content": json.dumps(body), "headers": {**(headers or {}), "Content-Type": "application/json"}}


def answer(status: int, text: str) -> Any:
    """The JSON of a 2xx answer; for anything else the ApiError that says what went wrong."""
    try:
        body = json.loads(text) if text.strip() else {}
    except ValueError:
        body = None
    if 200 <= status < 300:
        if body is None:
            raise ServerError(f"the service answered {status} with something that is not JSON", status)
        return body
    raise api_error(status, body, fallback=text if body is None else "")


def decision_body(
    approved: bool,
    call_id: str | None = None,
    feedback: str | None = None,
    always: bool = False,
    child_ws_id: str | None = None,
    arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"approved": approved, "always": always}
    if call_id is not None:
        body["call_id"] = call_id
    if feedback:
        body["feedback"] = feedback
    if child_ws_id is not None:
        body["child_ws_id"] = child_ws_id
    if arguments is not None:
        body["arguments"] = arguments
    return body


def answer_body(chosen: Any, item: ApprovalItem) -> dict[str, Any]:
    """The approve body for what an on_approval callback chose (`chosen`) for `item`."""
    decision = as_decision(chosen)
    return decision_body(
        decision.approved,
        item.call_id,
        decision.feedback,
        decision.always,
        item.child_ws_id,
        decision.arguments,
    )


def as_decision(value: Any) -> Decision:
    """What an on_approval callback returned: a Decision, or anything truthy/falsy."""
    return value if isinstance(value, Decision) else Decision(approved=bool(value))


@dataclass
class Cursor:
    """The id of the last event handed out: an event at or below it is a repeat and dropped."""

    last: int = 0

    def accept(self, data: dict[str, Any]) -> Event | None:
        """The event to hand out, or None for a repeat. A refusal (`error` with a `status`,
        sent before the socket closes) raises the ApiError it stands for."""
        if data.get("type") == "error" and "status" in data and data.get("id") is None:
            status = data.get("status")
            if status == BUSY:
                return None  # a cap on open sockets: the close follows, and the stream tries later
            raise api_error(status if isinstance(status, int) else 400, data)
        event = Event.from_json(data)
        if event.id is not None:
            if event.id <= self.last:
                return None
            self.last = event.id
        elif event.type == "replay_truncated":
            oldest = data.get("oldest")
            if isinstance(oldest, int):
                self.last = oldest - 1  # what the log holds follows: take it
        return event


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed socket is worth reconnecting: a refusal from the service is not."""
    return not isinstance(exc, ApiError) or isinstance(exc, ServerError)


@dataclass
class TurnTracker:
    """Follows one turn's events to its end: the answer per step, the tool results, and the
    calls that wait for a decision (each asked once)."""

    turn_id: str
    steps: dict[int, str] = field(default_factory=dict)
    results: list[ToolResult] = field(default_factory=list)
    asked: set[tuple[str | None, str]] = field(default_factory=set)
    error: str | None = None
    cancelled: bool = False
    state: str | None = None

    def feed(self, event: Event) -> list[ApprovalItem]:
        """Take one event; the calls newly waiting for a decision."""
        if event.turn_id != self.turn_id:
            return []
        data = event.data
        if event.type == "content":
            step = int(data.get("step") or 0)
            self.steps[step] = self.steps.get(step, "") + str(data.get("text") or "")
        elif event.type == "stream_end" and data.get("discard"):
            self.steps.pop(int(data.get("step") or 0), None)
        elif event.type == "tool_result":
            self.results.append(
                ToolResult(
                    call_id=str(data.get("call_id") or ""),
                    name=str(data.get("name") or ""),
                    output=str(data.get("output") or ""),
                    is_error=bool(data.get("is_error")),
                )
            )
        elif event.type == "error":
            self.error = str(data.get("message") or "the turn failed")
        elif event.type == "cancelled":
            self.cancelled = True
            if data.get("queued"):  # withdrawn before it started: no state_change of its own follows
                self.state = "cancelled"
        elif event.type == "state_change" and data.get("state") in END_STATES:
            self.state = str(data["state"])
        elif event.type == "approve_request":
            return self._new_asks(data.get("items") or [], None)
        elif event.type == "subagent" and isinstance(data.get("event"), dict):
            inner = data["event"]
            if inner.get("type") == "approve_request":
                return self._new_asks(inner.get("items") or [], str(data.get("child_ws_id") or "") or None)
        return []

    def _new_asks(self, items: list[Any], child: str | None) -> list[ApprovalItem]:
        out = []
        for raw in items:
            if not isinstance(raw, dict) or not raw.get("needs_approval") or raw.get("error"):
                continue
            item = ApprovalItem.from_json(raw, child_ws_id=child)
            if (child, item.call_id) not in self.asked:
                self.asked.add((child, item.call_id))
                out.append(item)
        return out

    @property
    def done(self) -> bool:
        return self.state is not None

    def result(self) -> TurnResult:
        answer = self.steps[max(self.steps)] if self.steps else ""
        state = "cancelled" if self.cancelled else (self.state or "idle")
        return TurnResult(self.turn_id, state, answer, list(self.results), self.error)


class Backoff:
    """How long a stream waits before opening its dropped socket again: not at all after a
    socket that brought events (a restart, a blip), growing pauses while sockets are refused at
    a cap (closed `TRY_LATER`) or drop before bringing anything."""

    def __init__(self) -> None:
        self._attempt = 0
        self._fruitful = False

    def brought(self) -> None:
        """An event arrived on the current socket."""
        self._fruitful = True

    def dropped(self, close_code: int | None) -> float:
        """The pause before the next connect, for a socket that ended with `close_code`."""
        if close_code != TRY_LATER and self._fruitful:
            self._fruitful, self._attempt = False, 0
            return 0.0
        delays = BUSY_DELAYS if close_code == TRY_LATER else RECONNECT_DELAYS
        self._fruitful = False
        delay = delays[min(self._attempt, len(delays) - 1)]
        self._attempt += 1
        return delay


def close_code(exc: BaseException) -> int | None:
    """The close code the server sent, for a websockets ConnectionClosed; else None."""
    received = getattr(exc, "rcvd", None)
    return getattr(received, "code", None)


def fork_body(at: int | None, name: str | None, copy_folder: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"copy_folder": copy_folder}
    if at is not None:
        body["at"] = at
    if name is not None:
        body["name"] = name
    return body


def key_header(idempotency_key: str | None) -> dict[str, str] | None:
    return {"Idempotency-Key": idempotency_key} if idempotency_key else None


def receipt(data: dict[str, Any]) -> SendReceipt:
    return SendReceipt(str(data["turn_id"]), str(data["status"]))


def usage_path(query: Mapping[str, str | None]) -> str:
    """`/v1/api/usage` with the given filters (`from_` for `from`, a Python keyword)."""
    given = {key.rstrip("_"): value for key, value in query.items() if value}
    return f"/v1/api/usage?{urlencode(given)}" if given else "/v1/api/usage"
