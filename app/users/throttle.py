"""Sign-in throttling in Redis: failures are counted per user name and per client address; past
LOGIN_FREE_ATTEMPTS each failure locks that name (and that address) for twice as long as the
last, so guessing slows to a crawl for one account and for one client alike."""

from __future__ import annotations

import hashlib
import math

import redis

from app import redis_keys
from app.errors import TooManyRequestsError

# Sign-in failures, counted per user name and per client address over a window; past the free
# attempts each further failure doubles the wait before the next try, up to the maximum.
LOGIN_FREE_ATTEMPTS = 5
LOGIN_FAILURE_WINDOW_SECONDS = 15 * 60
LOGIN_MAX_DELAY_SECONDS = 5 * 60


def subjects(name: str, address: str) -> list[str]:
    """The counters one attempt touches; the name hashed, as it is any text a client sent."""
    digest = hashlib.sha256(name.encode("utf-8", errors="replace")).hexdigest()[:32]
    return [f"user:{digest}", f"addr:{address}"]


def check(r: redis.Redis, name: str, address: str) -> None:
    """TooManyRequestsError (429, with `retry_after` seconds) while either is locked."""
    waits = [r.pttl(redis_keys.login_lock(who)) for who in subjects(name, address)]
    longest = max((w for w in waits if w and w > 0), default=0)
    if longest:
        seconds = math.ceil(longest / 1000)
        raise TooManyRequestsError(f"too many failed sign-ins: try again in {seconds} s", retry_after=seconds)


def failed(r: redis.Redis, name: str, address: str) -> None:
    for who in subjects(name, address):
        count = int(r.incr(redis_keys.login_failures(who)))
        r.expire(redis_keys.login_failures(who), LOGIN_FAILURE_WINDOW_SECONDS)
        if count >= LOGIN_FREE_ATTEMPTS:
            delay = min(2 ** (count - LOGIN_FREE_ATTEMPTS), LOGIN_MAX_DELAY_SECONDS)
            r.set(redis_keys.login_lock(who), 1, ex=delay)


def succeeded(r: redis.Redis, name: str, address: str) -> None:
    """A right password clears the name's count (not the address's: one good account must not
    reset the count of a client guessing at others)."""
    user = subjects(name, address)[0]
    r.delete(redis_keys.login_failures(user), redis_keys.login_lock(user))
