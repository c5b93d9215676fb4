"""How a page becomes a response: HTML from a template, or its ``.json`` twin from the same data.

Every page handler returns a :class:`Page`: the template, the ``data`` (exactly what the ``.json`` twin of
the URL returns) and HTML-only context. :func:`endpoint` turns a handler into a Starlette endpoint that
answers ``PATH`` with HTML and ``PATH.json`` with JSON, and maps the ``DsmError`` family to HTTP statuses
(:data:`STATUSES`), with the message (credentials redacted) as an error page or ``{"error": ...}``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dsm.errors import CheckFailed, DatasetNotFound, DsmError, FormatError, InputError, StorageError
from dsm.inspect.view import plain
from dsm.storage import redact

if TYPE_CHECKING:
    from dsm.viewers.web.state import ServerState

__all__ = [
    "JSON_SUFFIX",
    "STATUSES",
    "Page",
    "Refused",
    "endpoint",
    "error_status",
    "json_response",
    "query_int",
    "twin",
]

JSON_SUFFIX = ".json"


class Refused(InputError):
    """A request for something the server will not show (a masked field's bytes): answered 403."""


STATUSES: Final[tuple[tuple[type[BaseException], int], ...]] = (
    (Refused, 403),
    (DatasetNotFound, 404),
    (FormatError, 422),
    (InputError, 400),
    (CheckFailed, 409),
    (StorageError, 503),
    (DsmError, 400),
)
"""``(exception class, HTTP status)``, first match wins; any other exception is a 500 (a bug)."""

log = logging.getLogger("dsm.serve")


def error_status(error: BaseException) -> int:
    for cls, status in STATUSES:
        if isinstance(error, cls):
            return status
    return 500


@dataclass(frozen=True, kw_only=True)
class Page:
    """What a handler returns: ``data`` is the JSON twin; ``context`` only feeds the template."""

    template: str
    title: str
    data: Mapping[str, Any]
    context: Mapping[str, Any] = field(default_factory=dict)
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


def json_text(data: Any) -> str:
    """``data`` as JSON: plain values only (NaN and infinities as text, times ISO 8601).

    The view model is plain already (the fast path); anything else (a NaN in a cutover's evidence, a time)
    goes through :func:`dsm.inspect.view.plain` first."""
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_refuse)
    except (ValueError, TypeError):
        return json.dumps(plain(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _refuse(value: Any) -> Any:
    raise TypeError(f"not plain: {type(value).__name__}")


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        json_text(data), status_code=status, media_type="application/json", headers=dict(headers or {})
    )


def wants_json(request: Request) -> bool:
    return request.url.path.endswith(JSON_SUFFIX)


Handler = Callable[[Request, "ServerState"], "Page | Response"]


def endpoint(handler: Handler) -> Callable[[Request], Response]:
    """A Starlette endpoint (run in the thread pool) answering HTML or the JSON twin of ``handler``."""

    def run(request: Request) -> Response:
        state: ServerState = request.app.state.dsm
        as_json = wants_json(request)
        try:
            page = handler(request, state)
            if isinstance(page, Response):
                return page
            if as_json:
                return json_response(page.data, page.status, page.headers)
            return render(request, page)
        except DsmError as exc:
            return error_response(request, exc, as_json)
        except Exception as exc:  # a bug: a 500 naming it, the traceback on the server's stderr
            log.exception("internal error on %s", request.url.path)
            return error_response(request, exc, as_json)

    run.__name__ = handler.__name__
    run.__doc__ = handler.__doc__
    return run


def render(request: Request, page: Page) -> Response:
    templates = request.app.state.templates
    state: ServerState = request.app.state.dsm
    context = {
        "title": page.title,
        "data": page.data,
        "json_url": json_twin(request),
        "registry_url": state.registry_url,
        "unmask": state.config.unmask,
        **page.context,
    }
    return templates.TemplateResponse(  # type: ignore[no-any-return]
        request, page.template, context, status_code=page.status, headers=dict(page.headers)
    )


def json_twin(request: Request) -> str:
    """The URL of this page's ``.json`` twin (same query)."""
    path = request.url.path.rstrip("/") or "/index"
    if path == "/":
        path = "/index"
    query = f"?{request.url.query}" if request.url.query else ""
    return f"{path}{JSON_SUFFIX}{query}"


def error_response(request: Request, error: BaseException, as_json: bool) -> Response:
    status = error_status(error)
    if status == 500:
        message = f"internal error ({type(error).__name__}); the server's log has the details"
    else:
        message = redact(str(error))
    kind = type(error).__name__
    if as_json:
        return json_response({"error": {"status": status, "kind": kind, "message": message}}, status)
    page = Page(
        template="error.html",
        title=f"{status}",
        data={"error": {"status": status, "kind": kind, "message": message}},
        status=status,
    )
    return render(request, page)


def query_int(
    params: Mapping[str, str], name: str, default: int, *, minimum: int = 0, maximum: int | None = None
) -> int:
    """A whole-number query parameter, checked: an :class:`InputError` (400) naming it when it is not a
    number or out of ``minimum..maximum``."""
    text = params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{name}={text[:40]!r} is not a whole number") from None
    if value < minimum:
        raise InputError(f"{name} must be at least {minimum:,}, got {value:,}")
    if maximum is not None and value > maximum:
        raise InputError(f"{name} must be at most {maximum:,}, got {value:,}")
    return value


def twin(path: str, handler: Handler, *, name: str | None = None) -> list[Route]:
    """Two routes: ``PATH.json`` (first, so that ``{ref}`` never swallows the suffix) and ``PATH``."""
    run = endpoint(handler)
    return [
        Route(path + JSON_SUFFIX, run, methods=["GET", "HEAD"], name=f"{name or handler.__name__}.json"),
        Route(path, run, methods=["GET", "HEAD"], name=name or handler.__name__),
    ]
