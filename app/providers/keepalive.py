"""A streamed reply ends at its last event, and its connection is kept for the next step.

The openai SDK's synchronous stream stops reading at `data: [DONE]` and closes the response.
Over HTTP/1.1 the end of the chunked body still lies unread then, so the client's pool cannot
take the connection back and closes it: every model step would pay a new connection, and
against a hosted API a new TLS handshake (the SDK's asynchronous stream reads on; see
openai/openai-python#3440). The anthropic SDK's reads on past `message_stop` to the body's
end, however long a server takes to end it: a server that held it open held the step until
the read timed out, and the complete reply was then asked for again.

`ending_with` passes a stream's events on up to its last one, and before that one reads the
body to its end: at most READ_ON_SECONDS, after which the connection is shut (the reply is
whole whatever happens then; only the connection is not kept).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

log = logging.getLogger(__name__)

READ_ON_SECONDS = 1.0  # how long a server may take to end a body after its last event
_WATCH_TICK_SECONDS = 0.25  # how often the watch looks at what it guards

E = TypeVar("E")


def ending_with(
    events: Iterator[E], response: Any, is_last: Callable[[E], bool], stopped: tuple[type[BaseException], ...]
) -> Iterator[E]:
    """`events` up to the one `is_last` picks, which is passed on once the body has been read to
    its end (`read_to_end`); nothing after it."""
    for event in events:
        if is_last(event):
            read_to_end(response, events, stopped)
            yield event
            return
        yield event


def read_to_end(response: Any, rest: Iterator[object], stopped: tuple[type[BaseException], ...]) -> None:
    """Read what is left of `response`'s body through `rest` (the rest of its events), at most
    READ_ON_SECONDS; `stopped`: the errors `rest` raises when its connection fails or is shut."""
    if getattr(response, "http_version", None) != "HTTP/1.1":
        return  # HTTP/2 closes the one stream and keeps the connection
    network = response.extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if not isinstance(sock, socket.socket):
        return  # a transport with no socket of its own (a test's, a mock's): nothing to keep
    token = _watch.guard(sock, READ_ON_SECONDS)
    try:
        for _ in rest:
            pass  # events after [DONE] (a server's comments) change nothing
    except stopped as exc:
        log.info("a model server held its reply open after it ended; closed it (%s)", exc)
    finally:
        _watch.release(token)


class _Watch:
    """One thread for the process, started when first needed: shuts down a guarded socket whose
    time runs out before it is released, which ends a read blocked on it (closing it would not)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guarded: dict[int, tuple[float, socket.socket]] = {}
        self._next_token = 0
        self._thread: threading.Thread | None = None

    def guard(self, sock: socket.socket, seconds: float) -> int:
        with self._lock:
            self._next_token += 1
            self._guarded[self._next_token] = (time.monotonic() + seconds, sock)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="model-keepalive-watch", daemon=True)
                self._thread.start()
            return self._next_token

    def release(self, token: int) -> None:
        with self._lock:
            self._guarded.pop(token, None)

    def _run(self) -> None:
        while True:
            time.sleep(_WATCH_TICK_SECONDS)
            now = time.monotonic()
            # Under the lock: a socket released is never shut after its release, when its
            # connection may be back in the pool.
            with self._lock:
                for token in [t for t, (deadline, _) in self._guarded.items() if deadline <= now]:
                    _, sock = self._guarded.pop(token)
                    with contextlib.suppress(OSError):  # closed meanwhile
                        sock.shutdown(socket.SHUT_RDWR)


_watch = _Watch()
