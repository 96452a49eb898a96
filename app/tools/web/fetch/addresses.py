"""What an IP address is, for the fetcher's guard: public, private (approvable), or never.

IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4, Teredo, NAT64)
are judged by the IPv4 they carry; the worst judgement decides.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Reach(enum.IntEnum):
    """Ordered from best to worst: the worst of a host's addresses decides."""

    PUBLIC = 0
    PRIVATE = 1  # allowed only with tools.allow_private_network
    FORBIDDEN = 2  # never: metadata, link-local, multicast, reserved, ...


@dataclass(frozen=True)
class Verdict:
    address: str
    reach: Reach
    reason: str  # "a loopback address": reads after "<address> is"


_N4 = ipaddress.IPv4Network
_N6 = ipaddress.IPv6Network
METADATA = "a cloud metadata address"

# First match wins, so the specific entries (metadata) come before their ranges.
_V4_TABLE: tuple[tuple[_N4, Reach, str], ...] = (
    (_N4("169.254.169.254/32"), Reach.FORBIDDEN, METADATA),  # AWS, GCP, Azure, OCI, DigitalOcean
    (_N4("169.254.170.2/32"), Reach.FORBIDDEN, METADATA),  # AWS ECS task metadata
    (_N4("100.100.100.200/32"), Reach.FORBIDDEN, METADATA),  # Alibaba Cloud (inside CGNAT space)
    (_N4("192.0.0.192/32"), Reach.FORBIDDEN, METADATA),  # Oracle Cloud
    (_N4("0.0.0.0/32"), Reach.FORBIDDEN, "the unspecified address"),
    (_N4("0.0.0.0/8"), Reach.FORBIDDEN, "a 'this network' address (0.0.0.0/8)"),
    (_N4("127.0.0.0/8"), Reach.PRIVATE, "a loopback address"),
    (_N4("10.0.0.0/8"), Reach.PRIVATE, "a private (RFC 1918) address"),
    (_N4("172.16.0.0/12"), Reach.PRIVATE, "a private (RFC 1918) address"),
    (_N4("192.168.0.0/16"), Reach.PRIVATE, "a private (RFC 1918) address"),
    (_N4("100.64.0.0/10"), Reach.PRIVATE, "a carrier-grade NAT address (100.64.0.0/10)"),
    (_N4("169.254.0.0/16"), Reach.FORBIDDEN, "a link-local address"),
    (_N4("224.0.0.0/4"), Reach.FORBIDDEN, "a multicast address"),
    (_N4("255.255.255.255/32"), Reach.FORBIDDEN, "the broadcast address"),
    (_N4("240.0.0.0/4"), Reach.FORBIDDEN, "a reserved address (240.0.0.0/4)"),
    (_N4("192.0.2.0/24"), Reach.FORBIDDEN, "a documentation address"),
    (_N4("198.51.100.0/24"), Reach.FORBIDDEN, "a documentation address"),
    (_N4("203.0.113.0/24"), Reach.FORBIDDEN, "a documentation address"),
    (_N4("198.18.0.0/15"), Reach.FORBIDDEN, "a benchmarking address (198.18.0.0/15)"),
    (_N4("192.0.0.0/24"), Reach.FORBIDDEN, "an IETF protocol address (192.0.0.0/24)"),
    (_N4("192.88.99.0/24"), Reach.FORBIDDEN, "a 6to4 relay address (192.88.99.0/24)"),
)
_V6_TABLE: tuple[tuple[_N6, Reach, str], ...] = (
    (_N6("::/128"), Reach.FORBIDDEN, "the unspecified address"),
    (_N6("::1/128"), Reach.PRIVATE, "a loopback address"),
    (_N6("fd00:ec2::254/128"), Reach.FORBIDDEN, METADATA),  # AWS, inside the ULA range
    (_N6("fe80::/10"), Reach.FORBIDDEN, "a link-local address"),
    (_N6("fc00::/7"), Reach.PRIVATE, "a unique local address (fc00::/7)"),
    (_N6("fec0::/10"), Reach.PRIVATE, "a site-local address (fec0::/10)"),
    (_N6("ff00::/8"), Reach.FORBIDDEN, "a multicast address"),
    (_N6("2001:db8::/32"), Reach.FORBIDDEN, "a documentation address"),
    (_N6("3fff::/20"), Reach.FORBIDDEN, "a documentation address"),
    (_N6("100::/64"), Reach.FORBIDDEN, "a discard-only address (100::/64)"),
)
# IPv6 ranges whose last 32 bits are an IPv4 address the packets end up at.
_CARRIES_V4_IN_LOW_BITS = (
    _N6("::ffff:0:0/96"),  # IPv4-mapped
    _N6("::ffff:0:0:0/96"),  # IPv4-translated (SIIT)
    _N6("64:ff9b::/96"),  # NAT64, well-known prefix
    _N6("64:ff9b:1::/48"),  # NAT64, local-use prefix
    _N6("::/96"),  # IPv4-compatible (deprecated)
)
_SPECIAL = "a special-purpose address"
_UNSPECIFIED_V6 = ipaddress.IPv6Address("::")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")


