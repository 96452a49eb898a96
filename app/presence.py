"""Which workers are alive: each one renews a Redis key with a short expiry; /health counts them.

A Celery control ping waits out its whole timeout for replies and misses a
worker that is busy starting; a key that expires unless renewed answers at once.
"""

from __future__ import annotations

import threading

import redis

from app import keys

RENEW_EVERY_SECONDS = 5.0
EXPIRES_AFTER_SECONDS = 15  # three missed renewals: the worker is gone


class Presence:
    """Keeps `tj:worker:<name>` alive while the worker runs."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self._redis = client
        self._key = keys.worker_presence(name)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-presence", daemon=True)

    def start(self) -> None:
        self._renew()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._redis.delete(self._key)

    def _run(self) -> None:
        while not self._stop.wait(RENEW_EVERY_SECONDS):
            try:
                self._renew()
            except redis.RedisError:
                continue  # Redis blinked: the next renewal tries again before the key expires

    def _renew(self) -> None:
        self._redis.set(self._key, 1, ex=EXPIRES_AFTER_SECONDS)


def count(client: redis.Redis) -> int:
    return sum(1 for _ in client.scan_iter(match=keys.WORKER_PRESENCE_PATTERN, count=100))
