"""The guard in front of every route of the inbox: the peer and Host checks, the login, the
browser's cookie, the Origin of state-changing requests, the security headers, bounded form
bodies (the rules themselves are in :mod:`miniagent.ui.security`)."""

from __future__ import annotations

import logging
import time

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from miniagent.core.errors import MiniAgentError, SessionNotFound
from miniagent.ui import views
from miniagent.ui.security import (
    MAX_FORM_BYTES,
    Gate,
    Refused,
    cookie_of,
    parse_form,
    set_cookie,
)

log = logging.getLogger("miniagent")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
"""The pages' Content-Security-Policy: the server's own script and stylesheet only, nothing
inline, nothing from elsewhere, forms posted only here, never framed."""


class Guarded:
    """In front of every route: the peer and Host checks, the login, the browser's cookie,
    the Origin of state-changing requests, and the security headers of every response."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app, self.gate = app, gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        root = scope.get("root_path", "")
        path = scope["path"][len(root):] if scope["path"].startswith(root) else scope["path"]
        cookie = cookie_of(headers.get("cookie"))
        issued = None
        try:
            self.gate.check_peer(scope.get("client"))
            self.gate.check_host(headers.get("host"))
            if not self.gate.cookie_valid(cookie):
                cookie = None
                if self.gate.token is None:
                    cookie = issued = self.gate.new_cookie(logged_in=False)
            if cookie is None and path != "/login" and not path.startswith("/static/"):
                if scope["method"] in ("GET", "HEAD"):
                    await plain(RedirectResponse(f"{root}/login", 303), scope, receive, send)
                    return
                raise Refused(401, "log in first")
            if scope["method"] not in ("GET", "HEAD"):
                self.gate.check_origin(scope.get("scheme", "http"), headers.get("host", ""),
                                       headers.get("origin"), headers.get("referer"))
        except Refused as refused:
            await plain(Response(refused.message, refused.status, media_type="text/plain"),
                         scope, receive, send)
            return
        scope.setdefault("state", {})["cookie"] = cookie
        started = False

        async def send_guarded(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                out = MutableHeaders(scope=message)
                secure(out)
                if issued is not None:
                    out.append("Set-Cookie", set_cookie(
                        issued, secure=scope.get("scheme") == "https"))
            await send(message)

        try:
            await self.app(scope, receive, send_guarded)
        except Exception as exc:
            if started:  # a stream broke off: nothing more can be said to the browser
                raise
            await plain(error_page(exc, root), scope, receive, send)


def error_page(exc: Exception, root: str) -> Response:
    """The page of a request that failed: a damaged store, a session that cannot be read, an
    unreachable Temporal (miniagent's own errors say what and what to do), else a short
    note; never a traceback, and under the same headers as every page."""
    if isinstance(exc, MiniAgentError):
        status = 404 if isinstance(exc, SessionNotFound) else 500
        title, message = "Cannot show this page", str(exc)
    else:
        log.error("the inbox failed on a request", exc_info=exc)
        status = 500
        title = "Internal error"
        message = (f"The server failed ({type(exc).__name__}); its log has the details.")
    ctx = views.Ctx(base=root, csrf="", now=time.time(), where="", runs_here=False)
    return HTMLResponse(views.message_page(ctx, title, message), status_code=status)


def secure(out: MutableHeaders) -> None:
    if "content-security-policy" not in out:
        out["Content-Security-Policy"] = CSP
    out["X-Content-Type-Options"] = "nosniff"
    out["X-Frame-Options"] = "DENY"
    out["Referrer-Policy"] = "same-origin"
    if "cache-control" not in out:
        out["Cache-Control"] = "no-store"


async def plain(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
    secure(response.headers)
    await response(scope, receive, send)


async def read_form(request: Request) -> dict[str, str] | Response:
    """The request's form body, read up to ``MAX_FORM_BYTES`` (a larger one is refused)."""
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise Refused(413, f"the form is larger than {MAX_FORM_BYTES:,} bytes")
        return parse_form(bytes(body))
    except Refused as refused:
        return Response(refused.message, refused.status, media_type="text/plain")
