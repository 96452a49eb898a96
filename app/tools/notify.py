"""The notify tool: a message to a person's linked channels, or to a Discord channel, through the
channel gateway (app/gateway). Auto-approved; at most MAX_PER_TURN successful notifications per turn.

The per-turn limit is kept in slots: a slot is a row (turn, slot number) taken before the
gateway is asked, marked sent (`sent_at`) when the notification went out and deleted when every
attempt failed. The unique (turn_id, slot) settles parallel calls of one batch, so no more than
the limit can ever be sent, and the rows outlive any worker, so a restarted worker counts what
was sent before it.

A call that finds every slot taken while some are still being sent waits for those to settle
before it decides: it is refused because the turn really sent its notifications, or, when a
send outlived the longest a send can take (its worker stopped), it says that outcome is unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, func, select

from app.gateway import client
from app.gateway.request import NotifyRequest, RequestError
from app.storage.database import Database
from app.storage.models import Notification, utcnow
from app.tools.commands.environment import redact
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.users import permits

PREVIEW_CHARS = 300
MAX_PER_TURN = 5  # successful notifications; failed ones do not count
SETTLE_POLL_SECONDS = 0.25  # between looks at slots still being sent


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
    slot = take(ctx.db, ctx.turn_id, ctx.call_id, client.longest_send(settings), ctx.is_cancelled)
    if isinstance(slot, Full):
        return ToolOutcome(_refusal(slot), True)
    outcome = client.send(ctx.db, settings, wanted, is_cancelled=ctx.is_cancelled)
    if not outcome.ok:
        give_back(ctx.db, ctx.turn_id, slot)
        tries = f"{outcome.attempts} attempt{'s' if outcome.attempts > 1 else ''}"
        return ToolOutcome(_scrub(f"Error: notification not sent after {tries}: {outcome.reason}", ctx), True)
    confirm(ctx.db, ctx.turn_id, slot)
    lines = [f"Notification sent to {wanted.target} via {', '.join(outcome.delivered)} "
             f"({sent(ctx.db, ctx.turn_id)} of {MAX_PER_TURN} this turn)."]  # fmt: skip
    if outcome.failed:
        lines.append("Not reached: " + "; ".join(outcome.failed))
    return ToolOutcome(_scrub("\n".join(lines), ctx))


def _not_permitted(username: str) -> str:
    # The same words whether or not the user exists: a model cannot probe for names.
    return (
        f"Error: notify reaches your own channels; user {username!r} has not allowed notifications "
        "from your workstreams (they may, with PUT /v1/api/me/notify-from); not sent"
    )


def _refusal(full: Full) -> str:
    limit = f"Error: notify is limited to {MAX_PER_TURN} successful notifications per turn"
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


# A turn's slots.


@dataclass(frozen=True)
class Full:
    """Every slot of the turn is taken: `sent` went out, `unsettled` did not finish in time."""

    sent: int
    unsettled: int


def take(
    db: Database,
    turn_id: str,
    call_id: str | None,
    settle_seconds: float = 0.0,
    is_cancelled: Callable[[], bool] = lambda: False,
    limit: int = MAX_PER_TURN,
) -> int | Full:
    """A free slot's number, now this call's; or, once no slot is being sent any more (or
    `settle_seconds` have passed, or the call was cancelled), what filled them all."""
    deadline = time.monotonic() + settle_seconds
    while True:
        with db.reader() as s:
            rows = s.exec(
                select(Notification.slot, Notification.sent_at, Notification.created_at).where(
                    Notification.turn_id == turn_id
                )
            ).all()
        free = [n for n in range(1, limit + 1) if n not in {slot for slot, _, _ in rows}]
        if free:
            try:
                with db.session() as s:
                    s.add(Notification(turn_id=turn_id, slot=free[0], call_id=call_id))
                return free[0]
            except IntegrityError:
                continue  # a parallel call took that one: look again
        sending = [taken for _, sent_at, taken in rows if sent_at is None]
        recent = utcnow() - timedelta(seconds=settle_seconds)
        waiting = [taken for taken in sending if _aware(taken) > recent]  # older: its worker stopped
        if not waiting or time.monotonic() >= deadline or is_cancelled():
            return Full(sent=len(rows) - len(sending), unsettled=len(sending))
        time.sleep(SETTLE_POLL_SECONDS)


def confirm(db: Database, turn_id: str, slot: int) -> None:
    """The slot's notification went out: it counts for good."""
    with db.session() as s:
        s.exec(
            update(Notification)
            .where(
                col(Notification.turn_id) == turn_id,
                col(Notification.slot) == slot,
                col(Notification.sent_at).is_(None),
            )
            .values(sent_at=utcnow())
        )


def give_back(db: Database, turn_id: str, slot: int) -> None:
    """Every attempt failed: the slot is free for another call."""
    with db.session() as s:
        s.exec(
            delete(Notification).where(
                col(Notification.turn_id) == turn_id,
                col(Notification.slot) == slot,
                col(Notification.sent_at).is_(None),
            )
        )


def sent(db: Database, turn_id: str) -> int:
    """How many notifications the turn has sent."""
    with db.reader() as s:
        return int(
            s.exec(
                select(func.count())
                .select_from(Notification)
                .where(Notification.turn_id == turn_id, col(Notification.sent_at).is_not(None))
            ).one()
        )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite's are UTC
