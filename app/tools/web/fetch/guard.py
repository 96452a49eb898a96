"""The SSRF guard: which URLs may be requested, and the checked addresses to connect to.

A host's every address is judged and the worst decides; the connection then goes
to those very addresses (`Target.addresses`), so no second lookup can change them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.tools.web.fetch.addresses import Reach, Verdict, judge, parse_literal, worst
from app.tools.web.fetch.errors import RefusedError

FETCH_MAX_URL_CHARS = 8192

if TYPE_CHECKING:
    import httpx

Resolver = Callable[[str], Sequence[str]]  # a host name to its IP addresses

SCHEMES = ("http", "https")
# Names of cloud metadata services, refused before any lookup (their addresses are too).
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.platformequinix.com",
    }
)
PUBLIC_ONLY = "only public addresses may be fetched (tools.allow_private_network is off)"
PUBLIC, PRIVATE = "public", "private"  # a target's network, as a prepared call records it


@dataclass(frozen=True)
class Target:
    """A screened URL: its host's checked addresses and how far from public they are."""

    url: httpx.URL
    host: str
    addresses: tuple[str, ...]
    verdict: Verdict  # the worst of the addresses

    @property
    def is_private(self) -> bool:
        return self.verdict.reach is Reach.PRIVATE

    @property
    def network(self) -> str:
        """`public` or `private`: what a prepared call records, and its run is held to."""
        return PRIVATE if self.is_private else PUBLIC

    def describe(self) -> str:
        """`127.0.0.1 is a loopback address`, or `db.lan resolves to 10.0.0.5, a private ... address`."""
        return _describe(self.host, self.verdict)

    def approval_note(self) -> str | None:
        """What an approval card says about a private target (allowed only by the switch)."""
        if not self.is_private:
            return None
        return f"Private network: {self.describe()}; allowed because tools.allow_private_network is on."


def parse_url(text: str) -> httpx.URL:
    """The URL, if it is one the fetcher may ever request; `RefusedError` saying why not."""
    if len(text) > FETCH_MAX_URL_CHARS:
        raise RefusedError(f"Refused: the URL is longer than {FETCH_MAX_URL_CHARS:,} characters")
    import httpx  # here, not at the top: see app/tools/web/fetch/__init__

    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        raise RefusedError(f"Refused: {text[:200]!r} is not a valid URL ({exc})") from None
    if url.scheme not in SCHEMES:
        scheme = f"{url.scheme}:" if url.scheme else "a URL with no scheme"
        raise RefusedError(f"Refused: only http:// and https:// URLs can be fetched, not {scheme}")
    if url.userinfo:
        # `http://trusted@127.0.0.1/` reads as one host and goes to another; credentials never go out.
        raise RefusedError(
            "Refused: the URL carries a user name or password before '@'; "
            "credentials are never sent, so give the URL without them"
        )
    if not url.host:
        raise RefusedError(f"Refused: {text[:200]!r} has no host")
    return url


def screen(url: httpx.URL, resolver: Resolver, allow_private: bool) -> Target:
    """Judge every address the URL's host stands for; `RefusedError` unless all may be reached."""
    host = url.raw_host.decode("ascii").lower()
    if host.rstrip(".") in METADATA_NAMES:
        raise RefusedError(f"Refused: {host} is a cloud metadata service; it is never fetched")
    addresses = _addresses(host, resolver)
    verdicts = [judge(address) for address in addresses]
    target = Target(url, host, tuple(str(a) for a in addresses), worst(verdicts))
    _check(target, verdicts, allow_private)
    return target


def _addresses(host: str, resolver: Resolver) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        literal = parse_literal(host)
    except ValueError:
        raise RefusedError(f"Refused: {host} looks like an IP address but is not a valid one") from None
    if literal is not None:
        return [literal]  # an address is never sent to the resolver
    try:
        found = [ipaddress.ip_address(str(a).split("%", 1)[0]) for a in resolver(host)]
    except (OSError, UnicodeError, ValueError) as exc:
        raise RefusedError(f"Refused: cannot resolve {host} ({exc})") from None
    if not found:
        raise RefusedError(f"Refused: cannot resolve {host} (no addresses)")
    return list(dict.fromkeys(found))


def _check(target: Target, verdicts: list[Verdict], allow_private: bool) -> None:
    reach = target.verdict.reach
    if reach is Reach.FORBIDDEN:
        raise RefusedError(f"Refused: {target.describe()}; it is never fetched")
    if reach is Reach.PRIVATE and not allow_private:
        raise RefusedError(f"Refused: {target.describe()}; {PUBLIC_ONLY}")
    if reach is Reach.PRIVATE and any(v.reach is Reach.PUBLIC for v in verdicts):
        # Half public, half private is how a rebinding host looks: only wholly private hosts pass.
        listed = ", ".join(target.addresses)
        raise RefusedError(
            f"Refused: {target.host} resolves to public and private addresses ({listed}); "
            "a private target must be wholly private"
        )


def check_prepared(target: Target, private_ok: bool) -> None:
    """A call prepared for a public target may not fetch a private one when it runs.

    The name is looked up again when the call runs, maybe long after a person approved a
    card that said nothing of a private network (DNS rebinding in between): `private_ok`
    is whether the call was prepared, and so shown, as private."""
    if target.is_private and not private_ok:
        raise RefusedError(
            f"Refused: {target.describe()}, but it was public when this call was prepared, "
            "so its approval did not cover a private target; make the call again to ask for it as one"
        )


def check_redirect(public_source: Target | None, hop: Target) -> None:
    """A public site may not send the fetcher into private space, whatever the settings say.

    `public_source` is the last public target of the chain so far (None: none was)."""
    if public_source is not None and hop.is_private:
        raise RefusedError(
            f"Refused: {public_source.host} (public) redirected into private space: {hop.describe()}; "
            "a public site redirecting to a private address is always refused"
        )


def _describe(host: str, verdict: Verdict) -> str:
    if not _is_address(host):
        return f"{host} resolves to {verdict.address}, {verdict.reason}"
    if ":" in host or host == verdict.address:
        return f"{host} is {verdict.reason}"
    return f"{host} is {verdict.address}, {verdict.reason}"  # 0x7f.1 is 127.0.0.1, ...


def _is_address(host: str) -> bool:
    try:
        return parse_literal(host) is not None
    except ValueError:
        return False
