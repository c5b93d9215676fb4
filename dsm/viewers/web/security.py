"""The checks every request passes before any page runs, and the headers every answer carries.

In order:

1. **Host.** On loopback, the ``Host`` header must name this server (``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT``): a page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) is refused (421).
2. **Cross-site.** A request a browser marks ``Sec-Fetch-Site: cross-site`` or ``same-site`` (another site's
   page loading this server's URLs) is refused (403): only this server's own pages, and direct visits, get
   answers.
3. **Methods.** The server is read-only: ``GET`` and ``HEAD`` only (405 otherwise, with ``Allow``).
4. **Token** (when the server has one, always on a non-loopback host): ``Authorization: Bearer TOKEN``, or
   the cookie set by visiting any page once with ``?token=TOKEN`` (answered with a redirect to the same URL
   without it, so the token leaves the address bar and the history). Compared in constant time. A request
   without it gets 401.

Answers get a Content-Security-Policy that allows this server's own scripts, styles and media and nothing
else (no CDN, no network), ``nosniff``, no referrer and no framing. The access log (logger
``dsm.serve.access``) never holds the token: the ``token`` query parameter is dropped from logged URLs, and
headers and cookies are never logged; the values of ``key`` parameters (a lookup may name a classified
field's value) are logged as ``***``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response

__all__ = ["COOKIE", "PAGE_POLICY", "Guard", "logged_path"]

COOKIE = "dsm_serve_token"
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-resource-policy": "same-origin",
}
_READ_ONLY = ("GET", "HEAD")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("dsm.serve.access")


def logged_path(scope: Scope, *, keys: bool = False) -> str:
    """The request's path and query as the access log shows it: without the token, and (unless ``keys``)
    with the values of ``key`` parameters hidden (a key may be a classified field's value)."""
    path = str(scope.get("path", ""))
    raw = scope.get("query_string", b"").decode("latin-1")
    if not raw:
        return path
    kept = [
        (k, v if keys or k != "key" else "***")
        for k, v in parse_qsl(raw, keep_blank_values=True)
        if k != "token"
    ]
    return f"{path}?{urlencode(kept, safe='*')}" if kept else path


class Guard:
    """ASGI middleware: the checks above, the security headers, the access log."""

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: tuple[str, ...] | None) -> None:
        self.app = app
        self._token = token.encode("utf-8") if token else None
        # The cookie holds a digest of the token, never the token itself.
        self._cookie = (
            hmac.new(self._token, b"dsm serve cookie", hashlib.sha256).hexdigest() if self._token else None
        )
        self._hosts = {h.lower() for h in hosts} if hosts is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets: nothing here pushes
        started = time.perf_counter()
        status = {"code": 0}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                headers = message.setdefault("headers", [])
                present = {name.lower() for name, _ in headers}
                for name, value in _HEADERS.items():
                    if name.encode() not in present:
                        headers.append((name.encode(), value.encode()))
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", PAGE_POLICY.encode()))
            await send(message)

        refusal = self._refusal(scope)
        try:
            if refusal is not None:
                await refusal(scope, receive, send_with_headers)
            else:
                await self.app(scope, receive, send_with_headers)
        finally:
            access_log.info(
                '%s "%s %s" %s %.1f ms',
                (scope.get("client") or ("-",))[0],
                scope.get("method"),
                logged_path(scope),
                status["code"],
                (time.perf_counter() - started) * 1000,
            )

    def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        if self._hosts is not None and headers.get("host", "").lower() not in self._hosts:
            return PlainTextResponse(
                "this server answers only to its own address (127.0.0.1, localhost or [::1] with its port)",
                status_code=421,
            )
        if headers.get("sec-fetch-site", "none") in ("cross-site", "same-site"):
            return PlainTextResponse("refused: a request from another site's page", status_code=403)
        if scope.get("method") not in _READ_ONLY:
            return PlainTextResponse(
                "this server is read-only: GET and HEAD only", status_code=405, headers={"Allow": "GET, HEAD"}
            )
        if self._token is None:
            return None
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        offered = query.get("token")
        if offered is not None and self._matches(offered):
            redirect = RedirectResponse(logged_path(scope, keys=True), status_code=303)
            assert self._cookie is not None
            redirect.set_cookie(COOKIE, self._cookie, httponly=True, samesite="strict", path="/")
            return redirect
        authorization = headers.get("authorization", "")
        bearer = authorization[7:] if authorization[:7].lower() == "bearer " else None
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        if bearer is not None and self._matches(bearer):
            return None
        if cookie is not None and self._cookie is not None and hmac.compare_digest(cookie, self._cookie):
            return None
        return PlainTextResponse(
            "a token is required: send Authorization: Bearer TOKEN, or open this URL once with ?token=TOKEN",
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="dsm serve"'},
        )

    def _matches(self, offered: str) -> bool:
        assert self._token is not None
        return hmac.compare_digest(offered.encode("utf-8"), self._token)


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None
