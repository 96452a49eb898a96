"""How often one trigger's URL may start a run: at most `trigger_starts_per_minute` in any
sixty seconds (a sliding window), counted in Redis so that every web process shares the count.
Past it a request is a 429 whose Retry-After says when the oldest start leaves the window.
Only a request that would start a run counts (a signed one, for a trigger with a secret): a
stranger's unsigned flood cannot use up the owner's starts."""

from __future__ import annotations

import math
import time
import uuid

import redis

from app import redis_keys
from app.errors import TooManyRequestsError

WINDOW_SECONDS = 60

# KEYS[1] the trigger's set; ARGV: now (ms), window (ms), limit, a unique member. Answers 0 when
# the start is taken (and records it), else the milliseconds until the oldest leaves the window.
_TAKE = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return 0
"""


def take(r: redis.Redis, trigger_id: str, per_minute: int) -> None:
    """Count one start of the trigger; TooManyRequestsError (with `retry_after`, whole seconds)
    when the last minute holds `per_minute` already."""
    key = redis_keys.TRIGGER_STARTS.format(trigger_id=trigger_id)
    now_ms = int(time.time() * 1000)
    wait_ms = int(r.eval(_TAKE, 1, key, now_ms, WINDOW_SECONDS * 1000, per_minute, uuid.uuid4().hex))
    if wait_ms:
        seconds = max(1, math.ceil(wait_ms / 1000))
        message = f"this trigger started {per_minute} runs in the last minute: try again in {seconds} s"
        raise TooManyRequestsError(message, retry_after=seconds)
