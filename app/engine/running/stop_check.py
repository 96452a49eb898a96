"""The cancel check a running step polls between stream chunks and output lines, and the flag it reads."""

from __future__ import annotations

import logging
import time

import redis

from app import redis_keys
from app.engine.running.heartbeats import HeldClaim
from app.events import retrying
from app.runtime import Runtime

log = logging.getLogger(__name__)

CHECK_EVERY_SECONDS = 0.05


class CancelCheck:
    """True once the turn's cancel flag is set in Redis or this attempt was superseded.

    Never raises: while Redis cannot be asked, the last known answer holds (a step rides out an
    outage; a cancel raised during it is seen at the first check after).

    Made as its phase starts, and counted as a check: the flag is raised only once the turn's
    `cancel_requested` is committed, and every phase reads that from the database before it
    first checks here, so asking Redis within CHECK_EVERY_SECONDS of now would tell nothing
    more (a round trip per phase saved)."""

    def __init__(self, rt: Runtime, turn_id: str, held: HeldClaim | None = None) -> None:
        self._rt = rt
        self._turn_id = turn_id
        self._key = redis_keys.turn_cancel(turn_id)
        self._held = held
        self._checked_at = time.monotonic()
        self._cancelled = False
        self._unreachable = False

    def __call__(self) -> bool:
        if time.monotonic() - self._checked_at >= CHECK_EVERY_SECONDS:
            return self.now()
        return self._cancelled or (self._held is not None and self._held.superseded)

    def now(self) -> bool:
        """`self()`, with the flag asked of Redis now whenever it was last asked: for a phase
        that did not read the turn's `cancel_requested` as it began."""
        if self._cancelled or (self._held is not None and self._held.superseded):
            return True
        self._checked_at = time.monotonic()
        self._cancelled = self._read_flag()
        return self._cancelled

    def _read_flag(self) -> bool:
        try:
            flag = bool(self._rt.redis.exists(self._key))
        except redis.RedisError as exc:
            if not self._unreachable:  # once per outage: a step checks many times a second
                log.warning(
                    "turn %s: cannot check the cancel flag (%s); carrying on as not cancelled",
                    self._turn_id,
                    type(exc).__name__,
                )
                self._unreachable = True
            return self._cancelled
        if self._unreachable:
            log.warning("turn %s: the cancel flag can be checked again", self._turn_id)
            self._unreachable = False
        return flag


def raise_flag(rt: Runtime, turn_id: str) -> None:
    """Set the flag running steps check; rides out a Redis outage like a publish does."""
    retrying(
        lambda: rt.redis.set(redis_keys.turn_cancel(turn_id), 1, ex=redis_keys.CANCEL_TTL_SECONDS),
        rt.settings.redis_retry_seconds,
        f"raising the cancel flag of turn {turn_id}",
    )
