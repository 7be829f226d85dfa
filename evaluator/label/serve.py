"""Start the labelling page: resolve ``--host`` to one address, as bind would read it
(every address refused, however it is spelt), bind that address (loopback by default, a
free port with port 0), build the application for the bound name and port, and serve it
with uvicorn (HTTPS only when the address is not loopback). uvicorn's access log is off:
URLs carry tokens."""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.common.errors import UserError
from evaluator.label.app import build_app
from evaluator.label.labelling import Labelling
from evaluator.label.session import LabelError

LOOPBACK = "127.0.0.1"
LABEL_EXTRA_HINT = "pip install 'evaluator[label]'"


class LabelExtraMissing(UserError):
    """Starlette or uvicorn (the ``label`` extra) is not installed."""


def require_extra() -> None:
    """Refuse in one line when the ``label`` extra is not installed."""
    try:
        # starlette and uvicorn: the label extra, loaded only when the page is served.
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise LabelExtraMissing(f"evaluator label needs the label extra ({exc.name} is "
                                f"missing): {LABEL_EXTRA_HINT}") from None


@dataclass(frozen=True)
class Listen:
    """Where to serve: the address, the port (0: a free one) and the TLS files."""

    host: str = LOOPBACK
    port: int = 0
    tls_cert: Path | None = None
    tls_key: Path | None = None


IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def as_bound(ip: IP) -> IP:
    """The address as the kernel binds it: an IPv4-mapped IPv6 address
    (``::ffff:0.0.0.0``) is the IPv4 address it maps."""
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped if mapped is not None else ip


@dataclass(frozen=True)
class Address:
    """``--host`` resolved to the one address the page binds, the address every check
    judges: ``name`` is what its links and Host headers use (the address in its usual
    form, or the host name as given)."""

    name: str
    ip: IP
    sockaddr: tuple  # as getaddrinfo gave it (port 0): what bind() is given

    @property
    def loopback(self) -> bool:
        """Bound to a loopback address (127.0.0.0/8, ::1)."""
        return as_bound(self.ip).is_loopback


# One DNS label; a name's last label is not a number (a browser would read an address).
_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
HOST_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")
RESOLVE_SECONDS = 10.0  # a resolver that does not answer by then: refused, not waited for


def _shown(host: str) -> str:
    # --host as an error line shows it: quoted when it is empty or holds odd characters.
    return host if host and host.isprintable() and " " not in host else repr(host)


def _getaddrinfo(host: str, flags: int) -> list[tuple]:
    return [info[4] for info in socket.getaddrinfo(host, None, socket.AF_UNSPEC,
                                                   socket.SOCK_STREAM, 0, flags)]


def _resolve_name(host: str) -> list[tuple]:
    """The system resolver's addresses for a name, within :data:`RESOLVE_SECONDS`."""
    found: list = []

    def lookup() -> None:
        try:
            found.append(_getaddrinfo(host, 0))
        except (OSError, UnicodeError) as exc:
            found.append(exc)

    # getaddrinfo cannot be given a timeout: in a thread nobody waits for past the limit.
    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(RESOLVE_SECONDS)
    if not found:
        raise LabelError(f"--host {host} did not resolve within {RESOLVE_SECONDS:g} s: give "
                         "one of this computer's addresses, or fix its resolver")
    if isinstance(found[0], Exception) or not found[0]:
        reason = getattr(found[0], "strerror", None) or found[0] or "no address"
        raise LabelError(f"--host {host} does not resolve ({reason}): give this computer's "
                         "name as the network knows it, or one of its addresses")
    return found[0]


def _numeric(host: str) -> list[tuple] | None:
    """The address ``host`` spells, read as the C library reads it (``0``, ``127.1``,
    ``0x7f.1`` and ``::0`` included), or None when it spells none."""
    try:
        return _getaddrinfo(host, socket.AI_NUMERICHOST)
    except (OSError, UnicodeError, ValueError):
        return None


def _is_name(host: str) -> bool:
    last = host.rpartition(".")[2].lower()
    return (HOST_NAME.fullmatch(host) is not None and not last.isdigit()
            and not last.startswith("0x"))


