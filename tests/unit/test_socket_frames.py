"""A frame made once for every socket that gets it (app/web/sockets/connection.text_frame) reads
back, through a real websocket parser (wsproto's client end), as the text it carries, at each
of the protocol's three length encodings."""

from __future__ import annotations

import pytest
from wsproto.connection import Connection, ConnectionType
from wsproto.events import TextMessage

from app.web.sockets.connection import text_frame


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 300_000])
def test_a_text_frame_reads_back_whole_at_every_length_encoding(size):
    text = ("é✓" * size)[:size]  # multi-byte characters: the length is of the encoded bytes
    client = Connection(ConnectionType.CLIENT)
    client.receive_data(text_frame(text))
    messages = list(client.events())
    assert all(isinstance(m, TextMessage) for m in messages)
    assert "".join(m.data for m in messages) == text and messages[-1].message_finished


def test_a_closed_socket_whose_peer_left_in_the_grace_is_not_aborted_again(monkeypatch):
    """close() queues the close frame and arms a reset for a peer that never reads it; a peer
    that reads everything queued (the transport then ends itself) leaves nothing for that reset
    to do (it used to raise inside the loop, on a transport already gone)."""
    import asyncio
    import socket

    from app.web.sockets import connection as sockets_connection

    monkeypatch.setattr(sockets_connection, "CLOSE_GRACE_SECONDS", 0.05)
    errors: list[dict] = []
    gone: list[bool] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        ours, theirs = socket.socketpair()
        _transport, conn = await loop.create_connection(
            lambda: sockets_connection.Connection(
                1 << 20, 1 << 20, lambda _text: None, lambda: gone.append(True)
            ),
            sock=ours,
        )
        conn.send_text("x" * (4 << 20))  # more than the kernel takes: the rest waits in the transport
        conn.close(sockets_connection.NORMAL)
        theirs.setblocking(False)
        while await loop.sock_recv(theirs, 1 << 20):  # all of it, up to our end
            pass
        theirs.close()
        await asyncio.sleep(0.2)  # the grace passed

    from tests.apart import run_apart

    run_apart(run())
    assert gone == [True]
    assert errors == []
