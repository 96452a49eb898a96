"""The notify tool: a message to a person's linked channels, or to a Discord channel, through the
channel gateway (app/gateway). Auto-approved; at most 5 successful notifications per turn."""

from __future__ import annotations

from typing import Any

from app.gateway import client, quota
from app.gateway.request import NotifyRequest, RequestError
from app.settings import NOTIFY_MAX_PER_TURN
from app.tools.base import Preparation, ToolContext, ToolOutcome
from app.tools.environment import redact
from app.users import permits

PREVIEW_CHARS = 300


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    try:
        wanted = NotifyRequest.from_fields(args)
    except RequestError as exc:
        return Preparation(dict(args), "notify", needs_approval=False, error=f"Error: {exc}")
    return Preparation(
        wanted.as_body(), f"notify {wanted.target}", wanted.rendered[:PREVIEW_CHARS], needs_approval=False
    )


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None or ctx.turn_id is None:
        return ToolOutcome("Error: notify needs the service (its storage and a turn)", True)
    wanted = NotifyRequest.from_fields(args)
    owner = ctx.workstream.owner_id if ctx.workstream is not None else None
    if wanted.username is not None and not permits.may_notify(ctx.db, owner, wanted.username):
        return ToolOutcome(_not_permitted(wanted.username), True)
    settings = ctx.settings.notify
    slot = quota.take(ctx.db, ctx.turn_id, ctx.call_id, client.longest_send(settings), ctx.is_cancelled)
    if isinstance(slot, quota.Full):
        return ToolOutcome(_refusal(slot), True)
    outcome = client.send(ctx.db, settings, wanted, is_cancelled=ctx.is_cancelled)
    if not outcome.ok:
        quota.give_back(ctx.db, ctx.turn_id, slot)
        tries = f"{outcome.attempts} attempt{'s' if outcome.attempts > 1 else ''}"
        return ToolOutcome(_scrub(f"Error: notification not sent after {tries}: {outcome.reason}", ctx), True)
    quota.confirm(ctx.db, ctx.turn_id, slot)
    lines = [f"Notification sent to {wanted.target} via {', '.join(outcome.delivered)} "
             f"({quota.sent(ctx.db, ctx.turn_id)} of {NOTIFY_MAX_PER_TURN} this turn)."]  # fmt: skip
    if outcome.failed:
        lines.append("Not reached: " + "; ".join(outcome.failed))
    return ToolOutcome(_scrub("\n".join(lines), ctx))


def _not_permitted(username: str) -> str:
    # The same words whether or not the user exists: a model cannot probe for names.
    return (
        f"Error: notify reaches your own channels; user {username!r} has not allowed notifications "
        "from your workstreams (they may, with PUT /v1/api/me/notify-from); not sent"
    )


def _refusal(full: quota.Full) -> str:
    limit = f"Error: notify is limited to {NOTIFY_MAX_PER_TURN} successful notifications per turn"
    if not full.unsettled:
        return f"{limit}, and this turn has sent {full.sent}; not sent"
    if full.unsettled == 1:
        unknown = "1 more did not finish (it may have gone out)"
    else:
        unknown = f"{full.unsettled} more did not finish (they may have gone out)"
    return f"{limit}; this turn has sent {full.sent}, and {unknown}; not sent"


def _scrub(text: str, ctx: ToolContext) -> str:
    settings = ctx.settings.notify
    secrets = [settings.service_secret, settings.discord_bot_token, *settings.discord_bot_tokens.values()]
    return redact(text, [s for s in secrets if s])
