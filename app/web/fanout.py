"""One Redis subscriber per web process, fanning events out to that process's websockets.

Each socket gets a bounded `LiveQueue`. Whenever live delivery may have skipped events (the
subscription was re-established, or a slow socket's queue overflowed) the socket is told to
resync: its relay re-reads the replay log after the last event it sent.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections import defaultdict, deque
from typing import Any

import redis

from app import keys
from app.settings import DEFAULT_LIVE_QUEUE_EVENTS

log = logging.getLogger(__name__)

RESYNC = "_resync"  # control items a relay reads from its queue, never sent to a client
STOP = "_stop"


class LiveQueue:
    """The live events waiting for one socket, at most `maxsize` of them.

    On overflow (a client that does not read) the queue empties itself, takes no more events and
    holds one resync item: memory stays bounded and the relay catches up from the log, which says
    `replay_truncated` if it no longer holds what the client missed."""

    def __init__(self, maxsize: int = DEFAULT_LIVE_QUEUE_EVENTS) -> None:
        self.maxsize = maxsize
        self._items: deque[dict[str, Any]] = deque()
        self._cond = threading.Condition()
        self._overflowed = False

    def offer(self, event: dict[str, Any]) -> None:
        """A live event (from the fan-out thread): queued, or dropped while a resync is due."""
        with self._cond:
            if self._overflowed:
                return
            if len(self._items) >= self.maxsize:
                self._overflowed = True
                self._items.clear()
                self._items.append({"type": RESYNC})
            else:
                self._items.append(event)
            self._cond.notify()

    def put(self, control: dict[str, Any]) -> None:
        """A control item (resync, stop): always taken; what it displaces is recovered by the resync."""
        with self._cond:
            if len(self._items) >= self.maxsize:
                self._items.clear()
                self._overflowed = control["type"] == RESYNC or self._overflowed
            self._items.append(control)
            self._cond.notify()

    def resume(self) -> None:
        """The relay is about to re-read the log: take live events again from now on."""
        with self._cond:
            self._overflowed = False

    def get(self, timeout: float | None = None) -> dict[str, Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout):
                raise queue.Empty
            return self._items.popleft()

    def qsize(self) -> int:
        with self._cond:
            return len(self._items)


class Fanout:
    def __init__(self, client: redis.Redis, queue_events: int = DEFAULT_LIVE_QUEUE_EVENTS) -> None:
        self._redis = client
        self._queue_events = queue_events
        self._listeners: dict[str, set[LiveQueue]] = defaultdict(set)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def subscribe(self, ws_id: str) -> LiveQueue:
        """A queue that receives every event of the workstream published from now on."""
        self._ensure_running()
        q = LiveQueue(self._queue_events)
        with self._lock:
            self._listeners[ws_id].add(q)
        return q

    def unsubscribe(self, ws_id: str, q: LiveQueue) -> None:
        with self._lock:
            self._listeners[ws_id].discard(q)
            if not self._listeners[ws_id]:
                del self._listeners[ws_id]

    def _ensure_running(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._ready.clear()
                self._thread = threading.Thread(target=self._run, name="event-fanout", daemon=True)
                self._thread.start()
        # Subscribed before the caller reads the replay log: nothing falls between.
        self._ready.wait(timeout=10)

    def _run(self) -> None:
        while True:
            try:
                self._listen()
            except redis.RedisError as exc:
                log.warning("event fan-out lost Redis (%s); reconnecting", type(exc).__name__)
            except Exception:  # this thread feeds every socket of the process: it must not die
                log.exception("event fan-out failed; restarting it")
            self._ready.clear()
            threading.Event().wait(0.5)

    def _listen(self) -> None:
        pubsub = self._redis.pubsub()
        try:
            pubsub.psubscribe(keys.EVENT_CHANNEL_PATTERN)
            for message in pubsub.listen():
                if message.get("type") == "pmessage":
                    self._deliver(json.loads(message["data"]))
                elif message.get("type") == "psubscribe":
                    # (Re)subscribed, here or by redis-py's own reconnect inside listen():
                    # whatever was published while the subscription was down is only in the
                    # log, and only now, subscribed, may the sockets re-read it.
                    self._ready.set()
                    self._wake_all_for_resync()
        finally:
            pubsub.close()

    def _deliver(self, event: dict[str, Any]) -> None:
        with self._lock:
            targets = list(self._listeners.get(event.get("ws_id", ""), ()))
        for q in targets:
            q.offer(event)

    def _wake_all_for_resync(self) -> None:
        with self._lock:
            targets = [q for qs in self._listeners.values() for q in qs]
        for q in targets:
            q.put({"type": RESYNC})
