"""The labelling page as a Starlette application: server-rendered Jinja2 pages (autoescaped),
plain forms (POST, then a redirect) that work without JavaScript, and one packaged script
that adds the keys.

Every request is checked before it reaches a page (:class:`Guard`): its ``Host`` header must
be the served name and port (DNS rebinding), its path must carry a labeller's token
(``/l/TOKEN/...``; the token stays in the URL, no cookie), and a POST must come from the
served origin (its ``Origin``, else its ``Referer``). Every response, refusals included,
carries the security headers (:data:`SECURITY_HEADERS`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape

from evaluator.label.labelling import Labelling, Person
from evaluator.label.session import STOPPED

# ASGI's shapes (starlette.types names them; not imported here, to keep starlette lazy).
Scope = dict[str, Any]
Message = dict[str, Any]
ASGIApp = Any

HERE = Path(__file__).resolve().parent
# Only the page's own script, styles and images; no inline script or style, no frames, and
# forms post only back here.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
# Referrer-Policy: same-origin, not no-referrer: under no-referrer a browser sends
# ``Origin: null`` with the page's own form posts, and the origin check could not tell
# them from a forged one. same-origin sends no referrer (and so no token) to any other site.
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_FORM = 64 * 1024  # bytes: a form of this page is far smaller; read no further
FORM_TYPE = "application/x-www-form-urlencoded"
STATIC = {"label.js": "text/javascript; charset=utf-8", "label.css": "text/css; charset=utf-8",
          "favicon.svg": "image/svg+xml"}


class Guard:
    """ASGI middleware: the Host, token and origin checks, and the security headers."""

    def __init__(self, app: ASGIApp, session: Labelling[Any], hosts: Iterable[str],
                 scheme: str):
        self.app, self.session = app, session
        # Host names are compared without regard to case, and a browser leaves the scheme's
        # default port (80, 443) out of Host and Origin.
        default = DEFAULT_PORTS.get(scheme)
        self.hosts = {h.lower() for h in hosts}
        self.hosts |= {h.rpartition(":")[0] for h in self.hosts
                       if default is not None and h.rpartition(":")[2] == str(default)}
        self.origins = {f"{scheme}://{h}" for h in self.hosts}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.decode("latin-1").lower() not in SECURITY_HEADERS]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        refusal = self.refusal(scope)
        status = 403
        if refusal is None and await self.stopped(scope):
            refusal, status = STOPPED, 503
        if refusal is not None:
            body = (refusal + "\n").encode()
            await secured({"type": "http.response.start", "status": status, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode())]})
            await secured({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, secured)

    async def stopped(self, scope: Scope) -> bool:
        """The journal holds a line the analysis would refuse (taken in from another
        server), or was changed otherwise than by appending: every page but the static
        files is refused, so nothing more is saved or shown as labelled. The journal is
        read off the event loop (a save may hold its lock while it fsyncs)."""
        # starlette: the label extra, loaded only when the page is served.
        from starlette.concurrency import run_in_threadpool

        if "/static/" in scope.get("path", ""):
            return False
        await run_in_threadpool(self.session.refresh)
        return self.session.broken is not None

    def refusal(self, scope: Scope) -> str | None:
        """Why this request is refused (403), or None."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        if headers.get("host", "").lower() not in self.hosts:
            return "forbidden: unknown Host"
        parts = scope.get("path", "").split("/")
        if len(parts) < 3 or parts[1] != "l" or self.session.by_token(parts[2]) is None:
            return "forbidden: open the link you were given (it holds your token)"
        if scope.get("method") not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is None and "referer" in headers:
                split = urlsplit(headers["referer"])
                origin = f"{split.scheme}://{split.netloc}"
            if origin is None or origin.lower() not in self.origins:
                return "forbidden: a change must come from this page"
        return None


def is_form(content_type: str) -> bool:
    """Whether a Content-Type is a form's (its media type exactly, parameters allowed)."""
    return content_type.partition(";")[0].strip().lower() == FORM_TYPE


def case_number(text: str) -> int | None:
    """A case number in a URL: ASCII digits only (not ``1_0``, ``+1``, `` 1`` or other
    scripts' digits, all of which ``int`` takes), or None."""
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        return None
    return int(text)


def _templates() -> Environment:
    return Environment(loader=FileSystemLoader(str(HERE / "templates")),
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       trim_blocks=True, lstrip_blocks=True)


