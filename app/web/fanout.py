"""One Redis subscriber per web process, fanning events out to that process's websockets."""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections import defaultdict
from typing import Any

import redis

from app import keys

log = logging.getLogger(__name__)


class Fanout:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._listeners: dict[str, set[queue.Queue[dict[str, Any]]]] = defaultdict(set)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def subscribe(self, ws_id: str) -> queue.Queue[dict[str, Any]]:
        """A queue that receives every event of the workstream published from now on."""
        self._ensure_running()
        q: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._listeners[ws_id].add(q)
        return q

    def unsubscribe(self, ws_id: str, q: queue.Queue[dict[str, Any]]) -> None:
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
                pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
                pubsub.psubscribe(keys.EVENT_CHANNEL_PATTERN)
                pubsub.get_message(timeout=5)  # the subscribe confirmation
                self._ready.set()
                for message in pubsub.listen():
                    if message.get("type") == "pmessage":
                        self._deliver(json.loads(message["data"]))
            except redis.RedisError as exc:
                log.warning("event fan-out lost Redis (%s); reconnecting", exc)
            except Exception:  # this thread feeds every socket of the process: it must not die
                log.exception("event fan-out failed; restarting it")
            self._ready.clear()
            self._wake_all_for_resync()
            threading.Event().wait(0.5)

    def _deliver(self, event: dict[str, Any]) -> None:
        with self._lock:
            targets = list(self._listeners.get(event.get("ws_id", ""), ()))
        for q in targets:
            q.put(event)

    def _wake_all_for_resync(self) -> None:
        """Events may have been missed while disconnected: each socket re-reads the log."""
        with self._lock:
            targets = [q for qs in self._listeners.values() for q in qs]
        for q in targets:
            q.put({"type": "_resync"})
