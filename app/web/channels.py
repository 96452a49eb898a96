"""/v1/api/channels: the caller's channel links for notify (list, link, unlink). Targets are
write-only: every answer shows them redacted, to their owner as to anyone."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import BadRequestError, NotFoundError, UnprocessableError
from app.gateway import channels
from app.settings import MAX_ID_CHARS
from app.web import shapes
from app.web.access import principal
from app.web.contract import operation
from app.web.requests import path_id

channel_api = Blueprint("channels", __name__, url_prefix="/v1/api/channels")
TARGET_KEYS = ("webhook_url", "channel_id", "bot_token_env", "url", "topic")


def _user_id() -> str | None:
    """The caller's user id; None for the operator, who has no channels (none can be linked to
    no one: `username` targeting needs a user)."""
    return principal().user_id


@channel_api.get("")
@operation("The caller's channel links, targets redacted", answers={200: shapes.ChannelList})
def list_channels() -> Any:
    rt = current_app.extensions["runtime"]
    user_id = _user_id()
    links = channels.listed(rt.db, user_id) if user_id is not None else []
    return jsonify(channels=[channels.as_dict(link) for link in links])


@channel_api.post("")
@operation(
    "Link a channel for notify (docs/notify.md): its target is write-only",
    body=shapes.NewChannel,
    answers={201: shapes.Channel},
    errors={409: "The caller has as many channels as a user may"},
    examples={"ntfy": {"channel_type": "ntfy", "topic": "my-builds", "label": "phone"}},
)
def create_channel(body: shapes.NewChannel) -> Any:
    rt = current_app.extensions["runtime"]
    user_id = _user_id()
    if user_id is None:
        raise BadRequestError("channels belong to a user: sign in as one (the operator's token has none)")
    channel = body.root
    channel_type = channel.channel_type
    label = (channel.label or "").strip()
    given = {k: v for k, v in channel.given().items() if k in TARGET_KEYS}
    try:
        target = channels.parse_target(
            channel_type, {k: v for k, v in given.items() if v is not None}, rt.settings.notify
        )
        extra = sorted(set(given) - set(channels.TARGET_FIELDS[channel_type]))
        if extra:
            raise channels.ChannelError(f"{extra[0]}: not a field of a {channel_type} channel", extra[0])
        link = channels.create(rt.db, user_id, channel_type, target, label)
    except channels.ChannelError as exc:
        raise UnprocessableError(str(exc), field=exc.field) from None
    return jsonify(channels.as_dict(link)), 201


@channel_api.delete("/<channel_id>")
@operation("Unlink a channel", answers={200: shapes.ChannelDeleted})
def delete_channel(channel_id: str) -> Any:
    rt = current_app.extensions["runtime"]
    user_id = _user_id()
    if user_id is None or not channels.remove(rt.db, user_id, path_id("channel", channel_id)):
        raise NotFoundError(f"no channel {channel_id[:MAX_ID_CHARS]!r}")
    return jsonify(deleted=channel_id)