def judge(address: IPAddress) -> Verdict:
    """Where a connection to `address` would go, and whether it may."""
    if isinstance(address, ipaddress.IPv6Address):
        return _judge_v6(address)
    return _judge_v4(address)


def _judge_v4(address: ipaddress.IPv4Address) -> Verdict:
    for network, reach, reason in _V4_TABLE:
        if address in network:
            return Verdict(str(address), reach, reason)
    if not address.is_global:  # a range the table does not name
        return Verdict(str(address), Reach.FORBIDDEN, _SPECIAL)
    return Verdict(str(address), Reach.PUBLIC, "a public address")


def _judge_v6(address: ipaddress.IPv6Address) -> Verdict:
    plain = ipaddress.IPv6Address(address.packed)  # without a %scope
    # Inside ::/96 but not IPv4-compatible. Compared by value: from Python 3.13 on, is_loopback
    # and is_unspecified are also true of ::ffff:127.0.0.1 and ::ffff:0.0.0.0, which carry IPv4.
    if plain in (_UNSPECIFIED_V6, _LOOPBACK_V6):
        return _from_table(plain)
    carried = embedded_ipv4(plain)
    if carried:
        worst = max((_judge_v4(v4) for v4 in carried), key=lambda v: v.reach)
        return Verdict(str(plain), worst.reach, f"{worst.reason} ({worst.address} inside an IPv6 address)")
    return _from_table(plain)


def _from_table(address: ipaddress.IPv6Address) -> Verdict:
    for network, reach, reason in _V6_TABLE:
        if address in network:
            return Verdict(str(address), reach, reason)
    if not address.is_global:
        return Verdict(str(address), Reach.FORBIDDEN, _SPECIAL)
    return Verdict(str(address), Reach.PUBLIC, "a public address")


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (Teredo carries two: server and client)."""
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    if any(address in network for network in _CARRIES_V4_IN_LOW_BITS):
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    return []


def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=lambda v: v.reach)


def parse_literal(host: str) -> IPAddress | None:
    """The address a host names literally, in any form a browser or libc accepts
    (`2130706433`, `0x7f.1`, `127.1`, `[::1]`); None for a name to be resolved.

    Raises ValueError for a host that looks numeric but is no valid address.
    """
    if ":" in host:
        return ipaddress.IPv6Address(host.split("%", 1)[0])
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels.pop()  # a trailing dot
    if not labels or not _is_number(labels[-1]):
        return None
    return ipaddress.IPv4Address(_ipv4_number(labels))


def _is_number(label: str) -> bool:
    lowered = label.lower()
    if lowered.startswith("0x"):
        return all(c in "0123456789abcdef" for c in lowered[2:])
    return lowered.isdigit() and lowered.isascii()


def _ipv4_number(labels: list[str]) -> int:
    """The WHATWG IPv4 parser: 1-4 parts, each decimal, octal (leading 0) or hex (0x);
    the last part fills the bytes the others leave."""
    if len(labels) > 4:
        raise ValueError("more than four parts")
    parts = [_part(label) for label in labels]
    *head, last = parts
    if any(part > 255 for part in head) or last >= 256 ** (5 - len(parts)):
        raise ValueError("a part is out of range")
    return last + sum(part << (8 * (3 - i)) for i, part in enumerate(head))


def _part(label: str) -> int:
    lowered = label.lower()
    if not lowered:
        raise ValueError("an empty part")
    if lowered.startswith("0x"):
        return int(lowered[2:] or "0", 16)
    if len(lowered) > 1 and lowered.startswith("0"):
        return int(lowered, 8)  # ValueError on an 8 or a 9
    if not lowered.isdigit() or not lowered.isascii():
        raise ValueError(f"{label!r} is not a number")
    return int(lowered)
