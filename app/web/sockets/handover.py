"""How an upgraded connection leaves gunicorn's request thread for the hub.

The worker opens a slot around a websocket request (`slot`); the view, once it has authorized
the request, puts what the hub needs into it (`offer`) and answers 101; the worker then hands
the connection to the hub instead of reading another request from it. No slot (a server other
than the service's gunicorn worker): the view says websockets cannot be served here.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from app.errors import ServiceError
from app.users.principal import Principal

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, section 1.3

_current = threading.local()


@dataclass
class Opening:
    """An authorized socket: who opened it, on what, from which cursor; or why it is refused
    (`refused`: sent as an `error` event before the close, as clients expect)."""

    ws_id: str
    raw_token: str
    who: Principal | None
    after: int
    refused: ServiceError | None = None


@dataclass
class Slot:
    opening: Opening | None = None


@contextmanager
def slot() -> Iterator[Slot]:
    """Where the view running on this thread leaves its `Opening` for the worker."""
    _current.slot = made = Slot()
    try:
        yield made
    finally:
        _current.slot = None


def offer(opening: Opening) -> bool:
    """Leave `opening` for the worker; False when no worker takes sockets over on this thread."""
    held: Slot | None = getattr(_current, "slot", None)
    if held is None:
        return False
    held.opening = opening
    return True


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for the client's Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()  # noqa: S324 - the protocol's


def is_valid_key(key: str | None) -> bool:
    """A Sec-WebSocket-Key is 16 bytes, base64-encoded."""
    if not key or len(key) != 24:
        return False
    try:
        return len(base64.b64decode(key, validate=True)) == 16
    except ValueError:
        return False
