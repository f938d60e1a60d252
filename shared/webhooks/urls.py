"""Which endpoint URLs a tenant may register, and a delivery may call.

Refused by default, so that a tenant cannot make the server call its own internals:
loopback (127/8, ::1), link-local (169.254/16, fe80::/10, cloud metadata services),
unspecified (0.0.0.0, ::), multicast and reserved addresses, and private ranges
(10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) unless `webhook_allow_private`.
`webhook_allow_hosts` (host names, addresses or CIDR networks) allows any of them.
Every address a host name resolves to must pass; the check runs at registration and again
before each delivery, since DNS can change in between.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from shared.platform.errors import InvalidInput
from shared.platform.settings import Settings
from shared.records.webhooks import URL_MAX_CHARS

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

_SHARED_NAT = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: private in practice


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


def refusal(address: Address, policy: UrlPolicy) -> str | None:
    """Why `address` may not be called, or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if policy.allows(address):
        return None
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    private = address.is_private or address in _SHARED_NAT
    if private and not policy.allow_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    return None


def check_url(url: str, policy: UrlPolicy, resolve: Resolver = system_resolver) -> str:
    """The URL when a delivery may call it; else `InvalidInput` (bad syntax) or
    `WebhookUrlRefused` (its host), both naming the field `url`."""
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
        return url
    addresses = _addresses(host, port, resolve)
    if not addresses:
        raise WebhookUrlRefused(f"url: the host {host!r} does not resolve", field="url")
    for address in addresses:
        why = refusal(address, policy)
        if why is not None:
            raise WebhookUrlRefused(
                f"url: the host {host!r} is {why} ({address}), which webhooks may not call; "
                "an operator can allow it with MEMORYD_WEBHOOK_ALLOW_HOSTS"
                + (" or MEMORYD_WEBHOOK_ALLOW_PRIVATE" if why == "a private address" else ""),
                field="url")
    return url


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
