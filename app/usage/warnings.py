"""Admins warned through notify when a user's budget is 80% spent: once per user, budget and
period (a Redis claim that lasts past the period), sent by a Celery task so that neither a send
nor a model step waits on a chat platform (docs/usage.md)."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlmodel import col, select

from app import redis_keys
from app.gateway import client as gateway
from app.gateway.request import NotifyRequest
from app.runtime import Runtime
from app.storage.models import User

log = logging.getLogger(__name__)

WARN_AT = 0.8  # the share of a budget spent at which admins hear of it
CLAIM_SECONDS = 40 * 86400  # longer than the longest period (a month)


def crossed(
    rt: Runtime, owner_id: str, name: str, budget: str, limit: float, used: float, since: datetime
) -> None:
    """Warn the admins if `used` is WARN_AT of `limit` or more and nobody has for this period."""
    if used < WARN_AT * limit:
        return
    claim = redis_keys.budget_warned(owner_id, budget, since.date().isoformat())
    if not rt.redis.set(claim, "1", nx=True, ex=CLAIM_SECONDS):
        return  # warned already (by this process or another)
    share = min(999, round(100 * used / limit)) if limit else 100
    message = f"{name} has used {share}% of the {budget} budget ({used:g} of {limit:g})."
    rt.queue.budget_warning(message)


def send(rt: Runtime, message: str) -> int:
    """The warning to every enabled admin through their channels; how many it reached."""
    with rt.db.reader() as s:
        admins = s.exec(
            select(User.name).where(col(User.is_admin).is_(True), col(User.disabled_at).is_(None))
        ).all()
    reached = 0
    for admin in admins:
        wanted = NotifyRequest(message=message, title="Budget warning", username=admin)
        outcome = gateway.send(rt.db, rt.settings.notify, wanted)
        if outcome.ok:
            reached += 1
        else:  # an admin without channels, a platform down: said in the log, nothing retried
            log.warning("budget warning to %s not delivered: %s", admin, outcome.reason)
    return reached
