"""Which endpoint URLs a tenant may register, and a delivery may call.

Refused by default, so that a tenant cannot make the server call its own internals:
loopback (127/8, ::1), link-local (169.254/16, fe80::/10, cloud metadata services),
unspecified (0/8, ::), multicast, and every other range of IANA's special-purpose address
registries that is not globally reachable (`SPECIAL`: 192.0.0.0/24, documentation,
benchmarking, 240/4, 2001::/23, …), and private ranges (10/8, 172.16/12, 192.168/16,
100.64/10, fc00::/7, fec0::/10) unless `webhook_allow_private`. An IPv6 address that
embeds an IPv4 one (IPv4-mapped ::ffff:0:0/96, 6to4 2002::/16, Teredo 2001::/32, NAT64
64:ff9b::/96) is judged by the IPv4 address too, since that is where its packets end up;
the local-use NAT64 prefix 64:ff9b:1::/48 is private. The table is this module's own, not
the running Python's `ipaddress` flags, which change between releases.
`webhook_allow_hosts` (host names, addresses or CIDR networks) allows any of them.
Every address a host name resolves to must pass; the check runs at registration and again
before each delivery, since DNS can change in between, and the delivery then connects to
the address that was checked (`Target`), so a name that rebinds between the check and the
connection cannot steer it elsewhere.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from memoryd.platform.errors import InvalidInput
from memoryd.platform.settings import Settings
from memoryd.records.webhooks import URL_MAX_CHARS

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]


def _nets(*items: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item) for item in items)


# (networks, why), checked in order; the first match decides. From IANA's IPv4 and IPv6
# Special-Purpose Address Registries, entries not globally reachable. PRIVATE ones are
# allowed by `webhook_allow_private`; the others only by `webhook_allow_hosts`.
PRIVATE = "a private address"
SPECIAL: tuple[tuple[tuple[Network, ...], str], ...] = (
    (_nets("127.0.0.0/8", "::1/128"), "a loopback address"),
    (_nets("169.254.0.0/16", "fe80::/10"), "a link-local address"),
    (_nets("0.0.0.0/8", "::/128"), "an unspecified address"),
    (_nets("224.0.0.0/4", "ff00::/8"), "a multicast address"),
    (_nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
           "100.64.0.0/10",  # carrier-grade NAT: private in practice
           "fc00::/7", "fec0::/10",  # unique local; deprecated site-local
           "64:ff9b:1::/48"),  # local-use NAT64: translates to a private network
     PRIVATE),
    (_nets("192.0.0.0/24",  # IETF protocol assignments (192.0.0.192, …)
           "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",  # documentation
           "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
           "198.18.0.0/15",  # benchmarking
           "240.0.0.0/4",  # reserved, and the limited broadcast 255.255.255.255
           "::/8",  # reserved, with IPv4-compatible ::/96 (IPv4-mapped is judged first)
           "100::/64",  # discard-only
           "2001::/23",  # IETF protocol assignments, Teredo included
           "2001:db8::/32", "3fff::/20",  # documentation
           "5f00::/16"),  # segment routing (SRv6) SIDs
     "a special-purpose address"),
)
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class WebhookUrlRefused(InvalidInput):
    """The endpoint's host is an address the server must not call (see the module doc)."""

    code = "url_refused"


