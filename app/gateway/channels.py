"""Users' channel links: the kinds, what each needs, how it is shown (redacted), how it is stored.

A Discord link is a webhook URL (under `[notify] discord_api_base`, so nothing else is reached
with it) or a channel id for the gateway's bot; a webhook link any http(s) URL the SSRF guard
allows; an ntfy link a topic under `[notify] ntfy_base_url`. Webhook URLs and topics are secrets.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlmodel import col, delete, func, select

from app.settings import DISCORD_BOT_TOKEN_ENV, MAX_CHANNEL_URL_CHARS, NotifySettings
from app.storage.database import Database
from app.storage.models import ChannelLink, User
from app.tools.web.fetch.errors import FetchError
from app.tools.web.fetch.fetcher import system_resolver
from app.tools.web.fetch.guard import Target, parse_url, screen

MAX_CHANNELS_PER_USER = 20

TYPES = ("discord", "webhook", "ntfy")
TARGET_FIELDS = {
    "discord": ("webhook_url", "channel_id", "bot_token_env"),
    "webhook": ("url",),
    "ntfy": ("topic",),
}
DISCORD_ID = re.compile(r"[0-9]{1,25}")  # a snowflake
DISCORD_WEBHOOK_PATH = re.compile(r"/webhooks/([0-9]{1,25})/([A-Za-z0-9_.-]{1,200})")
NTFY_TOPIC = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A bot link may name another bot's token variable in the gateway's environment, but only one of
# these (never DATABASE_URL, say): the token itself is never stored.
BOT_TOKEN_ENV_NAME = re.compile(re.escape(DISCORD_BOT_TOKEN_ENV) + r"(_[A-Z0-9_]{1,40})?")
HIDDEN = "…"


class ChannelError(ValueError):
    """A channel's target is not usable; the message says which field and why."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def parse_target(channel_type: str, given: dict[str, Any], settings: NotifySettings) -> dict[str, str]:
    """The stored target for a link of `channel_type` from the fields given (strings, checked)."""
    if channel_type not in TYPES:
        raise ChannelError(f"channel_type: must be one of {', '.join(TYPES)}", "channel_type")
    if channel_type == "discord":
        return _discord(given, settings)
    if channel_type == "webhook":
        return {"url": check_webhook_url(_required(given, "url"), settings)}
    topic = _required(given, "topic")
    if not NTFY_TOPIC.fullmatch(topic):
        raise ChannelError("topic: 1-64 letters, digits, '-' or '_'", "topic")
    return {"topic": topic}


def _discord(given: dict[str, Any], settings: NotifySettings) -> dict[str, str]:
    webhook: str | None = given.get("webhook_url")
    channel: str | None = given.get("channel_id")
    if (webhook is None) == (channel is None):
        raise ChannelError(
            "a discord channel needs either webhook_url or channel_id (not both)", "webhook_url"
        )
    bot_env: str | None = given.get("bot_token_env")
    if channel is not None:
        if not DISCORD_ID.fullmatch(channel):
            raise ChannelError("channel_id: a Discord channel id (digits)", "channel_id")
        if bot_env is not None and not BOT_TOKEN_ENV_NAME.fullmatch(bot_env):
            raise ChannelError(
                f"bot_token_env: {DISCORD_BOT_TOKEN_ENV} or {DISCORD_BOT_TOKEN_ENV}_NAME", "bot_token_env"
            )
        return {"channel_id": channel, **({"bot_token_env": bot_env} if bot_env else {})}
    if bot_env is not None:
        raise ChannelError("bot_token_env: only with channel_id (a webhook needs no bot)", "bot_token_env")
    assert webhook is not None
    prefix = settings.discord_api_base + "/"
    match = (
        DISCORD_WEBHOOK_PATH.fullmatch("/" + webhook[len(prefix) :]) if webhook.startswith(prefix) else None
    )
    if match is None:
        raise ChannelError(f"webhook_url: a Discord webhook URL, {prefix}webhooks/ID/TOKEN", "webhook_url")
    return {"webhook_url": webhook}


def check_webhook_url(url: str, settings: NotifySettings) -> str:
    """`url` when it is http(s) and its host is one the SSRF guard lets the gateway reach."""
    screen_webhook(url, settings)
    return url


def screen_webhook(url: str, settings: NotifySettings) -> Target:
    """The guard's verdict on a webhook URL: its host's checked addresses, to connect to those."""
    if len(url) > MAX_CHANNEL_URL_CHARS:
        raise ChannelError(f"url: at most {MAX_CHANNEL_URL_CHARS} characters", "url")
    try:
        return screen(parse_url(url), system_resolver, settings.allow_private_network)
    except FetchError as exc:
        raise ChannelError(f"url: {exc}", "url") from None


def _required(given: dict[str, Any], key: str) -> str:
    value = given.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ChannelError(f"{key}: required", key)
    return value.strip()


def redacted(link: ChannelLink) -> str:
    """What a person may be shown of a target: enough to tell links apart, no token or topic."""
    target = link.target
    if "channel_id" in target:
        bot = f" ({target['bot_token_env']})" if "bot_token_env" in target else ""
        return f"bot channel {target['channel_id']}{bot}"
    if "webhook_url" in target:
        match = DISCORD_WEBHOOK_PATH.search(target["webhook_url"])
        return f"webhook {match.group(1) if match else ''}/{HIDDEN}"
    if "url" in target:
        url = parse_url(target["url"])
        return f"{url.scheme}://{url.host}{':' + str(url.port) if url.port else ''}/{HIDDEN}"
    return f"topic {target.get('topic', '')[:2]}{HIDDEN}"


def as_dict(link: ChannelLink) -> dict[str, Any]:
    return {
        "id": link.id,
        "channel_type": link.channel_type,
        "label": link.label,
        "target": redacted(link),
        "created_at": link.created_at.isoformat(),
    }


# -- storage ------------------------------------------------------------------------------------


def listed(db: Database, user_id: str) -> list[ChannelLink]:
    with db.reader() as s:
        query = (
            select(ChannelLink).where(ChannelLink.user_id == user_id).order_by(col(ChannelLink.created_at))
        )
        return list(s.exec(query).all())


def create(db: Database, user_id: str, channel_type: str, target: dict[str, str], label: str) -> ChannelLink:
    link = ChannelLink(
        id=uuid.uuid4().hex, user_id=user_id, channel_type=channel_type, target=target, label=label
    )
    with db.session() as s:
        # the user's row, locked on PostgreSQL, so that two creates cannot both pass the count
        s.exec(select(User.id).where(User.id == user_id).with_for_update()).first()
        count = s.exec(select(func.count(col(ChannelLink.id))).where(ChannelLink.user_id == user_id)).one()
        if count >= MAX_CHANNELS_PER_USER:
            raise ChannelError(f"at most {MAX_CHANNELS_PER_USER} channels per user", "channel_type")
        s.add(link)
    return link


def remove(db: Database, user_id: str, link_id: str) -> bool:
    with db.session() as s:
        gone = s.exec(
            delete(ChannelLink).where(col(ChannelLink.id) == link_id, col(ChannelLink.user_id) == user_id)
        )
        return bool(gone.rowcount)


def of_username(db: Database, username: str) -> list[ChannelLink] | None:
    """The links of the user so named; None when there is no such (enabled) user."""
    with db.reader() as s:
        user = s.exec(select(User).where(User.name == username, col(User.disabled_at).is_(None))).first()
        if user is None:
            return None
        query = (
            select(ChannelLink).where(ChannelLink.user_id == user.id).order_by(col(ChannelLink.created_at))
        )
        return list(s.exec(query).all())
