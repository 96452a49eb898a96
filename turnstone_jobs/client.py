"""The synchronous client: the JSON API over httpx and a reconnecting event stream (websockets)."""

from __future__ import annotations

import builtins
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from turnstone_jobs import config, protocol
from turnstone_jobs.errors import (
    ApprovalNeededError,
    ClientError,
    ConflictError,
    ConnectionError,
    TimeoutError,
)
from turnstone_jobs.protocol import ws_path
from turnstone_jobs.results import (
    ApprovalItem,
    Attachment,
    DecisionResult,
    Event,
    History,
    Message,
    SendReceipt,
    TurnResult,
    Workstream,
)
from turnstone_jobs.runs import Runs

OnApproval = Callable[[ApprovalItem], Any]


class Client:
    """`Client(url, token)`; both default to TURNSTONE_URL and TURNSTONE_TOKEN."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = config.DEFAULT_TIMEOUT,
        reconnect_timeout: float = config.DEFAULT_RECONNECT_TIMEOUT,
    ) -> None:
        self.base_url = config.server_url(base_url)
        self._token = config.token(token)
        self.reconnect_timeout = reconnect_timeout
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self.runs = Runs(self._call)  # docs/runs.md

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        files: dict[str, Any] | None = None,
    ) -> Any:
        extra: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
        if files is not None:  # a multipart form (an attachment), in place of a JSON body
            extra["files"] = files
        try:
            r = self._http.request(method, path, **protocol.request_args(body, headers), **extra)
        except httpx.TimeoutException as exc:
            raise TimeoutError(f"{self.base_url} did not answer in time ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise ConnectionError(f"cannot reach {self.base_url}: {exc}") from None
        return protocol.answer(r.status_code, r.text)

    # -- workstreams ---------------------------------------------------------------

    def create_workstream(
        self,
        name: str | None = None,
        *,
        model: str | None = None,
        auto_approve: bool = False,
        working_dir: str | None = None,
        tool_search: dict[str, Any] | None = None,
        skill: str | None = None,
        network: str | None = None,
        kind: str | None = None,
    ) -> Workstream:
        """`kind`: "interactive" (the default) or "coordinator" (one that runs child workstreams)."""
        body = {
            "name": name,
            "model": model,
            "auto_approve": auto_approve,
            "working_dir": working_dir,
            "tool_search": tool_search,
            "skill": skill,
            "network": network,
            "kind": kind,
        }
        data = self._call(
            "POST", f"{protocol.API}/workstreams", {k: v for k, v in body.items() if v is not None}
        )
        return Workstream.from_json(data)

    def workstreams(self) -> list[Workstream]:
        return [
            Workstream.from_json(w) for w in self._call("GET", f"{protocol.API}/workstreams")["workstreams"]
        ]

    def workstream(self, ws_id: str) -> Workstream:
        return Workstream.from_json(self._call("GET", ws_path(ws_id)))

    def delete_workstream(self, ws_id: str) -> list[str]:
        return list(self._call("DELETE", ws_path(ws_id))["deleted"])

    def close_workstream(self, ws_id: str) -> list[str]:
        """Close it (a coordinator: its children too): turns stopped, no more messages; the ids closed."""
        return list(self._call("POST", ws_path(ws_id, "/close"), {})["closed"])

    def tasks(self, ws_id: str) -> list[dict[str, Any]]:
        """A coordinator's task list."""
        return list(self._call("GET", ws_path(ws_id, "/tasks"))["tasks"])

    def history(self, ws_id: str) -> History:
        data = self._call("GET", ws_path(ws_id, "/history"))
        return History(
            ws_id, int(data.get("last_event_id") or 0), [Message.from_json(m) for m in data["messages"]]
        )

    def watches(self, ws_id: str) -> list[dict[str, Any]]:
        return list(self._call("GET", ws_path(ws_id, "/watches"))["watches"])

    def listing(self, what: str) -> list[dict[str, Any]]:
        """`schedules` or `webhooks` (endpoints): the caller's, as the API lists them."""
        return list(self._call("GET", f"{protocol.API}/{what}")[protocol.LISTED[what]])

    def skills(self) -> list[dict[str, Any]]:
        return list(self._call("GET", f"{protocol.API}/skills")["skills"])

    def mcp(self) -> dict[str, Any]:
        return dict(self._call("GET", f"{protocol.API}/mcp"))

    def mcp_refresh(self, server: str | None = None, reconnect: bool = False) -> dict[str, Any]:
        """Every worker rediscovers `server` (or all); with `reconnect`, connects it anew."""
        body = protocol.refresh_body(server, reconnect)
        return dict(self._call("POST", f"{protocol.API}/mcp/refresh", body))

    # -- branching (docs/branching.md) ---------------------------------------------------

    def fork(
        self, ws_id: str, at: int | None = None, *, name: str | None = None, copy_folder: bool = False
    ) -> Workstream:
        """A new workstream whose conversation is this one's up to message `at` (None: all)."""
        body = protocol.fork_body(at, name, copy_folder)
        return Workstream.from_json(self._call("POST", ws_path(ws_id, "/fork"), body))

    def usage(self, **query: str | None) -> dict[str, Any]:
        """Tokens and cost added up: `GET /v1/api/usage` with `group_by` (day, model or user),
        `user`, `workstream`, `from`, `to` (docs/usage.md)."""
        return dict(self._call("GET", protocol.usage_path(query)))

    def compact(self, ws_id: str) -> dict[str, Any]:
        """Summarise the conversation's older messages now (docs/compaction.md): 202 once sent."""
        return dict(self._call("POST", ws_path(ws_id, "/compact"), {}))

    def rewind(self, ws_id: str, to: int) -> dict[str, Any]:
        """Keep the messages up to message `to`; those after it go into a branch."""
        return dict(self._call("POST", ws_path(ws_id, "/rewind"), {"to": to}))

    def branches(self, ws_id: str) -> list[dict[str, Any]]:
        return list((self._call("GET", ws_path(ws_id, "/branches")))["branches"])

    def branch(self, ws_id: str, branch_id: str) -> dict[str, Any]:
        return dict(self._call("GET", protocol.branch_path(ws_id, branch_id)))

    def restore(self, ws_id: str, branch_id: str) -> dict[str, Any]:
        return dict(self._call("POST", protocol.branch_path(ws_id, branch_id, "/restore")))

    def edit(
        self, ws_id: str, message_id: int, message: str, idempotency_key: str | None = None
    ) -> SendReceipt:
        """Send `message` in place of the user message `message_id` (the old one kept in a branch)."""
        path = ws_path(ws_id, f"/messages/{int(message_id)}/edit")
        return protocol.receipt(
            self._call("POST", path, {"message": message}, protocol.key_header(idempotency_key))
        )

    def retry(self, ws_id: str, idempotency_key: str | None = None) -> SendReceipt:
        """Send the last user message again (its old answer kept in a branch)."""
        path = ws_path(ws_id, "/retry")
        return protocol.receipt(self._call("POST", path, {}, protocol.key_header(idempotency_key)))

    # -- a turn ----------------------------------------------------------------------

    def send(
        self,
        ws_id: str,
        message: str,
        idempotency_key: str | None = None,
        attachments: list[str] | None = None,
    ) -> SendReceipt:
        """`attachments`: ids from `attach`, sent to the model with the message."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        body: dict[str, Any] = {"message": message, **({"attachments": attachments} if attachments else {})}
        data = self._call("POST", ws_path(ws_id, "/send"), body, headers=headers)
        return SendReceipt(str(data["turn_id"]), str(data["status"]))

    def attach(
        self, ws_id: str, content: bytes, filename: str, media_type: str = "application/octet-stream"
    ) -> Attachment:
        """Attach a file (at most 32 MiB) to the workstream; `send(..., attachments=[its id])`
        gives it to the model with a message (docs/attachments.md)."""
        files = {"file": (filename, content, media_type)}
        return Attachment.from_api(self._call("POST", ws_path(ws_id, "/attachments"), files=files))

    def approve(
        self,
        ws_id: str,
        call_id: str | None = None,
        *,
        feedback: str | None = None,
        always: bool = False,
        child_ws_id: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> DecisionResult:
        """Approve one call (`call_id`), or every pending call when None; `always`: the tool
        (bash: the command's first word) is approved from then on in this workstream;
        `arguments` (with `call_id`): it runs with these instead of the model's."""
        body = protocol.decision_body(True, call_id, feedback, always, child_ws_id, arguments)
        return _decided(self._call("POST", ws_path(ws_id, "/approve"), body))

    def deny(
        self,
        ws_id: str,
        call_id: str | None = None,
        *,
        feedback: str | None = None,
        child_ws_id: str | None = None,
    ) -> DecisionResult:
        body = protocol.decision_body(False, call_id, feedback, False, child_ws_id)
        return _decided(self._call("POST", ws_path(ws_id, "/approve"), body))

    def cancel(self, ws_id: str, turn_id: str | None = None) -> str:
        """Ask the running turn (or `turn_id`) to stop; the id of the turn asked."""
        return str(
            self._call("POST", ws_path(ws_id, "/cancel"), {"turn_id": turn_id} if turn_id else {})["turn_id"]
        )

    def events(self, ws_id: str, after: int = 0) -> EventStream:
        """Every event after `after` (0: from the first), then live ones, across reconnects."""
        return EventStream(self.base_url, self._token, ws_id, after, self.reconnect_timeout)

    def send_and_wait(
        self,
        ws_id: str,
        message: str,
        on_approval: OnApproval | None = None,
        timeout: float | None = None,
    ) -> TurnResult:
        """Send and follow the turn to its end. `on_approval(item)` decides each call that
        waits for a person: True/False or a Decision (feedback, always). Without it such a
        call raises ApprovalNeededError and the turn stays parked."""
        deadline = None if timeout is None else time.monotonic() + timeout
        after = self.history(ws_id).last_event_id  # read before sending: nothing of the turn is missed
        with self.events(ws_id, after=after) as stream:
            tracker = protocol.TurnTracker(self.send(ws_id, message).turn_id)
            while not tracker.done:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"turn {tracker.turn_id} still running after {timeout} s")
                for item in tracker.feed(stream.next(timeout=left)):
                    self._decide(ws_id, tracker.turn_id, item, on_approval)
        return tracker.result()

    def _decide(self, ws_id: str, turn_id: str, item: ApprovalItem, on_approval: OnApproval | None) -> None:
        if on_approval is None:
            raise ApprovalNeededError(
                f"{item.func_name} call {item.call_id} waits for a decision", turn_id, [item]
            )
        body = protocol.answer_body(on_approval(item), item)
        # decided meanwhile (another client, or `always` covered it): the events say how
        with contextlib.suppress(ConflictError):
            self._call("POST", ws_path(ws_id, "/approve"), body)


