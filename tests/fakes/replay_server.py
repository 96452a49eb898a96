"""A replay server: serves recorded model-server answers byte for byte over real HTTP and
records the exact bytes of every request it is sent (tests/providers/ drives it).

An answer is a `Recording`: a status, headers and a body as a real server sent them. An
event stream (`text/event-stream`) goes out chunked, one chunk per event, as servers flush
them; anything else with a content-length. Requests go to `/<family>/...`, so a test sees
which family's endpoint the service asked; the answers are served in the order queued.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie"})


@dataclass(frozen=True)
class Recording:
    """One answer as the server sent it. `stall_after`: events sent before the server stops
    sending (without closing) for `stall_seconds`, or until the server stops."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    stall_after: int | None = None
    stall_seconds: float = 3600.0

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")

    def events(self) -> list[bytes]:
        """The body split after each blank line (an SSE event's end), separators kept."""
        pieces, rest = [], self.body
        while (end := rest.find(b"\n\n")) != -1:
            pieces.append(rest[: end + 2])
            rest = rest[end + 2 :]
        return [*pieces, rest] if rest else pieces

    def stalled(self, after: int) -> Recording:
        return Recording(self.status, self.headers, self.body, stall_after=after)


def http(raw: bytes) -> Recording:
    """A `Recording` from an HTTP response's text: the status line, header lines, an empty
    line, then the body exactly as given (its bytes are what is sent)."""
    head, sep, body = raw.partition(b"\n\n")
    if not sep:
        raise ValueError("a recording needs an empty line between its headers and its body")
    status_line, *header_lines = head.decode().splitlines()
    status = int(status_line.split()[1])
    headers = tuple(
        (name.strip(), value.strip()) for name, _, value in (h.partition(":") for h in header_lines)
    )
    return Recording(status, headers, body)


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    raw: bytes  # the body's exact bytes
    headers: dict[str, str]  # names lower-cased, secrets left out
    arrived: float  # time.monotonic() when its headers were read

    @property
    def family(self) -> str:
        return self.path.strip("/").split("/", 1)[0]

    def json(self) -> Any:
        return json.loads(self.raw)


class ReplayServer:
    """Real HTTP on 127.0.0.1 in a daemon thread; the test queues answers in-process."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._queue: list[Recording] = []
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self.requests: list[ReceivedRequest] = []
        self.models: dict[str, Recording] = {}  # family -> its GET /v1/models answer
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.replay = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def base_url(self, family: str, suffix: str = "/v1") -> str:
        return f"{self.url}/{family}{suffix}"

    def enqueue(self, *recordings: Recording) -> None:
        with self._changed:
            self._queue.extend(recordings)

    def reset(self) -> None:
        with self._changed:
            self._queue.clear()
            self.requests.clear()

    def posts(self) -> list[ReceivedRequest]:
        with self._changed:
            return [r for r in self.requests if r.method == "POST"]

    def left(self) -> int:
        with self._changed:
            return len(self._queue)

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._changed:
            connections, self._connections = set(self._connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def _receive(self, request: ReceivedRequest) -> Recording | None:
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()
            if request.method == "GET":
                return self.models.get(request.family)
            return self._queue.pop(0) if self._queue else None


NOTHING_QUEUED = Recording(
    500, (("content-type", "application/json"),), b'{"error":{"message":"replay server: nothing queued"}}'
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    @property
    def replay(self) -> ReplayServer:
        return self.server.replay  # type: ignore[attr-defined]

    def setup(self) -> None:
        super().setup()
        with self.replay._changed:
            self.replay._connections.add(self.connection)

    def finish(self) -> None:
        with self.replay._changed:
            self.replay._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def handle(self) -> None:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        return None

    def do_GET(self) -> None:
        self._answer(b"", time.monotonic())

    def do_POST(self) -> None:
        arrived = time.monotonic()
        self._answer(self.rfile.read(int(self.headers.get("content-length") or 0)), arrived)

    def _answer(self, raw: bytes, arrived: float) -> None:
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in SECRET_HEADERS}
        recording = self.replay._receive(ReceivedRequest(self.command, self.path, raw, headers, arrived))
        if recording is None:
            if self.command == "GET":
                recording = Recording(404, (("content-type", "application/json"),), b'{"error":"not found"}')
            else:
                recording = NOTHING_QUEUED
        self.send_response(recording.status)
        for name, value in recording.headers:
            if name.lower() not in ("content-length", "transfer-encoding"):
                self.send_header(name, value)
        if "event-stream" not in recording.content_type:
            self.send_header("content-length", str(len(recording.body)))
            self.end_headers()
            self.wfile.write(recording.body)
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for number, event in enumerate(recording.events()):
            if number == recording.stall_after:
                if self.replay._stopping.wait(recording.stall_seconds):
                    self.close_connection = True
                    return
                self.close_connection = True  # a stalled stream's connection is not reused
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
