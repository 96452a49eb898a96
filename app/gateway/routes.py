"""The gateway's HTTP surface: `POST /v1/api/notify` (service JWT only) and `GET /health`."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from app.gateway import channels, tokens
from app.gateway.request import NotifyRequest, RequestError
from app.settings import NOTIFY_CONNECT_TIMEOUT_SECONDS, NotifySettings
from app.storage.database import Database

DELIVERY_TIMEOUT_SECONDS = 10.0  # the gateway's one post to a platform

gateway = Blueprint("gateway", __name__)


def _db() -> Database:
    return current_app.extensions["gateway_db"]


def _settings() -> NotifySettings:
    return current_app.extensions["notify_settings"]


def _error(status: int, message: str) -> Any:
    response = jsonify(error=message)
    response.status_code = status
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="turnstone-channel"'
    return response


@gateway.get("/health")
def health() -> Any:
    beat = current_app.extensions["heartbeat"]
    return jsonify(status="ok", service_id=beat.service_id if beat else None)


@gateway.post("/v1/api/notify")
def notify() -> Any:
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else None
    try:
        tokens.verify(tokens.service_secret(_db(), _settings()), token)
    except tokens.TokenError as exc:
        return _error(401, str(exc))
    try:
        wanted = NotifyRequest.parse(request.get_data(cache=False))
    except RequestError as exc:
        return _error(400, str(exc))
    targets = _targets(wanted)
    if isinstance(targets, str):
        return _error(404, targets)
    return _deliver_all(wanted, targets)


def _targets(wanted: NotifyRequest) -> list[tuple[str, str, dict[str, str]]] | str:
    """(name, type, target) of each channel to post to; a message when there is none."""
    if wanted.username is None:
        return [(f"discord channel {wanted.channel_id}", "discord", {"channel_id": str(wanted.channel_id)})]
    links = channels.of_username(_db(), wanted.username)
    if links is None:
        return f"no user named {wanted.username!r}"
    if not links:
        return f"user {wanted.username!r} has linked no channels"
    return [(_name(link), link.channel_type, link.target) for link in links]


def _name(link: Any) -> str:
    return (
        f"{link.channel_type} '{link.label}'"
        if link.label
        else f"{link.channel_type} ({channels.redacted(link)})"
    )


def _deliver_all(wanted: NotifyRequest, targets: list[tuple[str, str, dict[str, str]]]) -> Any:
    # httpx (and the console libraries it brings) at the first delivery: an idle gateway, as a
    # local run keeps one whether or not anyone is notified, does without its ~8 MiB.
    import httpx

    from app.gateway.platforms import DeliveryError, Note, deliver

    note = Note(wanted.message, wanted.title)
    delivered: list[str] = []
    failed: list[dict[str, str]] = []
    config_only = True
    timeout = httpx.Timeout(DELIVERY_TIMEOUT_SECONDS, connect=NOTIFY_CONNECT_TIMEOUT_SECONDS)
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        for name, channel_type, target in targets:
            try:
                deliver(client, _settings(), channel_type, target, note)
                delivered.append(name)
            except DeliveryError as exc:
                failed.append({"channel": name, "error": str(exc)})
                config_only = config_only and exc.is_config
    body = {"delivered": delivered, "failed": failed}
    if delivered:
        return jsonify(body)
    # Nothing reached: a platform that failed may answer next time (502, the caller retries);
    # a channel that cannot work as configured will not (422, it does not).
    return jsonify({**body, "error": "no channel was reached"}), 422 if config_only else 502
