"""Where a server judge may send case text: the PHI guard, pure (no socket, no name lookup).

A judge served over HTTP receives every case's text, so its address is checked before any
connection is made (:func:`check_server_url`, run when models.yaml is read and again when
the backend starts). An address is taken when its host is

- loopback: ``localhost`` or an IP literal in 127.0.0.0/8 or ``::1`` (``http`` allowed);
- an IP literal in a private range: RFC 1918 (10/8, 172.16/12, 192.168/16) or IPv6 unique
  local (fc00::/7);
- a host name listed in the judge's ``allow_hosts`` (names are never resolved to decide:
  a name the site has not listed is refused, whatever address it would have).

Anything else is refused: public addresses, link-local ones (169.254/16 holds cloud
metadata services; fe80::/10 needs a zone), unspecified, multicast and reserved ones, and
names not listed. A host that is not loopback needs ``https`` (certificates are checked:
the system's CAs or the judge's ``ca_bundle``). Credentials in the URL, a query or
fragment, a port below 1024 other than 80 and 443, and any scheme but ``http``/``https``
are refused too. Each refusal is one line that names the setting and the host, never a
credential.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from evaluator.common.errors import UserError

# RFC 1918 and IPv6 unique local addresses: a site's own network.
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))
LOOPBACK_NAMES = ("localhost",)
_HOST_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)"
                        r"(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")


class AddressRefused(UserError, ValueError):
    """A server address the PHI guard does not take (the message is one line)."""


@dataclass(frozen=True)
class ServerAddress:
    """A checked base URL: ``url`` without a trailing slash, its host and whether it is
    loopback."""

    url: str
    scheme: str
    host: str
    port: int
    loopback: bool

    def endpoint(self, path: str) -> str:
        """The URL of an API path under this base (``chat/completions``)."""
        return f"{self.url}/{path.lstrip('/')}"


def normalise_host(name: str) -> str:
    """A host name as the guard compares it: lower case, no trailing dot."""
    return name.strip().lower().rstrip(".")


def check_allow_host(name: str) -> str:
    """One ``allow_hosts`` entry, normalised: a DNS host name (an IP literal needs no
    entry when private and is never taken when public)."""
    host = normalise_host(name)
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        raise AddressRefused(f"allow_hosts lists host names; {name!r} is an IP address (a "
                             "private or loopback address needs no entry, a public one is "
                             "never taken)")
    if not _HOST_NAME.match(host):
        raise AddressRefused(f"allow_hosts: {name!r} is not a host name (letters, digits, "
                             "hyphens and dots)")
    return host


def _address_kind(host: str) -> str | None:
    """``loopback`` or ``private`` for an IP literal the guard takes, ``refused`` for
    another IP literal, None for a host name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "loopback"
    if (not address.is_link_local and not address.is_multicast
            and any(address in net for net in PRIVATE_NETWORKS)):
        return "private"
    return "refused"


def check_server_url(url: str, allow_hosts: Iterable[str] = (), *,
                     setting: str = "base_url") -> ServerAddress:
    """The checked address of ``url`` (see the module docstring), or
    :class:`AddressRefused` saying in one line why case text may not go there."""
    if not isinstance(url, str) or not url or len(url) > 2048 or _UNSAFE.search(url):
        raise AddressRefused(f"{setting}: not a URL (empty, too long, or with spaces, "
                             "control characters or backslashes)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise AddressRefused(f"{setting}: not a URL with a valid host and port") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AddressRefused(f"{setting}: the scheme must be https (or http on loopback), "
                             f"not {scheme or 'none'!r}")
    if "@" in parts.netloc:  # never echo it: it may hold a password
        raise AddressRefused(f"{setting}: credentials in the URL are refused; use "
                             "api_key_env or api_key_file")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise AddressRefused(f"{setting}: a base URL takes no query or fragment")
    host = normalise_host(parts.hostname or "")
    if not host:
        raise AddressRefused(f"{setting}: the URL names no host")
    if port is None:
        port = 443 if scheme == "https" else 80
    if port == 0 or (port < 1024 and port not in (80, 443)):
        raise AddressRefused(f"{setting}: port {port} is refused (a judge server listens on "
                             "80, 443 or a port from 1024 up)")
    kind = _address_kind(host)
    if kind is None:
        if host in LOOPBACK_NAMES:
            kind = "loopback"
        elif not _HOST_NAME.match(host):
            raise AddressRefused(f"{setting}: {host!r} is not a host name")
        elif host in {normalise_host(h) for h in allow_hosts}:
            kind = "allowed"
        else:
            raise AddressRefused(f"{setting}: host {host!r} is not in allow_hosts; case text "
                                 "goes only to loopback, a private address, or a host name "
                                 "the judge's allow_hosts lists (names are never resolved "
                                 "to decide)")
    if kind == "refused":
        raise AddressRefused(f"{setting}: {host} is not a loopback or private address (RFC "
                             "1918, fc00::/7); case text never leaves the site's network")
    loopback = kind == "loopback"
    if scheme == "http" and not loopback:
        raise AddressRefused(f"{setting}: {host} is not loopback, so it needs https (with "
                             "the site's CA in ca_bundle if its certificate is the site's "
                             "own); http is for 127.0.0.1 and localhost only")
    display = f"[{host}]" if ":" in host else host
    path = parts.path.rstrip("/")
    return ServerAddress(url=f"{scheme}://{display}:{port}{path}", scheme=scheme, host=host,
                         port=port, loopback=loopback)
