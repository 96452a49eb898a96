"""The egress proxy: the one way out of a jail whose network mode is `proxy`.

One proxy per command. It listens on a Unix socket in a private 0700 folder (the jail
binds the socket in; app/sandbox/relay.py turns it back into 127.0.0.1:PORT inside the
jail) and understands two requests: `CONNECT host:port` (HTTPS, or any TCP) and plain
HTTP with an absolute URI. Every destination goes through the fetcher's SSRF guard
(app/tools/web/fetch/guard.py): the proxy resolves the name, judges every address, and
connects to a checked address itself, so no second lookup can rebind it. An optional
allow-list (`[sandbox] proxy_domains`) narrows it to named domains and their subdomains.
A refusal is a 403 with one plain-text line saying why.

    with EgressProxy(settings) as proxy:
        run_jailed(..., bind=proxy.socket_path)
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import shutil
import socket
import tempfile
import threading
from typing import TYPE_CHECKING

from app.tools.web.fetch.errors import RefusedError
from app.tools.web.fetch.fetcher import system_resolver
from app.tools.web.fetch.guard import Resolver, Target, parse_url, screen

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger(__name__)

SOCKET_NAME = "egress.sock"
NAME = "turnstone-jobs egress proxy"
MAX_HEAD_BYTES = 64 * 1024  # request line and headers; more is refused with a 431
CHUNK = 64 * 1024  # what one read moves; the proxy holds no more per direction
DEFAULT_MAX_CONNECTIONS = 32
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
# Never forwarded: they describe this hop, or carry the client's proxy credentials.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)


class EgressRequestError(Exception):
    """A request the proxy answers with `status` and a one-line reason instead of forwarding."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


