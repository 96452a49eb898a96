"""The Celery broker transport: kombu's Redis transport, with the one fault that made a worker
exit when its broker link dropped.

When the link drops while the consumer waits in BRPOP (an idle worker, the usual case), Celery
5.7 first `collect()`s the connection: closing its channel fails on the dead socket, so the
channel stays open, and the transport is then detached from the connection. Celery next
`close()`s the connection; the channel, still open, restores its unacknowledged messages
through a new connection pool, whose parameters come from the detached transport: None.
The AttributeError that follows is not a connection error, so nothing catches it and the worker
process exits ("Unrecoverable error"). Here a channel of a detached transport raises a
connection error instead: Celery ignores it as it ignores the same restore failing while Redis
is down, and reconnects. Nothing is lost: unacknowledged messages stay in Redis's unacked
index until redelivered (`VISIBILITY_TIMEOUT_SECONDS`), and the sweeper re-queues any phase from
the database.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

# `broker_transport`: kombu resolves "module:Class" names.
TRANSPORT = "app.broker:Transport"


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:  # the connection was collected: it has no address now
            raise RedisConnectionError("the broker connection was closed; reconnecting")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
