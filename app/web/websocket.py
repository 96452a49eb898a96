"""The websocket relay: replay after a cursor, then live events; client commands in the other direction."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any

from flask import Flask, current_app, request
from flask_sock import ConnectionClosed, Sock
from wsproto.events import Ping, TextMessage

from app.engine import workstreams
from app.engine.recovery import is_transient
from app.errors import ServiceError, UnauthorizedError
from app.events import EventType, event_time
from app.metrics import recording
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS, SOCKET_REAUTH_SECONDS
from app.users.principal import Principal
from app.web import access, commands, faults
from app.web.access import presented_token
from app.web.fanout import RESYNC, STOP, LiveQueue
from app.web.requests import BadRequestError, field, parse_object, path_id

log = logging.getLogger(__name__)

sock = Sock()

REPLAY_RETRY_SECONDS = 0.5  # a relay's pause between reads of the log while Redis is unreachable
MAX_EVENT_ID = 2**63  # event ids are Redis stream ids: a larger cursor cannot be asked of Redis


def init_app(app: Flask) -> None:
    sock.init_app(app)


@sock.route("/v1/ws/workstreams/<ws_id>")
def workstream_socket(ws: Any, ws_id: str) -> None:
    rt: Runtime = current_app.extensions["runtime"]
    fanout = current_app.extensions["fanout"]
    raw = presented_token() or ""
    try:
        # Nothing else here reads the workstream: its owner is read afresh, so that one deleted
        # through another process is a 404, not a socket that never hears anything.
        rt.owners.forget([ws_id])
        _authorized(rt, raw, access.RULES[access.SOCKET_ENDPOINT], path_id("workstream", ws_id))
        after = _cursor(request.args.get("after"))
    except ServiceError as exc:
        _refuse(ws, exc)
        return
    ws = _SerialSocket(ws)
    live = fanout.subscribe(ws_id)
    stop = threading.Event()
    sender = threading.Thread(target=_relay, args=(ws, rt, ws_id, after, live, stop), daemon=True)
    sender.start()
    checked = pinged = time.monotonic()
    ping_every = rt.settings.socket_ping_seconds
    recording.websocket_opened()
    try:
        while not stop.is_set():
            text = ws.receive(timeout=min(1.0, ping_every))
            if text is not None:
                _command(ws, rt, ws_id, raw, text)
            # A token revoked or expired while the socket is open stops its events too.
            if time.monotonic() - checked >= SOCKET_REAUTH_SECONDS and _still_authorized(rt, raw, ws_id):
                checked = time.monotonic()
            if time.monotonic() - pinged >= ping_every:
                if not ws.ping():  # the last ping went unanswered: the peer is gone
                    ws.close(reason=1008, message="Ping/Pong timeout")
                    break
                pinged = time.monotonic()
    except ServiceError as exc:
        _refuse(ws, exc)
    except ConnectionClosed:
        pass
    finally:
        recording.websocket_closed()
        stop.set()
        live.put({"type": STOP})
        fanout.unsubscribe(ws_id, live)
        sender.join(timeout=2)


def _authorized(rt: Runtime, raw: str, rule: access.Rule, ws_id: str) -> Principal:
    who = access.authorize(rt, rule, {"ws_id": ws_id}, raw=raw)
    assert who is not None  # the socket's rule is not public
    return who


def _refuse(ws: Any, exc: ServiceError) -> None:
    with contextlib.suppress(ConnectionClosed, OSError):
        ws.send(json.dumps({"type": EventType.ERROR, "status": exc.status, "message": exc.message}))
        ws.close(reason=1008, message=exc.message[:100])


class _SerialSocket:
    """Two threads send on one socket (the relay and command replies), and pings go between
    their frames: one whole frame at a time. The library's own `send` hands a frame to
    `socket.send`, which may write only part of it when the client reads slowly; here every
    frame is written whole (`sendall`), under one lock."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._lock = threading.Lock()
        self._ws.pong_received = True  # no ping sent yet

    def send(self, text: str) -> None:
        self._write(TextMessage(data=text))

    def ping(self) -> bool:
        """Ping the client; False (and nothing sent) when it never answered the last ping."""
        if not self._ws.pong_received:
            return False
        self._ws.pong_received = False  # the library's reader sets it again on the pong
        self._write(Ping())
        return True

    def _write(self, event: Any) -> None:
        with self._lock:
            if not self._ws.connected:
                raise ConnectionClosed(self._ws.close_reason, self._ws.close_message)
            self._ws.sock.sendall(self._ws.ws.send(event))

    def receive(self, timeout: float | None = None) -> Any:
        return self._ws.receive(timeout=timeout)

    def close(self, reason: int | None = None, message: str | None = None) -> None:
        with contextlib.suppress(ConnectionClosed, OSError):
            self._ws.close(reason=reason, message=message)


def _cursor(value: str | None) -> int:
    if value in (None, ""):
        return 0
    try:
        cursor = int(value)
    except ValueError:
        raise BadRequestError(
            f"after: expected an event id (integer), got {value!r}", field="after"
        ) from None
    if not 0 <= cursor < MAX_EVENT_ID:
        raise BadRequestError(f"after: must be 0 or more and below {MAX_EVENT_ID}", field="after")
    return cursor