REASONS = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout", 431: "Headers Too Large"}
REASONS.update({502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"})


def domain_allowed(host: str, domains: tuple[str, ...]) -> bool:
    """Whether `host` is on the allow-list: a name matches itself and its subdomains; no list allows all."""
    if not domains:
        return True
    name = host.lower().rstrip(".")
    return any(name == d or name.endswith("." + d) for d in domains)


class EgressProxy:
    """A forward proxy on a Unix socket, for the life of one command (a context manager)."""

    def __init__(
        self,
        settings: Settings,
        *,
        resolver: Resolver = system_resolver,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.allow_private = settings.tools.allow_private_network
        self.domains = settings.sandbox.proxy_domains
        self.resolver = resolver
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = threading.Event()
        self._folder = ""
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self.socket_path = ""

    def __enter__(self) -> EgressProxy:
        self._folder = tempfile.mkdtemp(prefix="turnstone-egress-")  # mode 0700
        self.socket_path = os.path.join(self._folder, SOCKET_NAME)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.socket_path)
            listener.listen(64)
        except OSError:
            listener.close()
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, name="egress-accept", daemon=True)
        self._acceptor.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening, cut every open connection and tunnel, remove the folder."""
        self._closed.set()
        if self._listener is not None:
            _shut(self._listener)
        with self._lock:
            open_now = list(self._open)
        for sock in open_now:
            _cut(sock)  # its own thread closes it, so no thread is left holding a closed socket
        if self._acceptor is not None:
            self._acceptor.join(timeout=5)
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            if not self._slots.acquire(blocking=False):
                log.warning("egress proxy: too many connections, refusing one")
                _answer(client, 503, "too many connections through this proxy at once")
                client.close()
                continue
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), name="egress-conn", daemon=True).start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)
        if self._closed.is_set():
            _cut(sock)

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        sock.close()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.settimeout(self.idle_timeout)
            head, rest = _read_head(client)
            method, target, lines = _parse_head(head)
            if method == "CONNECT":
                checked = self._screen_connect(target)
                upstream = self._connect(checked)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                checked = self._screen_url(target)
                upstream = self._connect(checked)
                upstream.sendall(_origin_request(method, checked, lines) + rest)
                rest = b""
            if rest:
                upstream.sendall(rest)
            self._pipe(client, upstream)
        except EgressRequestError as exc:
            _answer(client, exc.status, exc.reason)
        except OSError:
            pass  # the client or the server went away: nothing left to tell anyone
        finally:
            if upstream is not None:
                self._forget(upstream)
            self._forget(client)
            self._slots.release()

    def _screen_connect(self, target: str) -> Target:
        host, sep, port = target.rpartition(":")
        if not sep or not host or not port.isdigit() or not port.isascii() or not 0 < int(port) < 65536:
            raise EgressRequestError(400, f"CONNECT needs host:port, got {target[:200]!r}")
        return self._screen_url(f"https://{host}:{int(port)}/", connect=True)

    def _screen_url(self, text: str, *, connect: bool = False) -> Target:
        if not connect and not text.lower().startswith("http://"):
            raise EgressRequestError(400, "only absolute http:// URLs or CONNECT host:port are proxied")
        try:
            url = parse_url(text)
        except RefusedError as exc:
            raise EgressRequestError(400, _plain(exc)) from None
        host = url.raw_host.decode("ascii").lower()
        port = url.port or (443 if url.scheme == "https" else 80)
        if not domain_allowed(host, self.domains):
            log.warning("egress proxy refused %s:%d: not on sandbox.proxy_domains", host, port)
            raise EgressRequestError(403, f"{host} is not on the allowed domains (sandbox.proxy_domains)")
        try:
            checked = screen(url, self.resolver, self.allow_private)
        except RefusedError as exc:
            log.warning("egress proxy refused %s:%d: %s", host, port, _plain(exc))
            raise EgressRequestError(403, _plain(exc)) from None
        log.info("egress proxy allowed %s:%d", host, port)
        return checked

    def _connect(self, checked: Target) -> socket.socket:
        port = checked.url.port or (443 if checked.url.scheme == "https" else 80)
        failure = "no address"
        for address in checked.addresses:  # the screened addresses, never a second lookup
            try:
                upstream = socket.create_connection((address, port), timeout=self.connect_timeout)
            except TimeoutError:
                failure = f"connecting to {address} port {port} timed out"
            except OSError as exc:
                failure = f"cannot connect to {address} port {port} ({exc.strerror or exc})"
            else:
                upstream.settimeout(self.idle_timeout)
                self._track(upstream)
                return upstream
        raise EgressRequestError(502, failure)

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        """Move bytes both ways until one side closes or neither speaks for the idle timeout."""
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            open_reads = 2
            while open_reads and not self._closed.is_set():
                ready = selector.select(timeout=self.idle_timeout)
                if not ready:
                    return  # idle
                for key, _ in ready:
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(CHUNK)
                    if data:
                        peers[source].sendall(data)  # blocks (to the idle timeout) rather than buffers
                        continue
                    selector.unregister(source)
                    open_reads -= 1
                    try:
                        peers[source].shutdown(socket.SHUT_WR)
                    except OSError:
                        return


def _read_head(client: socket.socket) -> tuple[bytes, bytes]:
    """The request line and headers, and whatever came after them; bounded by MAX_HEAD_BYTES."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD_BYTES:
            raise EgressRequestError(431, f"the request head is longer than {MAX_HEAD_BYTES:,} bytes")
        try:
            data = client.recv(CHUNK)
        except TimeoutError:
            raise EgressRequestError(408, "no complete request before the idle timeout") from None
        if not data:
            raise OSError("the client closed before a complete request")
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise EgressRequestError(431, f"the request head is longer than {MAX_HEAD_BYTES:,} bytes")
    return head, rest


def _parse_head(head: bytes) -> tuple[str, str, list[str]]:
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise EgressRequestError(400, "the request head is not ASCII") from None
    request_line, *lines = text.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        raise EgressRequestError(400, "not an HTTP/1.x request line")
    if "\x00" in text:
        raise EgressRequestError(400, "the request contains a NUL byte")
    return parts[0].upper(), parts[1], lines


def _origin_request(method: str, checked: Target, lines: list[str]) -> bytes:
    """The request as the origin server is to see it: origin-form, without this hop's headers."""
    url = checked.url
    path = url.raw_path.decode("ascii") or "/"
    kept = []
    for line in lines:
        name, sep, _ = line.partition(":")
        if not sep or not name.strip():
            raise EgressRequestError(400, "a malformed header line")
        if name.strip().lower() not in HOP_BY_HOP:
            kept.append(line)
    kept.append("Connection: close")
    return (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{h}\r\n" for h in kept) + "\r\n").encode("ascii")


def _answer(client: socket.socket, status: int, reason: str) -> None:
    body = f"{NAME}: {reason}\n".encode("ascii", "backslashreplace")
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):  # the client is gone
        client.sendall(head.encode("ascii") + body)


def _plain(exc: RefusedError) -> str:
    text = str(exc)
    return text.removeprefix("Refused: ").replace("\r", " ").replace("\n", " ")


def _cut(sock: socket.socket) -> None:
    """End both directions of a connection, waking any thread blocked on it."""
    with contextlib.suppress(OSError):  # not connected, or already closed
        sock.shutdown(socket.SHUT_RDWR)


def _shut(sock: socket.socket) -> None:
    _cut(sock)
    sock.close()