def _decided(data: dict[str, Any]) -> DecisionResult:
    return DecisionResult(
        list(data.get("decided") or []), list(data.get("pending") or []), bool(data.get("resumed"))
    )


class EventStream:
    """Iterate a workstream's events; a dropped socket is reconnected after the last id seen
    (for up to `reconnect_timeout` s each time), so nothing is lost or repeated. A refusal
    (bad token, unknown workstream) raises its ApiError; `close()` ends the iteration."""

    def __init__(
        self, base_url: str, token: str | None, ws_id: str, after: int, reconnect_timeout: float
    ) -> None:
        self.base_url = base_url
        self.ws_id = ws_id
        self.cursor = protocol.Cursor(after)
        self.reconnect_timeout = reconnect_timeout
        self.reconnects = 0  # how many times a dropped socket was opened again
        self.on_reconnect: Callable[[int], None] | None = None  # called with the cursor
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._conn: ClientConnection | None = None
        self._closed = False
        self._dropped_at: float | None = None
        self._backoff = protocol.Backoff()
        self._pause = 0.0

    @property
    def last_event_id(self) -> int:
        return self.cursor.last

    @property
    def closed(self) -> bool:
        return self._closed

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return self.next()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()

    def next(self, timeout: float | None = None) -> Event:
        """The next event; TimeoutError when none came within `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._closed:
                raise StopIteration
            conn = self._conn or self._connect(deadline)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                text = conn.recv(timeout=left)
            except builtins.TimeoutError:
                raise TimeoutError(f"no event within {timeout} s") from None
            except (ConnectionClosed, OSError) as exc:
                self._pause = self._backoff.dropped(protocol.close_code(exc))
                self._drop()
                continue
            try:
                event = self.cursor.accept(json.loads(text))
            except ClientError:
                self.close()
                raise
            if event is not None:
                self._backoff.brought()
                return event

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        if self._dropped_at is None:
            self._dropped_at = time.monotonic()

    def _connect(self, deadline: float | None) -> ClientConnection:
        attempt = 0
        if self._pause:  # refused at a cap, or dropping before any event: not at once
            pause, self._pause = self._pause, 0.0
            left = pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic()))
            time.sleep(left)
        while True:
            url = protocol.socket_url(self.base_url, self.ws_id, self.cursor.last)
            try:
                self._conn = connect(
                    url, additional_headers=self._headers, open_timeout=10, max_size=protocol.MAX_FRAME_BYTES
                )
            # a socket closed before its handshake (a web process dying) raises ConnectionClosed
            except (OSError, InvalidHandshake, ConnectionClosed, builtins.TimeoutError) as exc:
                since = self._dropped_at or time.monotonic()
                self._dropped_at = since
                if time.monotonic() - since > self.reconnect_timeout:
                    raise ConnectionError(f"cannot reach {self.base_url}'s event stream: {exc}") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("no event: the event stream is reconnecting") from None
                delays = protocol.RECONNECT_DELAYS
                time.sleep(delays[min(attempt, len(delays) - 1)])
                attempt += 1
                continue
            if self._dropped_at is not None:
                self.reconnects += 1
                self._dropped_at = None
                if self.on_reconnect is not None:
                    self.on_reconnect(self.cursor.last)
            return self._conn