def _relay(ws: Any, rt: Runtime, ws_id: str, after: int, live: LiveQueue, stop: threading.Event) -> None:
    def replay(cursor: int) -> int:
        return _replay_when_redis_answers(ws, rt, ws_id, cursor, stop)

    try:
        last = replay(after)
        while not stop.is_set():
            event = live.get()
            if event["type"] == STOP:
                return
            if event["type"] == RESYNC:
                live.resume()  # live delivery back on before the log is read: nothing falls between
                last = replay(last)
            elif event["id"] == last + 1:
                ws.send(json.dumps(event))
                last = event["id"]
            elif event["id"] > last:
                # Ids of one epoch have no holes: a jump means live delivery missed events (or
                # Redis began a new epoch). The log has them, or says the client must re-read.
                last = replay(last)
            # else: the replay already sent it
    except (ConnectionClosed, OSError):
        pass
    except Exception:  # a relay that dies silently would starve its client: log, close, let it reconnect
        log.exception("websocket relay for %s failed", ws_id)
    finally:
        stop.set()
        ws.close()


def _replay_when_redis_answers(ws: Any, rt: Runtime, ws_id: str, after: int, stop: threading.Event) -> int:
    """`_send_replay`, read again every REPLAY_RETRY_SECONDS while Redis cannot be reached: an
    outage is a pause, the socket stays open (its commands are answered 503) and its events
    follow once Redis is back. `after` when the socket closes meanwhile."""
    warned = False
    while True:
        try:
            return _send_replay(ws, rt, ws_id, after)
        except Exception as exc:
            if not is_transient(exc):
                raise
            if not warned:
                log.warning(
                    "websocket relay for %s: Redis unreachable (%s); reading again", ws_id, type(exc).__name__
                )
                warned = True
        if stop.wait(REPLAY_RETRY_SECONDS):
            return after


def _send_replay(ws: Any, rt: Runtime, ws_id: str, after: int) -> int:
    """Send what the log holds after `after`; the id of the last event sent (the new cursor)."""
    events, truncated = rt.events.replay(ws_id, after)
    last = after
    if truncated:
        ws.send(
            json.dumps(
                {
                    "type": EventType.REPLAY_TRUNCATED,
                    "id": None,
                    "ws_id": ws_id,
                    "turn_id": None,
                    "after": after,
                    "oldest": events[0]["id"] if events else None,
                    "message": "events after your cursor are no longer in the log: re-read the history",
                }
            )
        )
        # Go on from what the log holds; an empty log: from whatever it gets next (a counter read
        # now could already include an event the live queue is about to deliver).
        last = events[0]["id"] - 1 if events else 0
    for event in events:
        if event["id"] > last:
            ws.send(json.dumps(event))
            last = event["id"]
    if truncated:
        # What the log lost may include the event that set the workstream's state (a turn that
        # ended before Redis lost its events): the stored state, so no client waits for it.
        state, turn_id = workstreams.state_now(rt, ws_id)
        ws.send(
            json.dumps(
                {
                    "type": EventType.STATE_CHANGE,
                    "id": None,
                    "ws_id": ws_id,
                    "turn_id": turn_id,
                    "state": state,
                    "current": True,
                    "ts": event_time(),
                }
            )
        )
    return last


def _command(ws: Any, rt: Runtime, ws_id: str, raw: str, text: str | bytes) -> None:
    """A client message: {"type": "send"|"approve"|"cancel", ...}; answered with a `reply`
    carrying the HTTP status and body the same call would have had. Bad input is a 4xx
    reply and the socket stays open; a token no longer valid closes it after the reply."""
    request_id = None
    refused: ServiceError | None = None
    try:
        body = parse_object(text)
        request_id = _request_id(body)
        kind = body.get("type")
        if not isinstance(kind, str) or kind not in access.SOCKET_COMMANDS:
            raise BadRequestError(
                f"type: expected 'send', 'approve' or 'cancel', got {_shown(kind)}", field="type"
            )
        try:  # the token again, each time: it may have been revoked since the socket opened
            who = _authorized(rt, raw, access.Rule(access.SOCKET_COMMANDS[kind], owned=True), ws_id)
        except UnauthorizedError as exc:
            refused = exc
            raise
        if kind == "send":
            status, result = commands.send(rt, ws_id, body)
        elif kind == "approve":
            status, result = commands.approve(rt, ws_id, body, by=who, via="websocket")
        else:
            status, result = commands.cancel_turn(rt, ws_id, body, by=who.name)
    except ServiceError as exc:
        status, result = exc.status, {"error": exc.message, **exc.details}
    except Exception as exc:  # answered as over HTTP (a 503 to retry, or a 500); the socket stays
        status, result = faults.answer(exc)
    ws.send(json.dumps({"type": "reply", "request_id": request_id, "status": status, "body": result}))
    if refused is not None:
        raise refused


def _still_authorized(rt: Runtime, raw: str, ws_id: str) -> bool:
    """The socket's token checked again (a ServiceError when it is no longer good); False when
    the check met a passing fault: the socket stays open and the check is made again shortly."""
    try:
        _authorized(rt, raw, access.RULES[access.SOCKET_ENDPOINT], ws_id)
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("websocket for %s: its token could not be checked again (%s)", ws_id, type(exc).__name__)
        return False
    return True


def _request_id(body: dict[str, Any]) -> str | int | None:
    """Echoed in the reply, so it must survive being sent back: a short string or an integer."""
    value = body.get("request_id")
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53):
        return value
    return str(field(body, "request_id", str, max_chars=MAX_NAME_CHARS))


def _shown(value: Any) -> str:
    return repr(value)[:60] if isinstance(value, str | int | float | bool | None) else type(value).__name__
