"""The guarded fetcher: one GET through the guard, redirects followed by hand, the body capped.

Every hop is screened before it is requested and connected to the addresses that
were screened (`PinnedTransport`). Failures raise `FetchError` with a message for
the model; nothing here knows which tool asked.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.settings import ToolSettings
from app.tools.web.fetch.addresses import Reach
from app.tools.web.fetch.errors import FetchError, RefusedError
from app.tools.web.fetch.guard import Resolver, Target, check_prepared, check_redirect, parse_url, screen

# The guarded fetcher (app/tools/fetch) and web_fetch.
FETCH_MAX_BYTES = 32 * 1024 * 1024  # a body past this is refused, counted as it streams
FETCH_MAX_REDIRECTS = 5  # followed by hand, each hop screened; the sixth is refused
FETCH_CONNECT_TIMEOUT_SECONDS = 10.0
FETCH_READ_TIMEOUT_SECONDS = 30.0  # the longest wait for the next bytes of a response
FETCH_TOTAL_SECONDS = 120.0  # one fetch, every hop and the whole body, however it trickles
FETCH_USER_AGENT = "turnstone-jobs/0.1 (web_fetch)"

if TYPE_CHECKING:
    import httpcore
    import httpx

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MIB = 1024 * 1024
# identity: the size cap then holds on the wire too, and no small body unpacks into a huge one
HEADERS = {"User-Agent": FETCH_USER_AGENT, "Accept-Encoding": "identity"}


def system_resolver(host: str) -> list[str]:
    """Every address the system's resolver gives for `host`, in its order."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _never() -> bool:
    return False


@dataclass(frozen=True)
class Page:
    """A fetched response, whatever its status: the caller decides what a 404 means."""

    url: str  # the final URL, after redirects
    status: int
    reason: str
    content_type: str  # the media type, lower-case, without parameters; "" when not given
    charset: str | None
    body: bytes
    redirects: tuple[str, ...] = ()  # the URLs that redirected, in order
    is_private: bool = False  # the final target is on a private network (allowed by settings)


class Fetcher:
    """GETs public URLs (and wholly private ones with `allow_private`); thread-safe, no state."""

    def __init__(
        self,
        *,
        resolver: Resolver = system_resolver,
        allow_private: bool = False,
        max_bytes: int = FETCH_MAX_BYTES,
        max_redirects: int = FETCH_MAX_REDIRECTS,
        connect_timeout: float = FETCH_CONNECT_TIMEOUT_SECONDS,
        read_timeout: float = FETCH_READ_TIMEOUT_SECONDS,
        total_seconds: float = FETCH_TOTAL_SECONDS,
        verify: ssl.SSLContext | bool = True,
        dialer: httpcore.NetworkBackend | None = None,
    ) -> None:
        self.resolver = resolver
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.total_seconds = total_seconds
        self._timeouts = (read_timeout, connect_timeout)
        self._verify = verify
        self._dialer = dialer  # tests dial a fake internet; production dials the checked address

    @classmethod
    def from_settings(cls, tools: ToolSettings) -> Fetcher:
        return cls(allow_private=tools.allow_private_network)

    def screen(self, url: str) -> Target:
        """The URL's target if it may be fetched (no request is made); `RefusedError` if not."""
        return screen(parse_url(url), self.resolver, self.allow_private)

    def fetch(self, url: str, should_stop: Callable[[], bool] = _never, *, private_ok: bool = True) -> Page:
        """GET `url`, following at most `max_redirects` redirects, each screened first.

        `private_ok=False`: the call was prepared for a public target, so a first hop that is
        private now is refused (`check_prepared`); its redirects into private space are
        refused too, as a public site's always are."""
        target = self.screen(url)
        check_prepared(target, private_ok)
        public_source = target if target.verdict.reach is Reach.PUBLIC else None
        deadline = time.monotonic() + self.total_seconds
        redirects: list[str] = []
        while True:
            hop = self._request(target, deadline, should_stop)
            if isinstance(hop, Page):
                return replace(hop, redirects=tuple(redirects))
            if len(redirects) == self.max_redirects:
                raise RefusedError(
                    f"Refused: more than {self.max_redirects} redirects "
                    f"(the last one, from {target.url}, pointed to {hop})"
                )
            redirects.append(str(target.url))
            target = self._screen_hop(target, hop)
            check_redirect(public_source, target)
            if target.verdict.reach is Reach.PUBLIC:
                public_source = target

    def _screen_hop(self, source: Target, hop: httpx.URL) -> Target:
        try:
            return self.screen(str(hop))
        except RefusedError as exc:
            why = str(exc).removeprefix("Refused: ")
            raise RefusedError(f"Refused: {source.url} redirected to {hop}, and {why}") from None

    def _request(self, target: Target, deadline: float, should_stop: Callable[[], bool]) -> Page | httpx.URL:
        """One hop: the page, or where a redirect points (not yet screened)."""
        if should_stop():
            raise FetchError("Cancelled before the page was fetched")
        if time.monotonic() > deadline:
            raise FetchError(f"Error: gave up after {self.total_seconds:g} s, before requesting {target.url}")
        import httpx  # here, not at the top: see app/tools/web/fetch/__init__

        from app.tools.web.fetch.transport import PinnedTransport

        transport = PinnedTransport(target.addresses, verify=self._verify, dialer=self._dialer)
        read, connect = self._timeouts
        # trust_env=False: no proxy from the environment (it would look the name up again).
        timeout = httpx.Timeout(read, connect=connect)
        client = httpx.Client(transport=transport, timeout=timeout, trust_env=False, headers=HEADERS)
        try:
            with client, client.stream("GET", target.url) as response:
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    return _join(target.url, location)
                body = self._read(response, deadline, should_stop)
        except httpx.TimeoutException as exc:
            raise FetchError(f"Error: {target.url} did not answer in time ({_timeout_kind(exc)})") from None
        except httpx.ConnectError as exc:
            raise FetchError(f"Error: could not connect to {target.host} ({exc})") from None
        except httpx.HTTPError as exc:
            raise FetchError(f"Error: fetching {target.url} failed ({exc})") from None
        return Page(
            url=str(target.url),
            status=response.status_code,
            reason=response.reason_phrase,
            content_type=response.headers.get("content-type", "").split(";")[0].strip().lower(),
            charset=response.charset_encoding,
            body=body,
            is_private=target.is_private,
        )

    def _read(self, response: httpx.Response, deadline: float, should_stop: Callable[[], bool]) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise RefusedError(self._too_large(response.url, f"it declares {int(declared):,} bytes"))
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > self.max_bytes:
                raise RefusedError(self._too_large(response.url, "it kept coming past that"))
            if should_stop():
                raise FetchError("Cancelled while the page was being fetched")
            if time.monotonic() > deadline:
                raise FetchError(f"Error: {response.url} took longer than {self.total_seconds:g} s to send")
        return bytes(body)

    def _too_large(self, url: httpx.URL, how: str) -> str:
        size = f"{self.max_bytes / MIB:g} MiB" if self.max_bytes >= MIB else f"{self.max_bytes:,} bytes"
        return f"Refused: the response from {url} is larger than {size} ({how})"


def _join(base: httpx.URL, location: str) -> httpx.URL:
    import httpx

    try:
        return base.join(location)
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        invalid = location[:200]
        raise RefusedError(f"Refused: {base} redirected to an invalid URL {invalid!r} ({exc})") from None


def _timeout_kind(exc: httpx.TimeoutException) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return "no connection after the connect timeout"
    if isinstance(exc, httpx.ReadTimeout):
        return "it stopped sending for longer than the read timeout"
    return "timed out"