@dataclass(frozen=True)
class UrlPolicy:
    allow_private: bool = False
    allow_names: frozenset[str] = frozenset()
    allow_networks: tuple[Network, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> UrlPolicy:
        names: set[str] = set()
        networks: list[Network] = []
        for item in (s.strip() for s in settings.webhook_allow_hosts.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
            except ValueError:
                names.add(item.lower().rstrip("."))
        return cls(settings.webhook_allow_private, frozenset(names), tuple(networks))

    def allows(self, address: Address) -> bool:
        return any(address in network for network in self.allow_networks)


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def embedded_ipv4(address: Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with how: IPv4-mapped, 6to4, Teredo
    (its server and its client) or NAT64 (the well-known prefix)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    if address in _MAPPED and address.ipv4_mapped is not None:
        return [("an IPv4-mapped address", address.ipv4_mapped)]
    if address.sixtofour is not None:
        return [("a 6to4 address", address.sixtofour)]
    if address.teredo is not None:
        server, client = address.teredo
        return [("a Teredo address", server), ("a Teredo address", client)]
    if address in _NAT64:
        return [("a NAT64 address",
                 ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))]
    return []


def refusal(address: Address, policy: UrlPolicy) -> str | None:
    """Why `address` may not be called, or None."""
    if policy.allows(address):
        return None
    embedded = embedded_ipv4(address)
    if embedded and embedded[0][0] == "an IPv4-mapped address":
        return refusal(embedded[0][1], policy)  # the same host, only written in IPv6
    for how, ipv4 in embedded:
        why = refusal(ipv4, policy)
        if why is not None:
            return f"{how} of {ipv4}, {why}"
    if embedded and embedded[0][0] != "a Teredo address":
        return None  # 6to4 or NAT64 of a public address reaches that public address
    for networks, why in SPECIAL:
        if any(address in network for network in networks):
            return None if why == PRIVATE and policy.allow_private else why
    return None


@dataclass(frozen=True)
class Target:
    """Where a delivery connects: `url` as registered, and `address`, the checked address of
    its host (None for a host name the operator allowed: it is called by name)."""

    url: str
    host: str
    address: Address | None

    def request(self) -> tuple[str, dict[str, str], dict[str, str]]:
        """(URL, headers, httpx extensions) of a request to the checked address: the host
        replaced by the address in the URL, the name kept in the `Host` header and, for
        https, in the TLS server name (SNI) the certificate is verified against."""
        if self.address is None:
            return self.url, {}, {}
        parts = urlsplit(self.url)
        literal = (f"[{self.address}]" if isinstance(self.address, ipaddress.IPv6Address)
                   else str(self.address))
        netloc = literal if parts.port is None else f"{literal}:{parts.port}"
        pinned = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        host = parts.netloc.rsplit("@", 1)[-1]
        extensions = {"sni_hostname": self.host} if parts.scheme == "https" else {}
        return pinned, {"Host": host}, extensions


def check_url(url: str, policy: UrlPolicy, resolve: Resolver = system_resolver) -> str:
    """The URL when a delivery may call it; else `InvalidInput` (bad syntax) or
    `WebhookUrlRefused` (its host), both naming the field `url`."""
    return target(url, policy, resolve).url


def target(url: str, policy: UrlPolicy, resolve: Resolver = system_resolver) -> Target:
    """`check_url`, and the address a delivery then connects to: the first the host
    resolved to, every one of which passed (one resolution, so the check and the
    connection see the same answer)."""
    if len(url) > URL_MAX_CHARS:
        raise InvalidInput(f"url: longer than {URL_MAX_CHARS} characters", field="url")
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise InvalidInput("url: holds whitespace or control characters", field="url")
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise InvalidInput(f"url: not a valid URL ({exc})", field="url") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidInput("url: the scheme must be http or https", field="url")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("url: must not hold credentials (user:password@)", field="url")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise InvalidInput("url: has no host", field="url")
    if host in policy.allow_names:
        return Target(url, host, None)
    addresses = _addresses(host, port, resolve)
    if not addresses:
        raise WebhookUrlRefused(f"url: the host {host!r} does not resolve", field="url")
    for address in addresses:
        why = refusal(address, policy)
        if why is not None:
            raise WebhookUrlRefused(
                f"url: the host {host!r} is {why} ({address}), which webhooks may not call; "
                "an operator can allow it with MEMORYD_WEBHOOK_ALLOW_HOSTS"
                + (" or MEMORYD_WEBHOOK_ALLOW_PRIVATE" if why.endswith(PRIVATE) else ""),
                field="url")
    return Target(url, host, addresses[0])


def _addresses(host: str, port: int, resolve: Resolver) -> list[Address]:
    """The host's addresses: itself when it is one, else what it resolves to ([] if
    nothing)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        return [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolve(host, port)]
    except (OSError, UnicodeError, ValueError):
        return []
