"""This web process's websockets, all on one asyncio loop in a thread of its own.

A socket costs no request thread: the loop reads and writes every socket, and what needs the
database or the synchronous Redis client (reading the log, a client's commands, checking tokens
again) runs on a small pool of threads (`Work`) whose results the loop sends. One pass a second
pings each socket that is due (a socket whose last ping went unanswered is dropped, whatever is
queued for it), checks tokens again every `SOCKET_REAUTH_SECONDS`, one check per token, and
renews this process's entries in the per-principal caps.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis.asyncio as aioredis

from app.events import EventType
from app.metrics import recording
from app.web.sockets.caps import RENEW_SECONDS, Caps, connect
from app.web.sockets.connection import GOING_AWAY, POLICY, TRY_LATER, Connection, text_frame
from app.web.sockets.follower import Follower
from app.web.sockets.handover import Opening
from app.web.sockets.subscriptions import Subscriptions

log = logging.getLogger(__name__)

SWEEP_SECONDS = 1.0
WORK_THREADS = 8  # the loop's pool for the database and synchronous Redis
STOP_SECONDS = 2.0  # how long stopping waits for close frames to go out


class Work(Protocol):
    """The synchronous side the hub calls on its pool (app/web/websocket.py)."""

    def replay(self, ws_id: str, after: int) -> tuple[list[str], int, bool]: ...

    def command(self, ws_id: str, raw: str, text: str | bytes) -> tuple[str, tuple[int, str] | None]: ...

    def recheck(self, raw: str, ws_ids: set[str]) -> dict[str, tuple[int, str] | None]: ...


@dataclass(eq=False)
class Socket:
    """One open socket as the hub keeps it: who opened it, its connection and relay (once it
    follows), its place in the per-user cap, when it is next pinged."""

    opening: Opening
    conn: Connection
    follower: Follower | None = None
    ticket: str | None = None
    next_ping: float = 0.0
    commands: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class Limits:
    ping_seconds: float
    reauth_seconds: float
    max_unsent: int
    max_message: int
    per_principal: int
    per_process: int


class Hub:
    """Start it once per process (`start`); request threads `adopt` upgraded connections."""

    def __init__(self, redis_url: str, work: Work, limits: Limits) -> None:
        self._redis_url = redis_url
        self._work = work
        self.limits = limits
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=WORK_THREADS, thread_name_prefix="socket-work")
        self._sockets: set[Socket] = set()
        self._following: dict[str, set[Follower]] = defaultdict(set)
        self._started = threading.Event()
        self._lock = threading.Lock()
        self.subscriptions: Subscriptions | None = None
        self.caps: Caps | None = None
        self._stopping = False  # on the loop: sockets are being closed
        self._stop_asked = False  # by another thread (a signal handler): stop runs once
        self._redis: aioredis.Redis | None = None

    # -- from other threads -----------------------------------------------------------------

    def adopt(self, sock: socket.socket, opening: Opening) -> None:
        """Serve `sock` (answered 101 already) from now on; the calling thread lets go of it."""
        loop = self._ensure_started()
        served = asyncio.run_coroutine_threadsafe(self._serve(sock, opening), loop)
        served.add_done_callback(_log_failure)

    def stop(self) -> None:
        """Close every socket (`GOING_AWAY`: reconnect with `after`) and end the loop. Once: a
        worker told to stop twice (Ctrl-C, then its master's SIGQUIT; both in signal handlers)
        finds the loop ended and returns, rather than wait on a close nothing will run."""
        loop = self._loop
        if loop is None or self._stop_asked:
            return
        self._stop_asked = True
        done = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
        try:
            done.result(timeout=STOP_SECONDS + 1)
        except Exception:  # noqa: BLE001 - stopping: the process exits anyway
            log.warning("websockets: not every socket was closed cleanly")
        loop.call_soon_threadsafe(loop.stop)

    # -- the loop ---------------------------------------------------------------------------

    def _ensure_started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="websockets", daemon=True)
                self._thread.start()
        self._started.wait()
        assert self._loop is not None
        return self._loop

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.set_default_executor(self._pool)
        self._loop = loop
        self._redis = connect(self._redis_url)  # the caps'
        self.caps = Caps(self._redis, self.limits.per_principal, self.limits.per_process)
        self.subscriptions = Subscriptions(self._redis_url, self._deliver, self._resubscribed)
        loop.create_task(self._sweep())
        self._started.set()
        loop.run_forever()

    async def _serve(self, sock: socket.socket, opening: Opening) -> None:
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        held = Socket(opening, conn=None)  # type: ignore[arg-type]
        conn = Connection(
            self.limits.max_unsent,
            self.limits.max_message,
            on_text=lambda text: self._command(held, text),
            on_gone=lambda: self._gone(held),
        )
        held.conn = conn
        try:
            await loop.connect_accepted_socket(lambda: conn, sock)
        except OSError:
            sock.close()
            return
        self._sockets.add(held)
        recording.websocket_opened()
        if opening.refused is not None:
            return self._refuse(conn, opening.refused.status, opening.refused.message, POLICY)
        assert self.caps is not None and self.subscriptions is not None
        held.ticket, why_not = await self.caps.take(opening.who)
        if why_not is not None:
            return self._refuse(conn, 429, why_not, TRY_LATER)
        held.next_ping = time.monotonic() + self.limits.ping_seconds
        follower = Follower(opening.ws_id, opening.after, conn, self._replay)
        await self.subscriptions.follow(opening.ws_id)
        if conn.closed:  # gone while the subscription was made
            self.subscriptions.leave(opening.ws_id)
            return
        held.follower = follower
        self._following[opening.ws_id].add(follower)
        follower.catch_up()

    def _refuse(self, conn: Connection, status: int, message: str, code: int) -> None:
        conn.send_text(json.dumps({"type": EventType.ERROR, "status": status, "message": message}))
        conn.close(code, message[:100])

    def _gone(self, held: Socket) -> None:
        if held not in self._sockets:
            return
        self._sockets.discard(held)
        recording.websocket_closed()
        if held.follower is not None:
            followers = self._following.get(held.opening.ws_id)
            if followers is not None:
                followers.discard(held.follower)
                if not followers:
                    del self._following[held.opening.ws_id]
            assert self.subscriptions is not None
            self.subscriptions.leave(held.opening.ws_id)
        if held.ticket is not None and not self._stopping:
            assert self.caps is not None
            asyncio.get_running_loop().create_task(self.caps.give_back(held.ticket))

    def _deliver(self, ws_id: str, event: dict[str, Any], text: str) -> None:
        followers = self._following.get(ws_id)
        if not followers:
            return
        frame = text_frame(text)
        for follower in list(followers):
            follower.deliver(event, frame)

    def _resubscribed(self, ws_id: str) -> None:
        for follower in list(self._following.get(ws_id, ())):
            follower.catch_up()

    async def _replay(self, ws_id: str, after: int) -> tuple[list[str], int, bool]:
        return await asyncio.get_running_loop().run_in_executor(None, self._work.replay, ws_id, after)

    def _command(self, held: Socket, text: str | bytes) -> None:
        held.conn.command_started()
        asyncio.get_running_loop().create_task(self._answer(held, text))

    async def _answer(self, held: Socket, text: str | bytes) -> None:
        try:
            async with held.commands:  # one socket's commands are answered in the order sent
                reply, refused = await asyncio.get_running_loop().run_in_executor(
                    None, self._work.command, held.opening.ws_id, held.opening.raw_token, text
                )
            held.conn.send_text(reply)
            if refused is not None:  # the token is no longer good: told as at the connect, then closed
                self._refuse(held.conn, *refused, POLICY)
        finally:
            held.conn.command_done()

    async def _sweep(self) -> None:
        last_check = last_renew = time.monotonic()
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                now = time.monotonic()
                self._ping_due(now)
                if now - last_check >= self.limits.reauth_seconds:
                    last_check = now
                    asyncio.get_running_loop().create_task(self._recheck())
                if now - last_renew >= RENEW_SECONDS and self.caps is not None:
                    last_renew = now
                    await self.caps.renew()
            except Exception:  # the sweep keeps every socket honest: it must not end
                log.exception("websocket sweep failed")

    def _ping_due(self, now: float) -> None:
        for held in list(self._sockets):
            if held.follower is None or held.conn.closed or now < held.next_ping:
                continue
            held.next_ping = now + self.limits.ping_seconds
            if not held.conn.ping():  # the last ping went unanswered: the peer is gone or stuck
                held.conn.close(POLICY, "Ping/Pong timeout", drop=True)

    async def _recheck(self) -> None:
        """Each open socket's token, checked again: one check per token, off the loop."""
        by_token: dict[str, list[Socket]] = defaultdict(list)
        for held in self._sockets:
            if held.follower is not None and not held.conn.closed:
                by_token[held.opening.raw_token].append(held)
        loop = asyncio.get_running_loop()
        for raw, sockets in by_token.items():
            ws_ids = {held.opening.ws_id for held in sockets}
            try:
                verdicts = await loop.run_in_executor(None, self._work.recheck, raw, ws_ids)
            except Exception:  # a bug: these sockets are checked again at the next pass
                log.exception("websockets: checking a token again failed")
                continue
            for held in sockets:
                refused = verdicts.get(held.opening.ws_id)
                if refused is not None and not held.conn.closed:
                    self._refuse(held.conn, refused[0], refused[1], POLICY)

    async def _close_all(self) -> None:
        self._stopping = True  # each socket's place in its user's cap is given back here, now
        tickets = [held.ticket for held in self._sockets if held.ticket is not None]
        for held in list(self._sockets):
            held.conn.close(GOING_AWAY, "server restarting: reconnect with after")
        if self.caps is not None:
            await asyncio.gather(*(self.caps.give_back(ticket) for ticket in tickets))
        if self.subscriptions is not None:
            await self.subscriptions.stop()
        if self._redis is not None:
            await self._redis.aclose()


def _log_failure(done: Any) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.error("websocket: serving a socket failed", exc_info=done.exception())
