"""Start the labelling page: bind the address (loopback by default, a free port with port
0), build the application for the bound name and port, and serve it with uvicorn (HTTPS
only when the address is not loopback). uvicorn's access log is off: URLs carry tokens."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluator.common.errors import UserError
from evaluator.label.app import build_app
from evaluator.label.session import LabelError, LabelSession

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


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(listen: Listen) -> None:
    """Refuse, in one line, a non-loopback address without both TLS files, and TLS files
    that cannot be loaded."""
    if listen.host.strip("[]") in ("0.0.0.0", "::", ""):
        raise LabelError(f"--host {listen.host or repr('')} listens on every address, but the "
                         "page answers only the name its links use: give that name (the "
                         "one the certificate is issued for) or one address")
    given = [p for p in (listen.tls_cert, listen.tls_key) if p is not None]
    if not is_loopback(listen.host) and len(given) != 2:
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


def bind(listen: Listen) -> socket.socket:
    """A listening socket on the address and port (port 0: a free port)."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: uvicorn writes a page's headers and body apart, and
    # with Nagle's algorithm the body would wait ~40 ms for the browser's delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((listen.host.strip("[]"), listen.port))
    except OSError as exc:
        sock.close()
        raise LabelError(f"cannot serve on {listen.host}:{listen.port} ({exc.strerror}); "
                         "choose another --port or --host") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def host_names(host: str, port: int) -> list[str]:
    """The Host headers the page answers: the served name and port (and, on loopback,
    ``localhost`` and ``127.0.0.1`` with that port)."""
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    names = [f"{shown}:{port}"]
    if is_loopback(host):
        names += [f"localhost:{port}", f"127.0.0.1:{port}"]
    return list(dict.fromkeys(names))


def urls(session: LabelSession, scheme: str, name: str) -> list[tuple[str, str]]:
    """(labeller, her URL) for each labeller of the session."""
    return [(p.name, f"{scheme}://{name}/l/{p.token}/") for p in session.labellers.values()]


def serve(session: LabelSession, listen: Listen,
          announce: Callable[[list[tuple[str, str]]], None]) -> None:
    """Serve ``session`` until interrupted; ``announce`` gets each labeller's URL once the
    port is bound."""
    # uvicorn: the label extra, loaded only when the page is served.
    import uvicorn

    check_listen(listen)
    sock = bind(listen)
    port = sock.getsockname()[1]
    tls = listen.tls_cert is not None
    scheme = "https" if tls else "http"
    names = host_names(listen.host, port)
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
