"""Which workers are alive: each one renews its entry in a Redis sorted set, scored by the
moment it expires; /health counts the entries not yet expired.

A Celery control ping waits out its whole timeout for replies and misses a
worker that is busy starting; an entry that lapses unless renewed answers at
once, and counting a sorted set costs the same however many keys Redis holds.
"""

from __future__ import annotations

import threading
import time

import redis

from app import redis_keys

RENEW_EVERY_SECONDS = 5.0
EXPIRES_AFTER_SECONDS = 15  # three missed renewals: the worker is gone


class Presence:
    """Keeps this worker's entry in `tj:workers` from lapsing while the worker runs."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self._redis = client
        self._name = name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-presence", daemon=True)

    def start(self) -> None:
        self._renew()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._redis.zrem(redis_keys.WORKER_PRESENCE, self._name)

    def _run(self) -> None:
        while not self._stop.wait(RENEW_EVERY_SECONDS):
            try:
                self._renew()
            except redis.RedisError:
                continue  # Redis blinked: the next renewal tries again before the key expires

    def _renew(self) -> None:
        self._redis.zadd(redis_keys.WORKER_PRESENCE, {self._name: time.time() + EXPIRES_AFTER_SECONDS})


def count(client: redis.Redis) -> int:
    """Workers whose entry has not lapsed; lapsed ones (crashed workers) are dropped on the way."""
    now = time.time()
    with client.pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(redis_keys.WORKER_PRESENCE, "-inf", now)
        pipe.zcard(redis_keys.WORKER_PRESENCE)
        return int(pipe.execute()[1])


def is_present(client: redis.Redis, name: str) -> bool:
    expires = client.zscore(redis_keys.WORKER_PRESENCE, name)
    return expires is not None and expires > time.time()


def members(client: redis.Redis) -> list[tuple[str, float]]:
    """The live workers, each with the seconds since it last renewed its entry, by name."""
    now = time.time()
    rows: list[tuple[bytes | str, float]] = client.zrangebyscore(  # type: ignore[assignment]
        redis_keys.WORKER_PRESENCE, now, "+inf", withscores=True
    )
    live = []
    for name, expires in rows:
        renewed = float(expires) - EXPIRES_AFTER_SECONDS
        live.append((name.decode() if isinstance(name, bytes) else name, max(0.0, now - renewed)))
    return sorted(live)
