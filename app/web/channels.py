"""/v1/api/channels: the caller's channel links for notify (list, link, unlink). Targets are
write-only: every answer shows them redacted, to their owner as to anyone."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import BadRequestError, NotFoundError
from app.gateway import channels
from app.settings import MAX_CHANNEL_URL_CHARS, MAX_ID_CHARS, MAX_NAME_CHARS
from app.web.access import principal
from app.web.requests import field, json_body, path_id

channel_api = Blueprint("channels", __name__, url_prefix="/v1/api/channels")
TARGET_KEYS = ("webhook_url", "channel_id", "bot_token_env", "url", "topic")
BODY_KEYS = ("channel_type", "label", *TARGET_KEYS)


def _user_id() -> str | None:
    """The caller's user id; None for the operator, who has no channels (none can be linked to
    no one: `username` targeting needs a user)."""
    return principal().user_id


@channel_api.get("")
def list_channels() -> Any:
    rt = current_app.extensions["runtime"]
    user_id = _user_id()
    links = channels.listed(rt.db, user_id) if user_id is not None else []
    return jsonify(channels=[channels.as_dict(link) for link in links])


@channel_api.post("")
def create_channel() -> Any:
    rt = current_app.extensions["runtime"]
    user_id = _user_id()
    body = json_body()
    if user_id is None:
        raise BadRequestError("channels belong to a user: sign in as one (the operator's token has none)")
    unknown = sorted(str(k)[:100] for k in body if k not in BODY_KEYS)
    if unknown:
        raise BadRequestError(f"{unknown[0]}: unknown field (fields: {', '.join(BODY_KEYS)})", field="body")
    channel_type = field(body, "channel_type", str, required=True, max_chars=40)
    label = (field(body, "label", str, max_chars=MAX_NAME_CHARS) or "").strip()
    given = {k: field(body, k, str, max_chars=MAX_CHANNEL_URL_CHARS) for k in TARGET_KEYS if k in body}
    try:
        target = channels.parse_target(
            channel_type, {k: v for k, v in given.items() if v is not None}, rt.settings.notify
        )
        extra = sorted(set(given) - set(channels.TARGET_FIELDS[channel_type]))
        if extra:
            raise channels.ChannelError(f"{extra[0]}: not a field of a {channel_type} channel", extra[0])
        link = channels.create(rt.db, user_id, channel_type, target, label)
    except channels.ChannelError as exc:
        raise BadRequestError(str(exc), field=exc.field) from None
    return jsonify(channels.as_dict(link)), 201


@channel_api.delete("/<channel_id>")
def delete_channel(channel_id: str) -> Any:
    rt = current_app.extensions["runtime"]
    user_id = _user_id()
    if user_id is None or not channels.remove(rt.db, user_id, path_id("channel", channel_id)):
        raise NotFoundError(f"no channel {channel_id[:MAX_ID_CHARS]!r}")
    return jsonify(deleted=channel_id)
