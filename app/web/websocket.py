"""The websocket route: authorize an upgrade, answer 101 and hand the connection to this
process's hub (app/web/sockets/); and the synchronous work the hub runs on its pool: reading
the log after a cursor, a client's commands, a token checked again."""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from werkzeug.routing import WebsocketMismatch

from app.engine.life import workstreams
from app.engine.running.recovery import is_transient
from app.errors import ServiceError, UnauthorizedError, check_text
from app.events import EventType, event_time
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS, SOCKET_REAUTH_SECONDS
from app.users import tokens
from app.users.principal import Principal
from app.web import access, commands, faults, shapes
from app.web.access import presented_token
from app.web.contract import AUTH_QUERY, json_type, parse
from app.web.requests import BadRequestError, parse_object, path_id
from app.web.sockets import handover
from app.web.sockets.hub import Hub, Limits

log = logging.getLogger(__name__)

sockets = Blueprint("sockets", __name__)

MAX_EVENT_ID = 2**63  # event ids are Redis stream ids: a larger cursor cannot be asked of Redis
HUB = "websocket_hub"  # the app's extension holding its Hub
NOT_AN_UPGRADE = "this URL is a websocket: open it with a websocket upgrade (docs/events.md)"


def init_app(app: Flask, rt: Runtime) -> None:
    settings = rt.settings
    limits = Limits(
        ping_seconds=settings.socket_ping_seconds,
        reauth_seconds=SOCKET_REAUTH_SECONDS,
        max_unsent=settings.socket_max_unsent_bytes,
        max_message=settings.max_body_bytes,
        per_principal=settings.sockets_per_principal,
        per_process=settings.sockets_per_process,
    )
    app.extensions[HUB] = Hub(settings.redis_url, Work(rt), limits)
    app.register_blueprint(sockets)
    app.register_error_handler(WebsocketMismatch, lambda _exc: (jsonify({"error": NOT_AN_UPGRADE}), 400))


@sockets.route("/v1/ws/workstreams/<ws_id>", websocket=True)
def workstream_socket(ws_id: str) -> Any:
    key = request.headers.get("Sec-WebSocket-Key")
    upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
    if not upgrade or not handover.is_valid_key(key):
        return jsonify({"error": NOT_AN_UPGRADE}), 400
    rt: Runtime = current_app.extensions["runtime"]
    raw = presented_token() or ""
    opening = handover.Opening(ws_id=ws_id, raw_token=raw, who=None, after=0)
    try:
        # Nothing else here reads the workstream: its owner is read afresh, so that one deleted
        # through another process is a 404, not a socket that never hears anything.
        rt.owners.forget([ws_id])
        opening.who = _authorized(rt, raw, access.RULES[access.SOCKET_ENDPOINT], path_id("workstream", ws_id))
        opening.after = _cursor(request.args.get("after"))
        _only_known_query()
    except ServiceError as exc:
        opening.refused = exc  # told over the socket, as clients expect (docs/events.md)
    if not handover.offer(opening):
        return jsonify({"error": "websockets are served only by the service's web worker (Procfile)"}), 501
    assert key is not None
    return Response(
        status=101,
        headers={
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Accept": handover.accept_key(key),
        },
    )


def hub_of(app: Flask) -> Hub:
    hub: Hub = app.extensions[HUB]
    return hub


def _authorized(rt: Runtime, raw: str, rule: access.Rule, ws_id: str) -> Principal:
    who = access.authorize(rt, rule, {"ws_id": ws_id}, raw=raw)
    assert who is not None  # the socket's rule is not public
    return who


def _only_known_query() -> None:
    known = set(shapes.SocketQuery.model_fields) | AUTH_QUERY
    unknown = sorted(set(request.args) - known)
    if unknown:
        name = unknown[0][:100]
        raise BadRequestError(f"{name}: unknown query parameter (parameters: after, token)", field=name)


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


