"""An httpx transport that connects only to addresses the guard checked.

The URL keeps its host name, so the Host header and the TLS server name (SNI and
certificate check) are the site's; only the socket is dialled to the pinned
address. No name is looked up here, so a rebinding DNS has nothing to change.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import httpcore
import httpx

# httpcore's exceptions as httpx's, so callers of an httpx client see one family.
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
)
_CORE_ERRORS = tuple(core for core, _ in _ERRORS)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except _CORE_ERRORS as exc:
        mapped = next(m for core, m in _ERRORS if isinstance(exc, core))
        raise mapped(str(exc) or type(exc).__name__) from exc


class PinnedBackend(httpcore.NetworkBackend):
    """Dials the checked addresses, in order, whatever host the connection names."""

    def __init__(self, addresses: Sequence[str], dialer: httpcore.NetworkBackend | None = None) -> None:
        if not addresses:
            raise ValueError("a pinned connection needs at least one address")
        self._addresses = tuple(addresses)
        self._dialer = dialer or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        options = list(socket_options or [])
        failure: Exception | None = None
        for address in self._addresses:
            try:
                return self._dialer.connect_tcp(address, port, timeout, local_address, options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc  # the host's next checked address may answer
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("a pinned connection never uses a unix socket")

    def sleep(self, seconds: float) -> None:
        self._dialer.sleep(seconds)


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._stream

    def close(self) -> None:
        closer = getattr(self._stream, "close", None)
        if closer is not None:
            closer()


class PinnedTransport(httpx.BaseTransport):
    """One host's connections, each dialled to one of its checked addresses."""

    def __init__(
        self,
        addresses: Sequence[str],
        *,
        verify: ssl.SSLContext | bool = True,
        dialer: httpcore.NetworkBackend | None = None,
    ) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=1,
            network_backend=PinnedBackend(addresses, dialer),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            response = self._pool.handle_request(core_request)
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()