def resolve(host: str) -> Address:
    """The address ``host`` names, read as bind would read it (an address in any form the
    C library takes; a name through the system resolver); refused in one line when it is
    every address, or neither an address nor a host name."""
    bracketed = host.startswith("[") and host.endswith("]")
    inner = host[1:-1] if bracketed else host
    # Python's bind reads '' as every address.
    found = _numeric(inner) if inner else [("0.0.0.0", 0)]
    if found is not None and bracketed and ":" not in found[0][0]:
        found = None  # [127.0.0.1] is no address
    named = found is None
    if named:
        if bracketed or not _is_name(inner):
            raise LabelError(f"--host {_shown(host)} is neither an address nor a host name: "
                             "give this computer's name (the one the certificate is issued "
                             "for) or one of its addresses")
        found = _resolve_name(inner)
    addresses = [(ipaddress.ip_address(sockaddr[0]), sockaddr) for sockaddr in found]
    for ip, _ in addresses:
        if as_bound(ip).is_unspecified:
            said = "" if inner == str(ip) else f" ({ip})"
            raise LabelError(f"--host {_shown(host)} listens on every address{said}, but the "
                             "page answers only the name its links use: give that name (the "
                             "one the certificate is issued for) or one address")
    ip, sockaddr = addresses[0]
    name = inner.lower() if named else (f"[{ip}]" if ip.version == 6 else str(ip))
    return Address(name, ip, sockaddr)


def check_listen(listen: Listen) -> Address:
    """The address to bind (:func:`resolve`); refused, in one line, when it is not loopback
    and both TLS files are not given, or when the TLS files cannot be loaded."""
    address = resolve(listen.host)
    given = [p for p in (listen.tls_cert, listen.tls_key) if p is not None]
    if not address.loopback and len(given) != 2:
        raise LabelError(f"--host {listen.host} serves the network: give the site's "
                         "certificate and key with --tls-cert and --tls-key (or serve "
                         "127.0.0.1 and forward it with ssh -L)")
    if len(given) == 1:
        raise LabelError("give both --tls-cert and --tls-key, or neither")
    if given:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                str(listen.tls_cert), str(listen.tls_key))
        except (OSError, ssl.SSLError) as exc:
            raise LabelError(f"cannot load --tls-cert {listen.tls_cert} with --tls-key "
                             f"{listen.tls_key} ({getattr(exc, 'strerror', None) or exc})") \
                from None
    return address


def bind(address: Address, port: int) -> socket.socket:
    """A listening socket on the address check_listen judged and ``port`` (0: a free
    port)."""
    family = socket.AF_INET6 if address.ip.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: uvicorn writes a page's headers and body apart, and
    # with Nagle's algorithm the body would wait ~40 ms for the browser's delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        # The numeric address getaddrinfo gave: bind resolves nothing again.
        sock.bind((address.sockaddr[0], port, *address.sockaddr[2:]))
    except OSError as exc:
        sock.close()
        raise LabelError(f"cannot serve on {address.name}:{port} ({exc.strerror}); "
                         "choose another --port or --host") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def host_names(address: Address, port: int) -> list[str]:
    """The Host headers the page answers: the served name and port (and, on loopback, the
    bound address, ``localhost`` and ``127.0.0.1`` with that port: an SSH forward's far end
    may name it either way)."""
    names = [f"{address.name}:{port}"]
    if address.loopback:
        bound = f"[{address.ip}]" if address.ip.version == 6 else str(address.ip)
        names += [f"{bound}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"]
    return list(dict.fromkeys(names))


def urls(session: Labelling[Any], scheme: str, name: str) -> list[tuple[str, str]]:
    """(labeller, her URL) for each labeller of the session."""
    return [(p.name, f"{scheme}://{name}/l/{p.token}/") for p in session.labellers.values()]


def serve(session: Labelling[Any], listen: Listen,
          announce: Callable[[list[tuple[str, str]]], None]) -> None:
    """Serve ``session`` until interrupted; ``announce`` gets each labeller's URL once the
    port is bound."""
    # uvicorn: the label extra, loaded only when the page is served.
    import uvicorn

    address = check_listen(listen)
    sock = bind(address, listen.port)
    port = sock.getsockname()[1]
    tls = listen.tls_cert is not None
    scheme = "https" if tls else "http"
    names = host_names(address, port)
    app = build_app(session, names, scheme)
    config = uvicorn.Config(app, access_log=False, log_level="warning", lifespan="off",
                            proxy_headers=False, server_header=False,
                            ssl_certfile=str(listen.tls_cert) if tls else None,
                            ssl_keyfile=str(listen.tls_key) if tls else None)
    server = uvicorn.Server(config)
    announce(urls(session, scheme, names[0]))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
