"""A web process's Redis subscriptions: one channel per workstream a socket here follows.

A channel is subscribed when its first follower arrives (which waits for Redis to confirm it
before reading the log: nothing falls between) and unsubscribed when its last one leaves, so
a web process decodes only the events its own sockets want. Should the connection drop, every
channel is subscribed again on a new one and each of its followers re-reads the log.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio as aioredis

from app import redis_keys
from app.web.sockets.caps import connect

log = logging.getLogger(__name__)

RECONNECT_SECONDS = 0.5
READ_TIMEOUT_SECONDS = 1.0


class Subscriptions:
    """`deliver(ws_id, event, text)` for each live event; `resubscribed(ws_id)` when a channel's
    subscription was made anew (its followers must re-read the log)."""

    def __init__(
        self,
        url: str,
        deliver: Callable[[str, dict[str, Any], str], None],
        resubscribed: Callable[[str], None],
    ) -> None:
        # A client of its own: a pub/sub connection taken from the caps' pool made their
        # commands fail with ConnectionError while the process stopped (the give-back of a
        # socket's place, tests/integration/test_socket_scale.py).
        self._client = connect(url)
        self._deliver = deliver
        self._resubscribed = resubscribed
        self._counts: dict[str, int] = {}
        self._confirmed: dict[str, asyncio.Future[None]] = {}
        self._pubsub: aioredis.client.PubSub | None = None
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def follow(self, ws_id: str) -> None:
        """Count a follower of `ws_id`; returns once its channel's subscription is confirmed."""
        self._start()
        self._counts[ws_id] = self._counts.get(ws_id, 0) + 1
        confirmed = self._confirmed.get(ws_id)
        if confirmed is None:
            confirmed = self._subscribe(ws_id)
        await asyncio.shield(confirmed)

    def leave(self, ws_id: str) -> None:
        left = self._counts.get(ws_id, 0) - 1
        if left > 0:
            self._counts[ws_id] = left
            return
        self._counts.pop(ws_id, None)
        self._confirmed.pop(ws_id, None)
        if self._pubsub is not None and self._connected.is_set():
            asyncio.get_running_loop().create_task(self._send("unsubscribe", ws_id))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._pubsub is not None:
            await self._pubsub.aclose()
        await self._client.aclose()

    # -- inside -----------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _subscribe(self, ws_id: str) -> asyncio.Future[None]:
        confirmed = asyncio.get_running_loop().create_future()
        self._confirmed[ws_id] = confirmed
        if self._connected.is_set():
            asyncio.get_running_loop().create_task(self._send("subscribe", ws_id))
        # else: the connection, once made, subscribes every channel counted
        return confirmed

    async def _send(self, command: str, ws_id: str) -> None:
        try:
            assert self._pubsub is not None
            await getattr(self._pubsub, command)(redis_keys.event_channel(ws_id))
        except (redis.RedisError, OSError) as exc:
            log.warning("websocket subscriptions: %s of a channel failed (%s)", command, type(exc).__name__)
            # The read loop sees the broken connection and subscribes everything again.

    async def _run(self) -> None:
        while True:
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except (redis.RedisError, OSError) as exc:
                log.warning("websocket subscriptions lost Redis (%s); reconnecting", type(exc).__name__)
            except Exception:  # this task feeds every socket of the process: it must not end
                log.exception("websocket subscriptions failed; starting again")
            self._connected.clear()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _listen(self) -> None:
        if self._pubsub is not None:
            await self._pubsub.aclose()
        self._pubsub = pubsub = self._client.pubsub()
        await pubsub.connect()
        self._connected.set()
        if self._counts:
            await pubsub.subscribe(*(redis_keys.event_channel(ws_id) for ws_id in self._counts))
        while True:
            if not pubsub.subscribed:
                await asyncio.sleep(0.05)  # nothing subscribed: get_message would not wait
                continue
            message = await pubsub.get_message(timeout=READ_TIMEOUT_SECONDS)
            if message is not None:
                self._take(message)

    def _take(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        channel = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
        ws_id = redis_keys.ws_of_event_channel(channel)
        if kind == "message":
            data = message["data"]
            text = data.decode() if isinstance(data, bytes) else data
            self._deliver(ws_id, json.loads(text), text)
        elif kind == "subscribe" and ws_id in self._counts:
            confirmed = self._confirmed.get(ws_id)
            if confirmed is not None and not confirmed.done():
                confirmed.set_result(None)
            else:  # subscribed again (here, or by redis-py's own reconnect): what went by is in the log
                self._resubscribed(ws_id)
