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
