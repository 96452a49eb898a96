"""The websocket's writes: frames from two threads and pings between them reach a slow reader
whole, over a real socket pair, decoded by a real websocket parser (wsproto) on the other end.

Before, frames went out through `socket.send` (which may write part of one when the reader is
slow) and the library's ping thread wrote beside them without a lock: a ping could land inside
a half-written frame, and the client read garbage."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

from wsproto.connection import Connection, ConnectionType
from wsproto.events import Ping, TextMessage

from app.web.websocket import _SerialSocket

FRAMES = 60
FRAME_CHARS = 64 * 1024


def test_frames_and_pings_from_several_threads_arrive_whole_at_a_slow_reader():
    server_end, client_end = socket.socketpair()
    client_end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the reader falls behind
    peer = SimpleNamespace(
        sock=server_end, ws=Connection(ConnectionType.SERVER), connected=True, pong_received=True,
        close_reason=None, close_message=None,
    )  # fmt: skip
    ws = _SerialSocket(peer)
    done = threading.Event()

    def sender(tag: str) -> None:
        for n in range(FRAMES):
            ws.send(f"{tag}{n:04d}" + tag * FRAME_CHARS)

    def pinger() -> None:
        while not done.is_set():
            peer.pong_received = True  # as if each ping were answered at once
            ws.ping()
            time.sleep(0.001)

    threads = [threading.Thread(target=sender, args=(t,)) for t in "ab"] + [threading.Thread(target=pinger)]
    for t in threads:
        t.start()
    reader = Connection(ConnectionType.CLIENT)
    texts: list[str] = []
    pings = 0
    partial = ""
    while len(texts) < 2 * FRAMES:
        time.sleep(0.0005)  # slow
        data = client_end.recv(8192)
        reader.receive_data(data)
        for event in reader.events():
            if isinstance(event, TextMessage):
                partial += event.data
                if event.message_finished:
                    texts.append(partial)
                    partial = ""
            elif isinstance(event, Ping):
                pings += 1
            else:
                raise AssertionError(f"the stream broke: {event!r}")
    done.set()
    for t in threads:
        t.join()
    server_end.close()
    client_end.close()
    for tag in "ab":
        mine = [t for t in texts if t[0] == tag]
        assert [t[:5] for t in mine] == [f"{tag}{n:04d}" for n in range(FRAMES)]
        assert all(t[5:] == tag * FRAME_CHARS for t in mine)
    assert pings > 0


def test_a_ping_left_unanswered_says_so_and_sends_nothing():
    server_end, client_end = socket.socketpair()
    peer = SimpleNamespace(
        sock=server_end, ws=Connection(ConnectionType.SERVER), connected=True, pong_received=True,
        close_reason=None, close_message=None,
    )  # fmt: skip
    ws = _SerialSocket(peer)
    assert ws.ping() is True
    assert ws.ping() is False  # no pong came back: the caller closes the socket
    client_end.setblocking(False)
    reader = Connection(ConnectionType.CLIENT)
    reader.receive_data(client_end.recv(1024))
    assert [type(e) for e in reader.events()] == [Ping]
    server_end.close()
    client_end.close()
