"""Caps on open websockets: per principal across every web process (Redis), per process here.

A principal's sockets are entries in a sorted set scored by when each lapses; the hub renews its
own while they are open and removes them as they close, so a web process that dies stops
counting once its entries lapse. Redis unreachable at an open: the socket is let through (an
outage must not shut everyone out) and the per-process cap still holds.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections import defaultdict

import redis
import redis.asyncio as aioredis

from app import redis_keys
from app.users.principal import Principal

log = logging.getLogger(__name__)

# A web process's asyncio Redis clients wait for a free connection rather than fail: a
# thousand sockets opening at once would otherwise pass the pool's size, get
# MaxConnectionsError, and be let through uncounted as if Redis were down.
POOL_CONNECTIONS = 32
POOL_WAIT_SECONDS = 10.0

RENEW_SECONDS = 10.0
LAPSE_SECONDS = 30  # three missed renewals: the process that held the socket is gone

# KEYS: the principal's set. ARGV: now, lapses at, member, cap, the set's ttl. 1 when taken, 0 at the cap.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


def connect(url: str) -> aioredis.Redis:
    """An asyncio client whose commands queue for one of `POOL_CONNECTIONS` connections."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=POOL_CONNECTIONS, timeout=POOL_WAIT_SECONDS
    )
    return aioredis.Redis(connection_pool=pool)


def principal_key(who: Principal | None) -> str:
    if who is None or who.user_id is None:
        return "operator"
    return who.user_id


class Caps:
    """What this process counts; `take` before a socket is served, `give_back` when it ends."""

    def __init__(self, client: aioredis.Redis, per_principal: int, per_process: int) -> None:
        self._redis = client
        self._take = client.register_script(_TAKE)
        self.per_principal = per_principal
        self.per_process = per_process
        self.open = 0
        self._held: dict[str, set[str]] = defaultdict(set)

    async def take(self, who: Principal | None) -> tuple[str | None, str | None]:
        """(a ticket to give back, None) when the socket may open; (None, why not) at a cap."""
        if self.open >= self.per_process:
            return None, f"this web process holds its limit of {self.per_process} sockets: try again later"
        self.open += 1  # counted before the wait below, so that sockets opening together count
        principal = principal_key(who)
        ticket = f"{principal} {uuid.uuid4().hex}"
        now = time.time()
        try:
            taken = await self._take(
                keys=[redis_keys.sockets_of(principal)],
                args=[now, now + LAPSE_SECONDS, ticket, self.per_principal, LAPSE_SECONDS * 2],
            )
        except (redis.RedisError, OSError) as exc:
            log.warning("socket caps: Redis unreachable (%s); letting a socket open", type(exc).__name__)
            taken = 1
        if not taken:
            self.open -= 1
            return None, f"too many open sockets for this user (the limit is {self.per_principal})"
        self._held[principal].add(ticket)
        return ticket, None

    async def give_back(self, ticket: str) -> None:
        principal = ticket.split(" ", 1)[0]
        self.open -= 1
        self._held[principal].discard(ticket)
        if not self._held[principal]:
            del self._held[principal]
        with contextlib.suppress(redis.RedisError, OSError):  # else it lapses
            await self._redis.zrem(redis_keys.sockets_of(principal), ticket)

    async def renew(self) -> None:
        """Keep this process's entries from lapsing (one command per principal)."""
        lapses = time.time() + LAPSE_SECONDS
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for principal, tickets in self._held.items():
                    pipe.zadd(redis_keys.sockets_of(principal), dict.fromkeys(tickets, lapses))
                    pipe.expire(redis_keys.sockets_of(principal), LAPSE_SECONDS * 2)
                await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            log.warning("socket caps: could not renew (%s)", type(exc).__name__)
