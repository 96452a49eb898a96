"""One websocket on the hub's loop: frames in and out over wsproto, pings, and bounds.

What a socket may hold is bounded whatever its client does: bytes queued for a client that
does not read (`max_unsent`; past it the socket is closed with `FELL_BEHIND`, and the client
reconnects with `after`), a message being received (`max_message`, 1009 past it), and the
commands waiting for an answer (reading pauses while `MAX_PENDING_COMMANDS` wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any

from wsproto.connection import Connection as Frames
from wsproto.connection import ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, Pong, TextMessage
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

log = logging.getLogger(__name__)

# Close codes (docs/events.md, "Closing").
NORMAL = 1000
GOING_AWAY = 1001  # the web process is stopping: reconnect with `after`
POLICY = 1008  # refused or no longer authorized
TOO_BIG = 1009
TRY_LATER = 1013  # a cap on open sockets: reconnect later, with back-off
FELL_BEHIND = 4000  # the client did not read its frames: reconnect with `after`

MAX_PENDING_COMMANDS = 8
CLOSE_GRACE_SECONDS = 5.0  # after a close frame, how long the peer has to read up to it before a reset


class Connection(asyncio.Protocol):
    """The transport side of one socket; `on_text(text)` gets each whole message, `on_gone()`
    is called once when the connection ends, however it ends."""

    def __init__(
        self,
        max_unsent: int,
        max_message: int,
        on_text: Callable[[str | bytes], None],
        on_gone: Callable[[], None],
    ) -> None:
        self._frames = Frames(ConnectionType.SERVER)
        self._max_unsent = max_unsent
        self._max_message = max_message
        self._on_text = on_text
        self._on_gone = on_gone
        self._transport: asyncio.Transport | None = None
        self._parts: list[str | bytes] = []
        self._size = 0
        self._pending = 0
        self.closed = False
        self.awaiting_pong = False
        self.next_ping = 0.0

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        # Past this the transport calls pause_writing; unsent bytes are checked at each send.
        transport.set_write_buffer_limits(high=self._max_unsent)

    def data_received(self, data: bytes) -> None:
        try:
            self._frames.receive_data(data)
            for event in self._frames.events():
                self._handle(event)
        except (RemoteProtocolError, LocalProtocolError) as exc:
            log.info("websocket protocol error from a client: %s", type(exc).__name__)
            self.close(POLICY, "protocol error")

    def eof_received(self) -> bool:
        self.abort()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone()
        self._transport = None  # gone: a reset armed by `close` finds nothing to do

    def pause_writing(self) -> None:  # the buffer passed `max_unsent`
        self._fell_behind()

    # -- sending ----------------------------------------------------------------------------

    def send_text(self, text: str) -> None:
        self._send(TextMessage(data=text))

    def send_frame(self, frame: bytes) -> None:
        """A whole text frame made by `text_frame` (once, for every socket that gets it)."""
        if self.closed or self._transport is None:
            return
        if self._transport.get_write_buffer_size() > self._max_unsent:
            self._fell_behind()
            return
        self._transport.write(frame)

    def ping(self) -> bool:
        """Ping, unless the last ping went unanswered (then False: the peer is gone or stuck)."""
        if self.awaiting_pong:
            return False
        self.awaiting_pong = True
        self._send(Ping())
        return True

    def unsent(self) -> int:
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    def close(self, code: int = NORMAL, reason: str = "", drop: bool = False) -> None:
        """Send a close frame and end the connection; or, with `drop` (a client that does not
        read would never get it), reset it at once: what is queued for it, here and in the
        kernel, is thrown away."""
        if self.closed:
            return
        self.closed = True
        if not drop and self._frames.state == ConnectionState.OPEN and self._transport is not None:
            with contextlib.suppress(LocalProtocolError, RuntimeError):
                self._transport.write(self._frames.send(CloseConnection(code=code, reason=reason[:120])))
            loop = asyncio.get_running_loop()
            loop.call_later(CLOSE_GRACE_SECONDS, self.abort, True)
            self._transport.close()  # after what is queued is written
        else:
            self.abort(reset=True)
        self._gone()

    def abort(self, reset: bool = False) -> None:
        if self._transport is None:
            return
        sock = self._transport.get_extra_info("socket")
        if reset and sock is not None:
            with contextlib.suppress(OSError):  # linger 0: close sends a reset, not the queue
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._transport.abort()

    # -- commands ---------------------------------------------------------------------------

    def command_started(self) -> None:
        self._pending += 1
        if self._pending >= MAX_PENDING_COMMANDS and self._transport is not None:
            self._transport.pause_reading()

    def command_done(self) -> None:
        self._pending -= 1
        if self._pending < MAX_PENDING_COMMANDS and self._transport is not None and not self.closed:
            self._transport.resume_reading()

    # -- inside -----------------------------------------------------------------------------

    def _send(self, event: Any) -> None:
        if not self.closed and self._transport is not None:  # wsproto sends nothing once closed
            self.send_frame(self._frames.send(event))

    def _fell_behind(self) -> None:
        """Nothing more is queued: the close frame goes after what is, for a client that reads
        again to learn it must reconnect with `after`; one that does not is reset after the grace."""
        self.close(FELL_BEHIND, "too far behind: reconnect with after")

    def _handle(self, event: Any) -> None:
        if isinstance(event, TextMessage | BytesMessage):
            self._piece(event)
        elif isinstance(event, Ping):
            self._send(event.response())
        elif isinstance(event, Pong):
            self.awaiting_pong = False
        elif isinstance(event, CloseConnection):
            if self._frames.state != ConnectionState.CLOSED and self._transport is not None:
                self._transport.write(self._frames.send(event.response()))
            self.closed = True
            if self._transport is not None:
                self._transport.close()
            self._gone()

    def _piece(self, event: TextMessage | BytesMessage) -> None:
        self._size += len(event.data)
        if self._size > self._max_message:
            self.close(TOO_BIG, "message too big")
            return
        self._parts.append(bytes(event.data) if isinstance(event.data, bytearray) else event.data)
        if not event.message_finished:
            return
        whole: str | bytes = "".join(self._parts) if isinstance(event, TextMessage) else b"".join(self._parts)  # type: ignore[arg-type]
        self._parts, self._size = [], 0
        self._on_text(whole)

    def _gone(self) -> None:
        if self._on_gone is not None:
            gone, self._on_gone = self._on_gone, None  # type: ignore[assignment]
            self.closed = True
            gone()


def text_frame(text: str) -> bytes:
    """A server's unfragmented text frame (RFC 6455 5.2: a server does not mask): the same bytes
    for every socket, so an event going to many is framed once."""
    data = text.encode()
    size = len(data)
    if size < 126:
        head = bytes((0x81, size))
    elif size < 1 << 16:
        head = bytes((0x81, 126)) + size.to_bytes(2, "big")
    else:
        head = bytes((0x81, 127)) + size.to_bytes(8, "big")
    return head + data