class Work:
    """What the hub runs off its loop, on its pool of threads."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def replay(self, ws_id: str, after: int) -> tuple[list[str], int, bool]:
        """The frames the log holds after `after`, and the new cursor; (nothing, `after`, False)
        while Redis cannot be reached (the socket stays open; the hub reads again shortly)."""
        try:
            return (*_replay_frames(self.rt, ws_id, after), True)
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning(
                "websocket relay for %s: Redis unreachable (%s); reading again", ws_id, type(exc).__name__
            )
            return [], after, False

    def command(self, ws_id: str, raw: str, text: str | bytes) -> tuple[str, tuple[int, str] | None]:
        """The reply to a client's message; and, when its token is no longer good, the status
        and message it is refused with (the socket is closed after the reply)."""
        return _command(self.rt, ws_id, raw, text)

    def recheck(self, raw: str, ws_ids: set[str]) -> dict[str, tuple[int, str] | None]:
        """For each workstream a token's sockets follow: None while it may still, else the
        status and message it is refused with. A passing fault refuses nothing."""
        rule = access.RULES[access.SOCKET_ENDPOINT]
        try:
            who = tokens.authenticate(self.rt, raw)
            if rule.scope is not None:
                access.require_scope(who, rule.scope)
        except ServiceError as exc:
            return dict.fromkeys(ws_ids, (exc.status, exc.message))
        except Exception as exc:
            return _passing(exc, ws_ids)
        verdicts: dict[str, tuple[int, str] | None] = {}
        for ws_id in ws_ids:
            try:
                access.check_owned(self.rt, who, {"ws_id": ws_id})
                verdicts[ws_id] = None
            except ServiceError as exc:
                verdicts[ws_id] = (exc.status, exc.message)
            except Exception as exc:
                verdicts.update(_passing(exc, {ws_id}))
        return verdicts


def _passing(exc: Exception, ws_ids: set[str]) -> dict[str, tuple[int, str] | None]:
    if not is_transient(exc):
        raise exc
    log.warning("websockets: a token could not be checked again (%s)", type(exc).__name__)
    return dict.fromkeys(ws_ids)


def _replay_frames(rt: Runtime, ws_id: str, after: int) -> tuple[list[str], int]:
    """What the log holds after `after` as frames, and the id of the last (the new cursor)."""
    events, truncated = rt.events.replay(ws_id, after)
    frames: list[str] = []
    last = after
    if truncated:
        frames.append(
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
        # now could already include an event the live channel is about to deliver).
        last = events[0]["id"] - 1 if events else 0
    for event in events:
        if event["id"] > last:
            frames.append(json.dumps(event))
            last = event["id"]
    if truncated:
        # What the log lost may include the event that set the workstream's state (a turn that
        # ended before Redis lost its events): the stored state, so no client waits for it.
        state, turn_id = workstreams.state_now(rt, ws_id)
        frames.append(
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
    return frames, last


def _command(rt: Runtime, ws_id: str, raw: str, text: str | bytes) -> tuple[str, tuple[int, str] | None]:
    """A client message: {"type": "send"|"approve"|"cancel", ...}; answered with a `reply`
    carrying the HTTP status and body the same call would have had. Bad input is a 4xx
    reply and the socket stays open; a token no longer valid closes it after the reply."""
    request_id = None
    refused: tuple[int, str] | None = None
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
            refused = (exc.status, exc.message)
            raise
        fields = {k: v for k, v in body.items() if k not in ("type", "request_id")}
        if kind == "send":
            status, result = commands.send(rt, ws_id, parse(shapes.Send, fields))
        elif kind == "approve":
            decision = parse(shapes.Approve, fields)
            status, result = commands.approve(rt, ws_id, decision, by=who, via="websocket")
        else:
            status, result = commands.cancel_turn(rt, ws_id, parse(shapes.Cancel, fields), by=who.name)
    except ServiceError as exc:
        status, result = exc.status, {"error": exc.message, **exc.details}
    except Exception as exc:  # answered as over HTTP (a 503 to retry, or a 500); the socket stays
        status, result = faults.answer(exc)
    reply = json.dumps({"type": "reply", "request_id": request_id, "status": status, "body": result})
    return reply, refused


def _request_id(body: dict[str, Any]) -> str | int | None:
    """Echoed in the reply, so it must survive being sent back: a short string or an integer."""
    value = body.get("request_id")
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53):
        return value
    if not isinstance(value, str):
        raise BadRequestError(
            f"request_id: expected string or integer, got {json_type(value)}", field="request_id"
        )
    check_text("request_id", value, MAX_NAME_CHARS)
    return value


def _shown(value: Any) -> str:
    return repr(value)[:60] if isinstance(value, str | int | float | bool | None) else type(value).__name__
