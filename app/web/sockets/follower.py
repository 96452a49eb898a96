"""One socket's events: what the log holds after its cursor, then live ones, in id order.

Live events reach a follower straight from the process's subscription (subscriptions.py),
already decoded once for all of its followers. Ids of one log follow each other with no hole,
so a live event that is not `last + 1` means live delivery missed something (or Redis began a
new epoch): the follower re-reads the log after `last` (`catch_up`), and while it reads, live
events only note that it must read again, so nothing falls between the two.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from app.web.sockets.connection import Connection

log = logging.getLogger(__name__)

REPLAY_RETRY_SECONDS = 0.5  # between reads of the log while Redis cannot be reached

# Reads the log after a cursor, off the loop: the frames to send (JSON texts), the new cursor,
# and whether Redis could be reached (False: nothing sent, read again shortly).
Replay = Callable[[str, int], Awaitable[tuple[list[str], int, bool]]]


class Follower:
    """The relay for one socket of one workstream."""

    def __init__(self, ws_id: str, after: int, conn: Connection, replay: Replay) -> None:
        self.ws_id = ws_id
        self.last = after
        self.conn = conn
        self._replay = replay
        self._reading = False
        self._read_again = False
        self._task: asyncio.Task[None] | None = None

    def deliver(self, event: dict[str, Any], frame: bytes) -> None:
        """A live event of the workstream (`frame`: as published, framed once for all)."""
        if self.conn.closed:
            return
        if self._reading:
            self._read_again = self._read_again or event["id"] > self.last
        elif event["id"] == self.last + 1:
            self.conn.send_frame(frame)
            self.last = event["id"]
        elif event["id"] > self.last:
            self.catch_up()
        # else: the log already gave it

    def catch_up(self) -> None:
        """Re-read the log after `last` (the subscription was re-made, or an event was missed)."""
        if self._reading:
            self._read_again = True
            return
        self._reading = True
        self._task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            while not self.conn.closed:
                self._read_again = False
                frames, last, reached = await self._replay(self.ws_id, self.last)
                if self.conn.closed:
                    return
                for frame in frames:
                    self.conn.send_text(frame)
                self.last = last
                if not reached:
                    await asyncio.sleep(REPLAY_RETRY_SECONDS)
                    continue
                if not self._read_again:
                    return
        except Exception:  # a relay that dies silently would starve its client: close, let it reconnect
            log.exception("websocket relay for %s failed", self.ws_id)
            self.conn.close(1011, "relay failed: reconnect with after")
        finally:
            self._reading = False
