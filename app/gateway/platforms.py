"""Posting one notification to one channel: Discord (webhook or bot), a JSON webhook, ntfy.

A failure is a `DeliveryError` whose message names the channel and the status, never the URL,
the topic or a token (they are secrets, and an httpx error would quote the URL).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import httpx

from app.gateway.channels import BOT_TOKEN_ENV_NAME, ChannelError, screen_webhook
from app.settings import DISCORD_BOT_TOKEN_ENV, NotifySettings
from app.tools.web.fetch.transport import PinnedTransport

USER_AGENT = "turnstone-jobs/0.1 (channel gateway)"


class DeliveryError(Exception):
    """One channel was not reached; `is_config` when trying again cannot help (no bot token)."""

    def __init__(self, message: str, is_config: bool = False) -> None:
        super().__init__(message)
        self.is_config = is_config


@dataclass(frozen=True)
class Note:
    message: str
    title: str | None = None

    @property
    def text(self) -> str:
        """Markdown with the title as a bold first line (Discord, the webhook's `text`)."""
        return f"**{self.title}**\n{self.message}" if self.title else self.message


def deliver(
    client: httpx.Client, settings: NotifySettings, channel_type: str, target: dict, note: Note
) -> None:
    if channel_type == "discord" and "webhook_url" in target:
        _post(client, "discord webhook", target["webhook_url"], json={"content": note.text})
    elif channel_type == "discord":
        token = _bot_token(settings, target.get("bot_token_env"))
        url = f"{settings.discord_api_base}/v10/channels/{target['channel_id']}/messages"
        headers = {"Authorization": f"Bot {token}"}
        _post(
            client,
            f"discord channel {target['channel_id']}",
            url,
            json={"content": note.text},
            headers=headers,
        )
    elif channel_type == "webhook":
        try:
            screened = screen_webhook(target["url"], settings)  # again: its host may resolve elsewhere now
        except ChannelError as exc:
            raise DeliveryError(f"webhook refused: {exc}", is_config=True) from None
        body = {"title": note.title, "message": note.message, "text": note.text}
        # to the addresses just checked, never a second lookup's (DNS rebinding)
        pinned = httpx.Client(
            transport=PinnedTransport(screened.addresses), timeout=client.timeout, trust_env=False
        )
        with pinned:
            _post(pinned, "webhook", target["url"], json=body)
    elif channel_type == "ntfy":
        headers = {"Title": _header_text(note.title)} if note.title else {}
        _post(
            client,
            "ntfy topic",
            f"{settings.ntfy_base_url}/{target['topic']}",
            content=note.message,
            headers=headers,
        )
    else:
        raise DeliveryError(f"unknown channel type {channel_type!r}", is_config=True)


def _header_text(text: str) -> str:
    """A header value as ntfy reads it: ASCII as is, anything else RFC 2047 encoded."""
    if text.isascii() and text.isprintable():
        return text
    return "=?UTF-8?B?" + base64.b64encode(text.encode()).decode() + "?="


def _bot_token(settings: NotifySettings, env_name: str | None) -> str:
    if env_name and env_name != DISCORD_BOT_TOKEN_ENV and BOT_TOKEN_ENV_NAME.fullmatch(env_name):
        token = settings.discord_bot_tokens.get(env_name)
    else:
        token = settings.discord_bot_token
    if not token:
        raise DeliveryError(
            f"the gateway has no Discord bot token ({env_name or DISCORD_BOT_TOKEN_ENV})", is_config=True
        )
    return token


def _post(client: httpx.Client, what: str, url: str, **kwargs: object) -> None:
    headers = {"User-Agent": USER_AGENT, **(kwargs.pop("headers", None) or {})}  # type: ignore[dict-item]
    try:
        response = client.post(url, headers=headers, follow_redirects=False, **kwargs)  # type: ignore[arg-type]
    except httpx.TimeoutException:
        raise DeliveryError(f"{what}: timed out") from None
    except httpx.HTTPError as exc:
        raise DeliveryError(f"{what}: {type(exc).__name__}") from None
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"{what}: HTTP {response.status_code}")
