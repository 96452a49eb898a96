"""The cancel check a running step polls between stream chunks and output lines."""

from __future__ import annotations

import time

from app import keys
from app.runtime import Runtime

CHECK_EVERY_SECONDS = 0.05


class CancelCheck:
    """True once the turn's cancel flag is set in Redis or this attempt was superseded."""

    def __init__(self, rt: Runtime, turn_id: str, heartbeat: object | None = None) -> None:
        self._rt = rt
        self._key = keys.turn_cancel(turn_id)
        self._heartbeat = heartbeat
        self._checked_at = 0.0
        self._cancelled = False

    def __call__(self) -> bool:
        if self._cancelled or getattr(self._heartbeat, "superseded", False):
            return True
        now = time.monotonic()
        if now - self._checked_at >= CHECK_EVERY_SECONDS:
            self._checked_at = now
            self._cancelled = bool(self._rt.redis.exists(self._key))
        return self._cancelled


def raise_flag(rt: Runtime, turn_id: str) -> None:
    rt.redis.set(keys.turn_cancel(turn_id), 1, ex=keys.CANCEL_TTL_SECONDS)