def build_app(session: Labelling[Any], hosts: Iterable[str], scheme: str = "http") -> ASGIApp:
    """The application serving ``session`` to requests whose Host is one of ``hosts``."""
    # starlette: the label extra, loaded only when the page is served.
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import (
        HTMLResponse,
        PlainTextResponse,
        RedirectResponse,
        Response,
    )
    from starlette.routing import Route

    env = _templates()
    case_page, done_page = env.get_template("case.html.j2"), env.get_template("done.html.j2")
    static = {name: (HERE / "static" / name).read_bytes() for name in STATIC}

    def person_of(request: Request) -> Person:
        person = session.by_token(request.path_params["token"])
        assert person is not None  # Guard refused every other token
        return person

    def base(person: Person) -> str:
        return f"/l/{person.token}"

    def index_of(request: Request, person: Person) -> int | None:
        index = case_number(request.path_params["index"])
        return index if index is not None and 1 <= index <= len(person.cases) else None

    def refuse(text: str, status: int) -> Response:
        # The body may be unread: close the connection rather than read on for the next
        # request.
        return PlainTextResponse(text + "\n", status_code=status,
                                 headers={"connection": "close"})

    async def form_body(request: Request) -> bytes | None:
        """The POST's body, or None when it is over MAX_FORM (by its Content-Length, or
        as it arrives: read no further than that)."""
        declared = request.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > MAX_FORM:
            return None
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM:
                return None
        return bytes(body)

    def page(person: Person, index: int, error: str | None = None,
             status: int = 200, form: dict[str, str] | None = None) -> Response:
        view = session.view(person, index, error, form)
        html = case_page.render(v=view, base=base(person), labeller=person.name,
                                title=session.rubric.title, unit=session.unit)
        return HTMLResponse(html, status_code=status)

    async def start(request: Request) -> Response:
        person = person_of(request)  # the journal taken in by the Guard, off the event loop
        first = session.first_unlabelled(person)
        target = f"/case/{first}" if first is not None else "/done"
        return RedirectResponse(base(person) + target, status_code=303)

    async def show(request: Request) -> Response:
        person = person_of(request)
        index = index_of(request, person)
        if index is None:
            return PlainTextResponse("no such case\n", status_code=404)
        return page(person, index)

    async def save(request: Request) -> Response:
        person = person_of(request)
        index = index_of(request, person)
        if index is None:
            return refuse("no such case", 404)
        if not is_form(request.headers.get("content-type", "")):
            return refuse("not a form of this page", 400)
        try:
            body = await form_body(request)
        except ClientDisconnect:  # she closed the page mid-save: nobody reads an answer
            return refuse("the request ended before its body", 400)
        if body is None:
            return refuse(f"too large for a form of this page (at most {MAX_FORM // 1024} "
                          "KiB)", 413)
        try:
            values = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        except (UnicodeDecodeError, ValueError):
            return PlainTextResponse("not a form of this page\n", status_code=400)
        case_id = person.cases[index - 1]
        shown_before = case_id in person.judge_shown
        # The journal's fsync blocks: off the event loop.
        written, problem = await run_in_threadpool(session.save, person, index, values)
        if problem is not None:  # the page again, as she filled it in, and why
            return page(person, index, problem, status=400, form=values)
        if session.show_judge and written and not shown_before and case_id in person.done:
            target = index  # the verdict, now that her own label is saved
        elif index < len(person.cases):
            target = index + 1
        else:
            target = session.first_unlabelled(person)
        path = f"/case/{target}" if target is not None else "/done"
        return RedirectResponse(base(person) + path, status_code=303)

    async def done(request: Request) -> Response:
        person = person_of(request)  # the journal taken in by the Guard, off the event loop
        html = done_page.render(labeller=person.name, done=len(person.done),
                                total=len(person.cases), base=base(person),
                                next_unlabelled=session.first_unlabelled(person),
                                title=session.rubric.title, unit=session.unit)
        return HTMLResponse(html)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in static:
            return PlainTextResponse("not found\n", status_code=404)
        return Response(static[name], media_type=STATIC[name])

    routes = [
        Route("/l/{token}/", start, methods=["GET"]),
        Route("/l/{token}/case/{index}", show, methods=["GET"]),
        Route("/l/{token}/case/{index}", save, methods=["POST"]),
        Route("/l/{token}/done", done, methods=["GET"]),
        Route("/l/{token}/static/{name}", asset, methods=["GET"]),
    ]
    return Guard(Starlette(routes=routes), session, hosts, scheme)
