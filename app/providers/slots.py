"""Per-model concurrency (`[models.NAME] max_concurrent`): at most that many requests to the
model at once across the service (every worker of every host), for a server that serves a few
well and many badly (a local vLLM, a rate-limited key).

A slot is a member of the model's sorted set in Redis, scored by when its lease ends: taking one
drops lapsed leases and adds a member only while fewer than the limit remain (one script, so two
workers never both take the last); a step's stream renews its lease as it goes, and gives the slot
back when it ends, however it ends. A worker that dies holding one holds it until its lease lapses.
"""

from __future__ import annotations

import time
import uuid

import redis

from app.redis_keys import PREFIX

KEY = PREFIX + ":model-slots:{name}"
RENEW_EVERY_SECONDS = 15.0

# KEYS[1] the model's set; ARGV: now, lease end, limit, token. 1: taken, 0: all taken.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  redis.call('PEXPIREAT', KEYS[1], math.floor(tonumber(ARGV[2]) * 1000) + 1000)
  return 1
end
return 0
"""


class Slot:
    """One slot of one model, held until `release` (renewed by `renew`)."""

    def __init__(self, client: redis.Redis, name: str, lease_seconds: float) -> None:
        self.client, self.key, self.lease = client, KEY.format(name=name), lease_seconds
        self.token = uuid.uuid4().hex
        self.renewed = 0.0

    def take(self, limit: int) -> bool:
        now = time.time()
        taken = self.client.eval(_TAKE, 1, self.key, now, now + self.lease, limit, self.token)
        if taken:
            self.renewed = now
        return bool(taken)

    def renew(self) -> None:
        """Push the lease on (at most every RENEW_EVERY_SECONDS: a stream calls this per event)."""
        now = time.time()
        if now - self.renewed >= RENEW_EVERY_SECONDS:
            self.renewed = now
            self.client.zadd(self.key, {self.token: now + self.lease}, xx=True)

    def release(self) -> None:
        self.client.zrem(self.key, self.token)


def in_use(client: redis.Redis, name: str) -> int:
    """Slots of the model held now (lapsed leases not counted)."""
    return int(client.zcount(KEY.format(name=name), time.time(), "+inf"))
