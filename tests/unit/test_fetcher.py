"""The guarded fetcher: the SSRF table (every vector refused by default), pinning, redirects, the cap.

Targets are real HTTP servers on 127.0.0.1. Names resolve through a fake resolver;
"public" test addresses are dialled by a fake internet that sends them to a
loopback server and lets no other address off the machine.
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpcore
import pytest

from app.settings import ToolSettings
from app.tools.web.fetch import Fetcher, FetchError, RefusedError
from app.tools.web.fetch.addresses import Reach, judge, parse_literal
from app.tools.web.fetch.fetcher import FETCH_MAX_BYTES, FETCH_MAX_REDIRECTS

PUBLIC_IP = "93.184.216.34"  # a public address; the fake internet sends it to a loopback site
OTHER_PUBLIC_IP = "151.101.1.69"
MIB = 1024 * 1024

Route = Callable[[BaseHTTPRequestHandler], None]


# -- real servers on 127.0.0.1 -------------------------------------------------------


class Site:
    """A real HTTP(S) server on 127.0.0.1 that records every request it gets."""

    def __init__(self, routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> None:
        self.routes = routes
        self.hits: list[tuple[str, str]] = []  # (path, Host header)
        self.released = threading.Event()  # ends the routes that stall
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return None

            def do_GET(self) -> None:
                site.hits.append((self.path, self.headers.get("Host", "")))
                route = site.routes.get(self.path.split("?")[0], page("not here", status=404))
                # The fetcher may hang up mid-body (past the cap): what it should do.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    route(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def url(self, path: str = "/", host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    @property
    def paths(self) -> list[str]:
        return [path for path, _host in self.hits]

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def page(body: str | bytes, content_type: str = "text/html; charset=utf-8", status: int = 200) -> Route:
    data = body.encode() if isinstance(body, str) else body

    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return route


def redirect(location: str, status: int = 302) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return route


def endless(chunk: int = MIB) -> Route:
    """A chunked body with no Content-Length that never ends by itself."""

    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        data = b"x" * chunk
        while True:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    return route


def declared(size: int) -> Route:
    """Headers that promise `size` bytes; the body is never sent."""

    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()

    return route


@pytest.fixture
def sites() -> Iterator[Callable[..., Site]]:
    started: list[Site] = []

    def start(routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> Site:
        site = Site(routes, tls)
        started.append(site)
        return site

    yield start
    for site in started:
        site.close()


# -- the fake name service and the fake internet ------------------------------------------


class FakeResolver:
    """Names to addresses from a table; a list of answers is given one per lookup (rebinding)."""

    TABLE: dict[str, list[str] | list[list[str]]] = {
        "localhost": ["127.0.0.1"],
        "mixed.test": [PUBLIC_IP, "10.0.0.7"],
        "v6mixed.test": ["2606:4700::1111", "::1"],
        "127.0.0.1.nip.io": ["127.0.0.1"],
        "internal.test": ["10.1.2.3"],
        "metadata-alias.test": ["169.254.169.254"],
        "public.test": [PUBLIC_IP],
    }

    def __init__(self, **extra: list[str] | list[list[str]]) -> None:
        self.table = {**self.TABLE, **{name.replace("_", "."): v for name, v in extra.items()}}
        self.calls: list[str] = []

    def __call__(self, host: str) -> list[str]:
        self.calls.append(host)
        answer = self.table.get(host)
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if answer and isinstance(answer[0], list):  # one answer per lookup, the last one repeating
            nth = min(self.calls.count(host), len(answer)) - 1
            return list(answer[nth])
        return [str(a) for a in answer]


class FakeInternet(httpcore.SyncBackend):
    """Dials loopback addresses as they are and the public test addresses to a loopback
    site; any other address is unreachable, so nothing a test does leaves the machine."""

    def __init__(self, routes: dict[str, int] | None = None) -> None:
        self.routes = routes or {}
        self.dialled: list[str] = []

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # type: ignore[no-untyped-def]
        self.dialled.append(host)
        if host in self.routes:
            host, port = "127.0.0.1", self.routes[host]
        elif not ipaddress.ip_address(host).is_loopback:
            raise httpcore.ConnectError(f"{host} is unreachable from a test")
        return super().connect_tcp(host, port, timeout, local_address, socket_options)


def fetcher(resolver: FakeResolver | None = None, net: FakeInternet | None = None, **options) -> Fetcher:
    return Fetcher(resolver=resolver or FakeResolver(), dialer=net or FakeInternet(), **options)


# -- the table: every vector is refused by default, before anything is dialled ----------------

LOOPBACK = "a loopback address"
PRIVATE = "a private (RFC 1918) address"
CGNAT = "a carrier-grade NAT address"
ULA = "a unique local address"
LINK_LOCAL = "a link-local address"
METADATA = "a cloud metadata address"
METADATA_NAME = "is a cloud metadata service"
MULTICAST = "a multicast address"
UNSPECIFIED = "the unspecified address"
DOCUMENTATION = "a documentation address"
USERINFO = "carries a user name or password"
SCHEME = "only http:// and https:// URLs can be fetched"

VECTORS = [
    # IPv4 spelt every way a browser or libc reads it
    ("http://127.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://2130706433/", "2130706433 is 127.0.0.1, a loopback address"),
    ("http://0177.0.0.1/", "is not a valid URL"),  # httpx refuses the spelling: nothing is requested
    ("http://0177.1/", "0177.1 is 127.0.0.1, a loopback address"),
    ("http://0x7f.1/", "0x7f.1 is 127.0.0.1, a loopback address"),
    ("http://0x7f000001/", "is 127.0.0.1, a loopback address"),
    ("http://017700000001/", "is 127.0.0.1, a loopback address"),
    ("http://127.1/", "127.1 is 127.0.0.1, a loopback address"),
    ("http://127.0.0.1./", LOOPBACK),
    ("http://0.0.0.0/", UNSPECIFIED),
    ("http://0/", "0 is 0.0.0.0, the unspecified address"),
    ("http://1.2.3.4.5/", "looks like an IP address but is not a valid one"),
    # IPv6, and the IPv6 forms that carry an IPv4 address
    ("http://[::]/", UNSPECIFIED),
    ("http://[::1]/", LOOPBACK),
    ("http://[::ffff:127.0.0.1]/", "a loopback address (127.0.0.1 inside an IPv6 address)"),
    ("http://[::ffff:7f00:1]/", LOOPBACK),
    ("http://[::ffff:10.0.0.1]/", PRIVATE),
    ("http://[::ffff:169.254.169.254]/", METADATA),
    ("http://[::127.0.0.1]/", LOOPBACK),  # IPv4-compatible
    ("http://[::ffff:0:127.0.0.1]/", LOOPBACK),  # IPv4-translated
    ("http://[2002:7f00:1::]/", LOOPBACK),  # 6to4 of 127.0.0.1
    ("http://[2002:a9fe:a9fe::1]/", METADATA),  # 6to4 of 169.254.169.254
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", LOOPBACK),  # Teredo, client 127.0.0.1
    ("http://[64:ff9b::7f00:1]/", LOOPBACK),  # NAT64
    ("http://[64:ff9b::a9fe:a9fe]/", METADATA),
    ("http://[64:ff9b:1::a00:1]/", PRIVATE),  # local-use NAT64 of 10.0.0.1
    # private, shared and local ranges
    ("http://10.0.0.1/", PRIVATE),
    ("http://172.16.5.4/", PRIVATE),
    ("http://192.168.1.1/", PRIVATE),
    ("http://100.64.0.1/", CGNAT),
    ("http://[fd00::1]/", ULA),
    ("http://[fc00::1]/", ULA),
    ("http://169.254.1.1/", LINK_LOCAL),
    ("http://[fe80::1]/", LINK_LOCAL),
    ("http://[fe80::1%25eth0]/", LINK_LOCAL),
    # cloud metadata, by address and by name
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"),
    ("http://100.100.100.200/latest/meta-data/", METADATA),  # Alibaba, inside CGNAT space
    ("http://[fd00:ec2::254]/", METADATA),  # AWS over IPv6, inside the ULA range
    ("http://metadata.google.internal/computeMetadata/v1/", METADATA_NAME),
    ("http://METADATA.GOOGLE.INTERNAL./", METADATA_NAME),
    ("http://metadata/", METADATA_NAME),
    ("http://instance-data.ec2.internal/", METADATA_NAME),
    ("http://metadata-alias.test/", "metadata-alias.test resolves to 169.254.169.254, a cloud metadata"),
    # multicast, broadcast, reserved, documentation
    ("http://224.0.0.1/", MULTICAST),
    ("http://[ff02::1]/", MULTICAST),
    ("http://255.255.255.255/", "the broadcast address"),
    ("http://240.0.0.1/", "a reserved address"),
    ("http://192.0.2.10/", DOCUMENTATION),
    ("http://[2001:db8::1]/", DOCUMENTATION),
    # names
    ("http://localhost/", "localhost resolves to 127.0.0.1, a loopback address"),
    ("http://127.0.0.1.nip.io/", LOOPBACK),
    ("http://internal.test/", "internal.test resolves to 10.1.2.3, a private"),
    ("http://mixed.test/", "mixed.test resolves to 10.0.0.7, a private"),  # one private among several
    ("http://v6mixed.test/", LOOPBACK),
    ("http://nowhere.test/", "cannot resolve nowhere.test"),
    # userinfo tricks
    ("http://evil@127.0.0.1/", USERINFO),
    ("http://public.test@127.0.0.1/", USERINFO),
    ("http://user:secret@public.test/", USERINFO),
    # schemes
    ("file:///etc/passwd", SCHEME),
    ("gopher://127.0.0.1:6379/_INFO", SCHEME),
    ("ftp://public.test/", SCHEME),
    ("ws://public.test/", SCHEME),
    ("javascript:alert(1)", SCHEME),
    ("data:text/html,<h1>hi</h1>", SCHEME),
    ("//public.test/", "no scheme"),
]


@pytest.mark.parametrize(("url", "reason"), VECTORS, ids=[url for url, _ in VECTORS])
def test_every_vector_is_refused_by_default_before_anything_is_dialled(url, reason):
    net = FakeInternet()
    with pytest.raises(RefusedError) as refused:
        fetcher(net=net).fetch(url)
    assert str(refused.value).startswith("Refused: ")
    assert reason in str(refused.value)
    assert net.dialled == []


def test_the_table_is_big_enough():
    assert len(VECTORS) >= 40


def test_a_refusal_says_what_the_address_is_and_what_is_allowed():
    with pytest.raises(RefusedError) as refused:
        fetcher().fetch("http://127.0.0.1:8080/admin")
    assert str(refused.value) == (
        "Refused: 127.0.0.1 is a loopback address; "
        "only public addresses may be fetched (tools.allow_private_network is off)"
    )


NEVER_EVEN_WHEN_PRIVATE_IS_ALLOWED = [
    ("http://169.254.169.254/", METADATA),
    ("http://[fd00:ec2::254]/", METADATA),
    ("http://100.100.100.200/", METADATA),
    ("http://metadata.google.internal/", METADATA_NAME),
    ("http://metadata-alias.test/", METADATA),
    ("http://169.254.1.1/", LINK_LOCAL),
    ("http://[fe80::1]/", LINK_LOCAL),
    ("http://[::ffff:169.254.169.254]/", METADATA),
    ("http://224.0.0.1/", MULTICAST),
    ("http://0.0.0.0/", UNSPECIFIED),
    ("http://[::]/", UNSPECIFIED),
    ("http://mixed.test/", "resolves to public and private addresses (93.184.216.34, 10.0.0.7)"),
    ("http://evil@127.0.0.1/", USERINFO),
    ("file:///etc/passwd", SCHEME),
]


@pytest.mark.parametrize(("url", "reason"), NEVER_EVEN_WHEN_PRIVATE_IS_ALLOWED)
def test_metadata_link_local_and_half_public_hosts_stay_refused_with_private_allowed(url, reason):
    net = FakeInternet()
    with pytest.raises(RefusedError) as refused:
        fetcher(net=net, allow_private=True).fetch(url)
    assert reason in str(refused.value) and net.dialled == []


def test_the_settings_switch_private_targets_on():
    assert Fetcher.from_settings(ToolSettings()).allow_private is False
    assert Fetcher.from_settings(ToolSettings(allow_private_network=True)).allow_private is True


# -- fetching: pinned to the checked address ---------------------------------------------------


def test_a_public_page_is_fetched_from_the_checked_address_under_its_own_host_name(sites):
    site = sites({"/": page("<p>hello</p>")})
    net = FakeInternet({PUBLIC_IP: site.port})
    resolver = FakeResolver()
    got = fetcher(resolver, net).fetch("http://public.test:8080/")
    assert got.status == 200 and got.body == b"<p>hello</p>" and got.content_type == "text/html"
    assert got.charset == "utf-8" and got.url == "http://public.test:8080/" and not got.is_private
    assert net.dialled == [PUBLIC_IP]
    assert site.hits == [("/", "public.test:8080")]  # the Host header is the site's, not the address
    assert resolver.calls == ["public.test"]


def test_a_wholly_private_target_is_fetched_when_private_is_allowed(sites):
    site = sites({"/status": page("all good", "text/plain")})
    got = fetcher(FakeResolver(intranet_test=["127.0.0.1"]), allow_private=True).fetch(
        site.url("/status", host="intranet.test")
    )
    assert got.body == b"all good" and got.is_private
    assert site.hits == [("/status", f"intranet.test:{site.port}")]


def test_dns_rebinding_the_pinned_connection_never_reaches_the_private_address(sites):
    public = sites({"/secret": page("the public page")})
    private = sites({"/secret": page("the private page")})
    net = FakeInternet({PUBLIC_IP: public.port})
    # First lookup public, every later one private; and "localhost" is what the system's
    # own resolver would give 127.0.0.1 for, should anything look the name up again.
    resolver = FakeResolver(localhost=[[PUBLIC_IP], ["127.0.0.1"]])
    got = fetcher(resolver, net).fetch(private.url("/secret", host="localhost"))
    assert got.body == b"the public page"
    assert private.hits == []
    assert net.dialled == [PUBLIC_IP]
    assert resolver.calls == ["localhost"]


def test_a_name_screened_public_that_turns_private_is_refused_when_private_was_not_approved(sites):
    public = sites({"/admin": page("the public page")})
    private = sites({"/admin": page("the private admin page")})
    net = FakeInternet({PUBLIC_IP: public.port})
    # Public when the call is prepared (and shown to a person), private when it runs.
    resolver = FakeResolver(svc_test=[[PUBLIC_IP], ["127.0.0.1"]])
    guarded = fetcher(resolver, net, allow_private=True)
    url = private.url("/admin", host="svc.test")
    assert guarded.screen(url).network == "public"
    with pytest.raises(RefusedError) as refused:
        guarded.fetch(url, private_ok=False)
    assert str(refused.value) == (
        "Refused: svc.test resolves to 127.0.0.1, a loopback address, but it was public when "
        "this call was prepared, so its approval did not cover a private target; "
        "make the call again to ask for it as one"
    )
    assert net.dialled == [] and private.hits == [] and public.hits == []


def test_a_target_approved_as_private_is_fetched_and_a_public_one_needs_no_private_approval(sites):
    site = sites({"/": page("up")})
    net = FakeInternet({PUBLIC_IP: site.port})
    resolver = FakeResolver(intranet_test=["127.0.0.1"])
    guarded = fetcher(resolver, net, allow_private=True)
    assert guarded.screen(site.url(host="intranet.test")).network == "private"
    assert guarded.fetch(site.url(host="intranet.test"), private_ok=True).body == b"up"
    assert guarded.fetch("http://public.test/", private_ok=False).body == b"up"
    # A name approved as private that has since gone public is fetched: nothing private is reached.
    assert guarded.fetch("http://public.test/", private_ok=True).body == b"up"


def test_a_call_not_approved_for_private_space_is_never_redirected_into_it(sites):
    private = sites({"/secret": page("private")})
    public = sites({"/start": redirect(f"http://intranet.test:{private.port}/secret")})
    net = FakeInternet({PUBLIC_IP: public.port})
    resolver = FakeResolver(intranet_test=["127.0.0.1"])
    with pytest.raises(RefusedError, match=r"public.test \(public\) redirected into private space"):
        fetcher(resolver, net, allow_private=True).fetch("http://public.test/start", private_ok=False)
    assert private.hits == []


def test_a_private_target_approved_as_such_may_redirect_within_private_space_only(sites):
    private = sites({"/b": page("wiki")})
    private.routes["/a"] = redirect(private.url("/b", host="wiki.test"))
    resolver = FakeResolver(intranet_test=["127.0.0.1"], wiki_test=["127.0.0.1"])
    guarded = fetcher(resolver, allow_private=True)
    got = guarded.fetch(private.url("/a", host="intranet.test"), private_ok=True)
    assert got.body == b"wiki" and got.is_private
    # private -> public -> private: the public hop may not send it back in
    public = sites({"/bounce": redirect(private.url("/b", host="wiki.test"))})
    private.routes["/a"] = redirect("http://public.test/bounce")
    net = FakeInternet({PUBLIC_IP: public.port})
    with pytest.raises(RefusedError, match="redirected into private space"):
        fetcher(resolver, net, allow_private=True).fetch(
            private.url("/a", host="intranet.test"), private_ok=True
        )


def test_a_host_with_several_addresses_is_dialled_at_the_next_checked_one_when_one_fails(sites):
    site = sites({"/": page("up")})
    net = FakeInternet({PUBLIC_IP: site.port})
    got = fetcher(FakeResolver(two_test=[OTHER_PUBLIC_IP, PUBLIC_IP]), net).fetch("http://two.test/")
    assert got.body == b"up" and net.dialled == [OTHER_PUBLIC_IP, PUBLIC_IP]


# -- redirects -----------------------------------------------------------------------------------


def test_a_public_site_redirecting_into_private_space_is_refused_even_with_private_allowed(sites):
    private = sites({"/secret": page("private")})
    public = sites({"/start": redirect(private.url("/secret"))})
    for allow in (False, True):
        net = FakeInternet({PUBLIC_IP: public.port})
        with pytest.raises(RefusedError) as refused:
            fetcher(net=net, allow_private=allow).fetch("http://public.test/start")
        assert "127.0.0.1 is a loopback address" in str(refused.value)
        assert net.dialled == [PUBLIC_IP]
    assert "public.test (public) redirected into private space" in str(refused.value)
    assert private.hits == [] and public.paths == ["/start", "/start"]


def test_a_redirect_chain_into_private_space_is_refused_at_the_private_hop(sites):
    private = sites({"/": page("private")})
    public = sites(
        {
            "/a": redirect("/b"),
            "/b": redirect("http://public.test/c", status=301),
            "/c": redirect(f"http://internal.test:{private.port}/", status=307),
        }
    )
    net = FakeInternet({PUBLIC_IP: public.port})
    with pytest.raises(RefusedError) as refused:
        fetcher(net=net).fetch("http://public.test/a")
    assert str(refused.value).startswith(
        f"Refused: http://public.test/c redirected to http://internal.test:{private.port}/, "
        "and internal.test resolves to 10.1.2.3, a private (RFC 1918) address"
    )
    assert public.paths == ["/a", "/b", "/c"] and private.hits == []


def test_a_redirect_to_another_scheme_or_to_userinfo_is_refused(sites):
    public = sites({"/file": redirect("file:///etc/passwd"), "/user": redirect("http://me@public.test/")})
    net = FakeInternet({PUBLIC_IP: public.port})
    with pytest.raises(RefusedError, match="not file:"):
        fetcher(net=net).fetch("http://public.test/file")
    with pytest.raises(RefusedError, match="user name or password"):
        fetcher(net=net).fetch("http://public.test/user")


def hops(last: Route) -> dict[str, Route]:
    routes = {f"/hop/{n}": redirect(f"/hop/{n + 1}") for n in range(FETCH_MAX_REDIRECTS)}
    routes[f"/hop/{FETCH_MAX_REDIRECTS}"] = last
    return routes


def test_five_redirects_are_followed(sites):
    site = sites(hops(page("arrived")))
    got = fetcher(net=FakeInternet({PUBLIC_IP: site.port})).fetch("http://public.test/hop/0")
    assert got.body == b"arrived" and got.url == "http://public.test/hop/5"
    assert got.redirects == tuple(f"http://public.test/hop/{n}" for n in range(5))


def test_a_sixth_redirect_is_refused_and_never_requested(sites):
    site = sites(hops(redirect("/hop/6")))
    with pytest.raises(RefusedError, match="more than 5 redirects"):
        fetcher(net=FakeInternet({PUBLIC_IP: site.port})).fetch("http://public.test/hop/0")
    assert site.paths == [f"/hop/{n}" for n in range(6)]


# -- the body cap, timeouts, TLS --------------------------------------------------------------------


def test_a_body_past_32_mib_is_refused_while_it_streams(sites):
    site = sites({"/big": endless()})
    assert FETCH_MAX_BYTES == 32 * MIB
    with pytest.raises(RefusedError, match=r"larger than 32 MiB \(it kept coming past that\)"):
        fetcher(net=FakeInternet({PUBLIC_IP: site.port})).fetch("http://public.test/big")


def test_a_declared_length_past_the_cap_is_refused_before_reading(sites):
    site = sites({"/big": declared(2000)})
    with pytest.raises(RefusedError, match=r"larger than 1,000 bytes \(it declares 2,000 bytes\)"):
        fetcher(net=FakeInternet({PUBLIC_IP: site.port}), max_bytes=1000).fetch("http://public.test/big")


def test_a_body_of_exactly_the_cap_is_kept(sites):
    site = sites({"/": page(b"y" * 1000, "text/plain")})
    got = fetcher(net=FakeInternet({PUBLIC_IP: site.port}), max_bytes=1000).fetch("http://public.test/")
    assert len(got.body) == 1000


def test_a_server_that_stops_sending_times_out(sites):
    holder: list[Site] = []

    def stall(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "10")
        handler.end_headers()
        holder[0].released.wait(10)

    site = sites({"/slow": stall})
    holder.append(site)
    slow = fetcher(net=FakeInternet({PUBLIC_IP: site.port}), read_timeout=0.3)
    with pytest.raises(FetchError, match="did not answer in time"):
        slow.fetch("http://public.test/slow")


def test_a_body_that_trickles_in_is_cut_off_at_the_total_time(sites):
    holder: list[Site] = []

    def trickle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        while not holder[0].released.wait(0.05):  # each byte well within the read timeout
            handler.wfile.write(b"1\r\nx\r\n")
            handler.wfile.flush()

    site = sites({"/drip": trickle})
    holder.append(site)
    slow = fetcher(net=FakeInternet({PUBLIC_IP: site.port}), read_timeout=5, total_seconds=0.5)
    with pytest.raises(FetchError, match=r"took longer than 0.5 s to send"):
        slow.fetch("http://public.test/drip")


def test_a_cancelled_fetch_stops(sites):
    site = sites({"/": page("never read")})
    net = FakeInternet({PUBLIC_IP: site.port})
    with pytest.raises(FetchError, match="Cancelled"):
        fetcher(net=net).fetch("http://public.test/", should_stop=lambda: True)
    assert site.hits == []


def test_an_unreachable_address_is_an_error_naming_the_host():
    with pytest.raises(FetchError, match="could not connect to public.test"):
        fetcher().fetch("http://public.test/")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=secure.test",
         "-addext", "subjectAltName=DNS:secure.test", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_keeps_the_site_name_for_sni_and_the_certificate_while_dialling_the_address(sites, certificate):
    cert, key = certificate
    server_names: list[str | None] = []
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    server_tls.sni_callback = lambda _sock, name, _ctx: server_names.append(name)  # type: ignore[assignment,misc,func-returns-value]
    site = sites({"/": page("over tls")}, tls=server_tls)
    trust = ssl.create_default_context(cafile=str(cert))
    resolver = FakeResolver(secure_test=[PUBLIC_IP], other_test=[PUBLIC_IP])
    net = FakeInternet({PUBLIC_IP: site.port})
    got = fetcher(resolver, net, verify=trust).fetch("https://secure.test/")
    assert got.body == b"over tls" and server_names == ["secure.test"]
    # The same address under a name the certificate does not carry: the check is by name.
    with pytest.raises(FetchError, match="could not connect to other.test"):
        fetcher(resolver, net, verify=trust).fetch("https://other.test/")


# -- the address rules themselves ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reach"),
    [
        ("8.8.8.8", Reach.PUBLIC),
        ("2606:4700::1111", Reach.PUBLIC),
        ("::ffff:8.8.8.8", Reach.PUBLIC),
        ("2002:0808:0808::1", Reach.PUBLIC),
        ("127.0.0.1", Reach.PRIVATE),
        ("10.0.0.1", Reach.PRIVATE),
        ("fd12::1", Reach.PRIVATE),
        ("169.254.169.254", Reach.FORBIDDEN),
        ("192.0.0.8", Reach.FORBIDDEN),
        ("2001:2::1", Reach.FORBIDDEN),  # benchmarking: not in the table, caught by is_global
    ],
)
def test_addresses_are_judged_public_private_or_never(address, reach):
    assert judge(ipaddress.ip_address(address)).reach is reach


@pytest.mark.parametrize(
    ("host", "address"),
    [("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("0", "0.0.0.0"),
     ("10.1", "10.0.0.1"), ("0300.0250.1.1", "192.168.1.1"), ("1.2.3.4.", "1.2.3.4")],
)  # fmt: skip
def test_numeric_hosts_are_read_as_addresses(host, address):
    assert str(parse_literal(host)) == address


@pytest.mark.parametrize("host", ["example.com", "1.2.3.com", "0x7f.example", "localhost"])
def test_names_are_not_read_as_addresses(host):
    assert parse_literal(host) is None


@pytest.mark.parametrize("host", ["256.1.1.1", "1.2.3.4.5", "08.1.1.1", "1.16777216"])
def test_numeric_hosts_out_of_range_are_invalid(host):
    with pytest.raises(ValueError):
        parse_literal(host)
