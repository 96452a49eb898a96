"""Websockets at scale, against the real web process (gunicorn with the service's worker class),
Redis and a real websocket client: sockets hold no request thread, a client that stops reading
is dropped, caps answer clearly, a web process follows only the workstreams its sockets follow,
and a restart with many sockets open loses and repeats nothing."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websocket
import websockets

from app import redis_keys
from app.events import EventLog
from app.users.principal import Principal
from app.web.sockets import caps
from tests.apart import run_apart
from tests.fakes.model_server import Reply
from tests.integration.client import EventSocket
from tests.integration.people import People
from tests.integration.redis_faults import RedisProxy
from tests.integration.services import API_TOKEN, REDIS_HOST, REDIS_PORT, Services, free_port
from tests.process_table import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def extra_web(services: Services) -> Iterator[Any]:
    """extra_web(threads=..., **env): a second web process of the service's, on a port of its own,
    with `env` (TURNSTONE_* settings); stopped at the end."""
    started: list[str] = []

    def _start(threads: int = 32, **env: str) -> str:
        name = f"web-scale-{len(started)}"
        started.append(name)
        return services.start_web(name=name, port=free_port(), threads=threads, env=env)

    yield _start
    for name in started:
        if name in services.processes:  # not stopped by the test itself
            services.kill(name)


def event_log(services: Services) -> EventLog:
    return EventLog(services.redis, maxlen=10_000)


def socket_url(base_url: str, ws_id: str, token: str = API_TOKEN, after: int = 0) -> str:
    return base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{ws_id}?token={token}&after={after}"


def frames_until_closed(
    conn: websocket.WebSocket, timeout: float = 30
) -> tuple[list[dict[str, Any]], int | None]:
    """Every text frame until the server closes; and the close code it sent (None: none sent)."""
    conn.settimeout(timeout)
    frames: list[dict[str, Any]] = []
    while True:
        try:
            opcode, frame = conn.recv_data_frame(True)
        except (websocket.WebSocketConnectionClosedException, ConnectionResetError):
            return frames, None
        if opcode == websocket.ABNF.OPCODE_TEXT:
            frames.append(json.loads(frame.data))
        elif opcode == websocket.ABNF.OPCODE_CLOSE:
            return frames, struct.unpack("!H", frame.data[:2])[0] if len(frame.data) >= 2 else None


# -- no request thread ------------------------------------------------------------------------


def test_open_sockets_hold_no_request_thread(services, api, model, extra_web):
    """Four request threads and forty open sockets: the API still answers at once, and every
    socket still gets its events (before, the fourth socket stopped the API)."""
    base_url = extra_web(threads=4)
    ws_id = api.create_workstream()
    sockets = [EventSocket(base_url, API_TOKEN, ws_id) for _ in range(40)]
    try:
        started = time.monotonic()
        listed = httpx.get(
            base_url + "/v1/api/workstreams", headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=10
        )
        assert listed.status_code == 200 and time.monotonic() - started < 2
        model.enqueue(Reply(text="to all forty"))
        turn_id = api.send(ws_id, "hello")
        for sock in sockets:
            sock.wait_turn_end(turn_id, timeout=30)
            assert "".join(e["text"] for e in sock.of_type("content")) == "to all forty"
    finally:
        for sock in sockets:
            sock.close()


# -- a client that stops reading ----------------------------------------------------------------


def stalled_socket(base_url: str, ws_id: str) -> socket.socket:
    """A websocket whose client completed the handshake and then reads nothing, with a small
    receive buffer: what the server writes piles up on its side."""
    host, port = base_url.removeprefix("http://").split(":")
    raw = socket.create_connection((host, int(port)), timeout=10)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    raw.sendall(
        (
            f"GET /v1/ws/workstreams/{ws_id}?token={API_TOKEN} HTTP/1.1\r\nHost: {host}\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return raw


def is_closed_by_server(raw: socket.socket, within: float) -> bool:
    """Drain what the server sent; True once it closed the connection (end of file or reset)."""
    deadline = time.monotonic() + within
    raw.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if raw.recv(1 << 20) == b"":
                return True
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True
    return False


@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "busy"])
def test_a_client_that_stops_reading_is_closed_within_two_ping_intervals(services, api, extra_web, busy):
    base_url = extra_web(TURNSTONE_SOCKET_PING_SECONDS="1")
    ws_id = api.create_workstream()
    raw = stalled_socket(base_url, ws_id)
    log = event_log(services)
    started = time.monotonic()
    if busy:  # 4 MiB of events it never reads, written while it is due to be pinged
        for n in range(64):
            log.publish(ws_id, "tool_output_chunk", call_id="c", text=f"{n} " + "x" * 65536)
    time.sleep(2.5)  # two ping intervals and a little: the second ping finds the first unanswered
    assert is_closed_by_server(raw, within=2), "the server kept a socket whose client stopped reading"
    assert time.monotonic() - started < 8
    raw.close()


# -- caps -----------------------------------------------------------------------------------------


def admitted(base_url: str, token: str, ws_id: str) -> EventSocket:
    """A socket the server has taken in: it has sent what the log holds (one event, `seeded`)."""
    sock = EventSocket(base_url, token, ws_id)
    assert wait_until(lambda: len(sock.events) == 1, 10)
    return sock


def seeded(services: Services, ws_id: str) -> str:
    event_log(services).publish(ws_id, "content", text="seed")
    return ws_id


def refused(url: str) -> tuple[dict[str, Any], int | None]:
    conn = websocket.create_connection(url, timeout=10)
    frames, code = frames_until_closed(conn, timeout=10)
    return frames[0], code


def test_a_user_past_their_cap_on_open_sockets_is_told_to_try_later(services, api, extra_web):
    base_url = extra_web(TURNSTONE_SOCKETS_PER_PRINCIPAL="3")
    person = People(services).user("capped")
    token = person.tokens["all"]
    ws_id = seeded(services, person.api(services).create_workstream())
    held = [admitted(base_url, token, ws_id) for _ in range(3)]
    error, code = refused(socket_url(base_url, ws_id, token))
    assert (error["type"], error["status"], code) == ("error", 429, 1013)
    assert "too many open sockets for this user" in error["message"]
    # Another user is not held by this one's sockets; and a socket closed gives its place back.
    other = websocket.create_connection(socket_url(base_url, api.create_workstream()), timeout=10)
    other.close()
    held.pop().close()
    assert wait_until(lambda: services.redis.zcard(redis_keys.sockets_of(person.user_id)) == 2, 5)
    held.append(admitted(base_url, token, ws_id))
    assert services.redis.zcard(redis_keys.sockets_of(person.user_id)) == 3
    for sock in held:
        sock.close()


def test_a_web_process_at_its_cap_refuses_more_sockets_with_a_reason(services, api, extra_web):
    base_url = extra_web(TURNSTONE_SOCKETS_PER_PROCESS="2")
    ws_id = seeded(services, api.create_workstream())
    held = [admitted(base_url, API_TOKEN, ws_id) for _ in range(2)]
    error, code = refused(socket_url(base_url, ws_id))
    assert (error["status"], code) == (429, 1013) and "this web process" in error["message"]
    for sock in held:
        sock.close()


def test_a_web_process_stopping_tells_its_sockets_to_reconnect_and_frees_their_places(
    services, api, extra_web
):
    base_url = extra_web()
    person = People(services).user("stopping")
    ws_id = seeded(services, person.api(services).create_workstream())
    conn = websocket.create_connection(socket_url(base_url, ws_id, person.tokens["all"]), timeout=10)
    assert json.loads(conn.recv())["text"] == "seed"
    assert services.redis.zcard(redis_keys.sockets_of(person.user_id)) == 1
    name = next(name for name in services.processes if name.startswith("web-scale-"))
    os.killpg(services.processes[name].pid, signal.SIGTERM)  # a deploy: gunicorn stops gracefully
    _frames, code = frames_until_closed(conn, timeout=10)
    assert code == 1001  # going away: reconnect with after
    assert wait_until(
        lambda: services.redis.zcard(redis_keys.sockets_of(person.user_id)) == 0, 3
    )  # not left to lapse
    services.processes.pop(name).wait(timeout=30)


# -- subscriptions on demand ------------------------------------------------------------------------


def subscribers(services: Services, ws_id: str) -> int:
    [(_channel, count)] = services.redis.pubsub_numsub(redis_keys.event_channel(ws_id))
    return int(count)


def test_a_web_process_follows_only_the_workstreams_its_sockets_follow(services, api, extra_web):
    base_url = extra_web()
    followed, unfollowed = api.create_workstream(), api.create_workstream()
    first = EventSocket(base_url, API_TOKEN, followed)
    second = EventSocket(base_url, API_TOKEN, followed)
    assert wait_until(lambda: subscribers(services, followed) == 1, 5)  # one channel, two sockets
    assert subscribers(services, unfollowed) == 0
    log = event_log(services)
    before = [log.publish(followed, "content", text=str(n)) for n in range(3)]
    first.close()
    time.sleep(0.3)
    assert subscribers(services, followed) == 1  # the other socket still follows it
    second.close()
    assert wait_until(lambda: subscribers(services, followed) == 0, 5)
    # Published while nobody here follows it: a socket after the cursor gets it all, in order.
    during = [log.publish(followed, "content", text=str(n)) for n in range(3, 6)]
    third = EventSocket(base_url, API_TOKEN, followed, after=before[0])
    live = log.publish(followed, "content", text="live")
    assert wait_until(lambda: len(third.events) >= 6, 10)
    assert [e["id"] for e in third.events] == before[1:] + during + [live]
    third.close()


def test_a_lost_subscription_is_made_again_and_its_sockets_miss_nothing(services, api, extra_web):
    """The web process's Redis connection is cut while events are published: once it is back,
    each socket re-reads the log and sees every event once, in order."""
    proxy = RedisProxy(REDIS_HOST, REDIS_PORT)
    try:
        db = services.redis.connection_pool.connection_kwargs["db"]
        base_url = extra_web(REDIS_URL=proxy.url(db))
        ws_id = api.create_workstream()
        sock = EventSocket(base_url, API_TOKEN, ws_id)
        log = event_log(services)
        first = log.publish(ws_id, "content", text="before")
        assert wait_until(lambda: len(sock.events) == 1, 10)
        proxy.cut()
        during = [log.publish(ws_id, "content", text=str(n)) for n in range(5)]
        time.sleep(1)
        proxy.restore()
        after = [log.publish(ws_id, "content", text=str(n)) for n in range(5, 8)]
        assert wait_until(lambda: len(sock.events) >= 9, 15), [e["id"] for e in sock.events]
        time.sleep(0.5)
        assert [e["id"] for e in sock.events] == [first, *during, *after]
        sock.close()
    finally:
        proxy.close()


# -- a restart with many sockets open -----------------------------------------------------------------


async def follow(url_of: Any, ws_id: str, want: int, seen: list[int], deadline: float) -> None:
    """A client that reconnects with `after` whenever its socket drops, until it holds `want` events."""
    while len(seen) < want and time.monotonic() < deadline:
        try:
            async with websockets.connect(url_of(ws_id, seen[-1] if seen else 0), open_timeout=20) as conn:
                async for text in conn:
                    event = json.loads(text)
                    if event.get("id") is not None:
                        seen.append(event["id"])
                    if len(seen) >= want:
                        return
        except (OSError, websockets.ConnectionClosed, websockets.InvalidHandshake, TimeoutError):
            await asyncio.sleep(0.2)


def test_a_web_restart_with_a_thousand_sockets_open_loses_and_repeats_nothing(services, api):
    sockets_count, workstreams_count, rounds = 1000, 20, 6
    port = free_port()
    env = {"TURNSTONE_SOCKETS_PER_PRINCIPAL": str(2 * sockets_count)}  # one token holds them all
    base_url = services.start_web(name="web-restarted", port=port, env=env)
    ws_ids = [api.create_workstream() for _ in range(workstreams_count)]
    log = event_log(services)
    published: dict[str, list[int]] = {ws_id: [log.publish(ws_id, "content", text="0")] for ws_id in ws_ids}
    base = base_url.replace("http://", "ws://")

    def url_of(ws_id: str, after: int) -> str:
        return f"{base}/v1/ws/workstreams/{ws_id}?token={API_TOKEN}&after={after}"

    want = 1 + rounds * 2
    seen: list[list[int]] = [[] for _ in range(sockets_count)]

    async def run() -> None:
        deadline = time.monotonic() + 120
        clients = [
            asyncio.create_task(follow(url_of, ws_ids[n % workstreams_count], want, seen[n], deadline))
            for n in range(sockets_count)
        ]
        loop = asyncio.get_running_loop()
        while sum(len(s) >= 1 for s in seen) < sockets_count and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        for n in range(rounds):
            for ws_id in ws_ids:
                published[ws_id].append(log.publish(ws_id, "content", text=f"{n}a"))
            if n == rounds // 2:  # the web process goes down and comes back, sockets open
                await loop.run_in_executor(None, services.kill, "web-restarted")
                for ws_id in ws_ids:  # published while no web process runs
                    published[ws_id].append(log.publish(ws_id, "content", text=f"{n}b"))
                await loop.run_in_executor(
                    None, lambda: services.start_web(name="web-restarted", port=port, env=env)
                )
            else:
                for ws_id in ws_ids:
                    published[ws_id].append(log.publish(ws_id, "content", text=f"{n}b"))
            await asyncio.sleep(0.3)
        await asyncio.gather(*clients)

    try:
        run_apart(run())
    finally:
        services.kill("web-restarted")
    for n, ids in enumerate(seen):
        assert ids == published[ws_ids[n % workstreams_count]], f"socket {n}"


def test_sockets_opening_all_at_once_are_each_counted_against_the_cap(services):
    """300 sockets of one user opening together: 64 are let in, however many of their checks
    wait on Redis at once (past the connection pool's size they used to fail and be let
    through uncounted, as if Redis were down)."""
    who = Principal(name="burst", user_id=f"burst-{uuid.uuid4().hex[:8]}", scopes=frozenset())

    async def run() -> list[tuple[str | None, str | None]]:
        client = caps.connect(services.redis_url)
        limits = caps.Caps(client, per_principal=64, per_process=10_000)
        try:
            return await asyncio.gather(*(limits.take(who) for _ in range(300)))
        finally:
            await client.delete(redis_keys.sockets_of(who.user_id))
            await client.aclose()

    results = run_apart(run())
    assert sum(ticket is not None for ticket, _ in results) == 64
    assert {why for ticket, why in results if ticket is None} == {
        "too many open sockets for this user (the limit is 64)"
    }
