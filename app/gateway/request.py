"""What a notification asks for, checked once for both sides: the tool's arguments and the
gateway's request body. Every refusal is a `RequestError` whose message names the field."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from app.gateway.channels import DISCORD_ID
from app.settings import USER_NAME_PATTERN
from app.storage.types import storable

NOTIFY_MAX_MESSAGE_CHARS = 2000  # the spec's; Discord's own limit for a message's content
NOTIFY_MAX_TITLE_CHARS = 200

DIRECT_TYPES = ("discord",)  # channel_type for direct targeting, as the spec lists
FIELDS = ("message", "title", "username", "channel_type", "channel_id")
USER_NAME = re.compile(USER_NAME_PATTERN)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class RequestError(ValueError):
    pass


@dataclass(frozen=True)
class NotifyRequest:
    message: str
    title: str | None = None
    username: str | None = None
    channel_type: str | None = None
    channel_id: str | None = None

    @classmethod
    def parse(cls, raw: bytes) -> NotifyRequest:
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            raise RequestError("the body must be a JSON object") from None
        if not isinstance(body, dict):
            raise RequestError("the body must be a JSON object")
        return cls.from_fields(body)

    @classmethod
    def from_fields(cls, given: dict[str, Any]) -> NotifyRequest:
        unknown = sorted(str(k)[:40] for k in given if k not in FIELDS)
        if unknown:
            raise RequestError(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(FIELDS)}")
        message = _text(given, "message", NOTIFY_MAX_MESSAGE_CHARS)
        if message is None or not message.strip():
            raise RequestError("'message' is required: the notification's text")
        title = _text(given, "title", NOTIFY_MAX_TITLE_CHARS)
        if title is not None and CONTROL.search(title):
            raise RequestError("'title' must be one line without control characters")
        title = title.strip() or None if title is not None else None
        wanted = cls(message, title, *_target(given))
        if len(wanted.rendered) > NOTIFY_MAX_MESSAGE_CHARS:
            raise RequestError(
                f"the title and message together are {len(wanted.rendered)} characters; "
                f"the limit is {NOTIFY_MAX_MESSAGE_CHARS}"
            )
        return wanted

    @property
    def rendered(self) -> str:
        return f"**{self.title}**\n{self.message}" if self.title else self.message

    @property
    def target(self) -> str:
        return f"user {self.username}" if self.username else f"{self.channel_type} channel {self.channel_id}"

    def as_body(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _target(given: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    # An empty string is an absent field: models fill optional parameters with "".
    username = _text(given, "username", 64) or None
    channel_type = _text(given, "channel_type", 40) or None
    channel_id = _text(given, "channel_id", 40) or None
    direct = channel_type is not None or channel_id is not None
    if username is not None and direct:
        raise RequestError("give either 'username' or 'channel_type' with 'channel_id', not both")
    if username is None and not direct:
        raise RequestError("give a recipient: 'username', or 'channel_type' with 'channel_id'")
    if username is not None:
        if not USER_NAME.fullmatch(username):
            raise RequestError(f"'username' {username[:64]!r} is not a user name")
        return username, None, None
    if channel_type not in DIRECT_TYPES:
        raise RequestError(f"'channel_type' must be one of {', '.join(DIRECT_TYPES)}")
    if channel_id is None or not DISCORD_ID.fullmatch(channel_id):
        raise RequestError("'channel_id' must be a Discord channel id (digits) with 'channel_type'")
    return None, channel_type, channel_id


def _text(given: dict[str, Any], key: str, limit: int) -> str | None:
    value = given.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RequestError(f"'{key}' must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise RequestError(f"'{key}' must not contain a NUL character")
    if storable(value) != value:
        raise RequestError(f"'{key}' contains a lone surrogate (not valid Unicode)")
    if len(value) > limit:
        raise RequestError(f"'{key}' is {len(value)} characters; the limit is {limit}")
    return value
