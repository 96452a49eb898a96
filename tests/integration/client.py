"""What a client author would use: the HTTP API with a token, and a websocket that collects events."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import websocket

Event = dict[str, Any]


class Api:
    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        self.token = token

    def create_workstream(self, **body: Any) -> str:
        r = self.http.post("/v1/api/workstreams", json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["ws_id"])

    def send(self, ws_id: str, message: str) -> str:
        r = self.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": message})
        assert r.status_code == 202, r.text
        return str(r.json()["turn_id"])

    def approve(self, ws_id: str, **body: Any) -> httpx.Response:
        return self.http.post(f"/v1/api/workstreams/{ws_id}/approve", json=body)

    def cancel(self, ws_id: str) -> httpx.Response:
        return self.http.post(f"/v1/api/workstreams/{ws_id}/cancel")

    def workstream(self, ws_id: str) -> dict[str, Any]:
        r = self.http.get(f"/v1/api/workstreams/{ws_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def decision(self, ws_id: str, call_id: str) -> dict[str, Any]:
        """The decision the history records on the result of call `call_id` ({} when none)."""
        (result,) = [m for m in self.history(ws_id) if m["role"] == "tool" and m["tool_call_id"] == call_id]
        return dict(result.get("decision") or {})

    def history(self, ws_id: str) -> list[dict[str, Any]]:
        r = self.http.get(f"/v1/api/workstreams/{ws_id}/history")
        assert r.status_code == 200, r.text
        return list(r.json()["messages"])

    def wait_idle(self, ws_id: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ws = self.workstream(ws_id)
            if (
                ws["state"] in ("idle", "error")
                and ws["active_turn_id"] is None
                and not ws["queued_messages"]
            ):
                return ws
            time.sleep(0.1)
        raise AssertionError(f"workstream {ws_id} still busy: {self.workstream(ws_id)}")


class EventSocket:
    """A websocket on one workstream, collecting every event in a background thread."""

    def __init__(
        self, base_url: str, token: str, ws_id: str, after: int | None = None, token_in: str = "query"
    ) -> None:
        url = base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{ws_id}"
        params = []
        headers = []
        if after is not None:
            params.append(f"after={after}")
        if token_in == "query":
            params.append(f"token={token}")
        else:
            headers.append(f"Authorization: Bearer {token}")
        if params:
            url += "?" + "&".join(params)
        self.conn = websocket.create_connection(url, header=headers, timeout=30)
        self.events: list[Event] = []
        self.replies: list[Event] = []
        self.closed = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                text = self.conn.recv()
                if not text:
                    break
                event = json.loads(text)
                with self._cond:
                    (self.replies if event.get("type") == "reply" else self.events).append(event)
                    self._cond.notify_all()
        except (websocket.WebSocketException, OSError):
            pass
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def send(self, body: dict[str, Any]) -> None:
        self.conn.send(json.dumps(body))

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 30) -> Event:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError(f"no such event; got types {[e.get('type') for e in self.events]}")
                self._cond.wait(left)

    def wait_type(self, type_: str, timeout: float = 30, **fields: Any) -> Event:
        return self.wait_for(
            lambda e: e.get("type") == type_ and all(e.get(k) == v for k, v in fields.items()), timeout
        )

    def wait_reply(self, timeout: float = 10) -> Event:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no reply")
                self._cond.wait(left)
            return self.replies.pop(0)

    def wait_turn_end(self, turn_id: str | None = None, timeout: float = 60) -> Event:
        return self.wait_for(
            lambda e: (
                e.get("type") == "state_change"
                and e.get("state") in ("idle", "error")
                and (turn_id is None or e.get("turn_id") == turn_id)
            ),
            timeout,
        )

    def of_type(self, type_: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e.get("type") == type_]

    def close(self) -> None:
        self.conn.close()


def socket_refusal(base_url: str, ws_id: str, token: str) -> Event:
    """The first frame of a websocket the service refuses: its error event."""
    url = base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{ws_id}?token={token}"
    conn = websocket.create_connection(url, timeout=10)
    try:
        return dict(json.loads(conn.recv()))
    finally:
        conn.close()


def wait_until(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    """`check()`'s first truthy value, asked every 0.1 s for up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what} (last: {last})")
