"""The row pages: a page of rows (``/d/REF/rows``), one row (``/d/REF/row/N``), a row by key
(``/d/REF/find``) and a media value's bytes with HTTP Range (``/d/REF/media?row=N&field=F``).

Everything comes from the inspect layer's row source (:mod:`dsm.inspect`): it reads only the pieces holding
the rows shown, renders cells by role and masks classified fields. Pages of rows are at most
:data:`MAX_LENGTH` rows, as the Hugging Face viewer's ``/rows`` API.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from dsm.commands.inspect import parse_key
from dsm.contract import Contract
from dsm.errors import DatasetNotFound, InputError
from dsm.inspect import RowSource
from dsm.inspect.view import RowPage, plain
from dsm.viewers.web import links
from dsm.viewers.web.cells import cut_page_rows, is_media
from dsm.viewers.web.http import Page, Refused, json_response, query_int, wants_json
from dsm.viewers.web.ranges import RangeNotSatisfiable, byte_range
from dsm.viewers.web.refs import pinned
from dsm.viewers.web.state import ServerState

__all__ = [
    "DEFAULT_LENGTH",
    "MAX_LENGTH",
    "MEDIA_CHUNK",
    "find_page",
    "media",
    "media_info",
    "row_page",
    "rows_page",
]

MAX_LENGTH = 100
DEFAULT_LENGTH = 25
MEDIA_CHUNK = 1 << 20
"""Bytes read from a shard (or a referenced file) per chunk of a streamed media answer."""

_SAFE_MEDIA = ("image/", "audio/", "video/")


def _columns(text: str | None) -> list[str] | None:
    if not text:
        return None
    names = [c.strip() for c in text.split(",") if c.strip()]
    return names or None


def _opened(request: Request, state: ServerState) -> tuple[Contract, RowSource, str]:
    source = state.opened(request.path_params["ref"])
    contract = source.contract
    return contract, source, pinned(contract.name, int(contract.version or 0))


def _media_links(ref: str, page: RowPage) -> dict[int, dict[str, str]]:
    """``{position: {field: media URL}}`` for every cell a browser can show or play."""
    fields = {f.name: f.to_dict() for f in page.fields}
    out: dict[int, dict[str, str]] = {}
    for row in page.rows:
        for cell in row.cells:
            if is_media(cell.to_dict(), fields[cell.field]):
                out.setdefault(row.position, {})[cell.field] = links.media_url(ref, row.position, cell.field)
    return out


# ---------------------------------------------------------------------------------------- rows, row


def rows_page(request: Request, state: ServerState) -> Page:
    """Rows ``offset`` to ``offset + length - 1`` (at most 100), long cells cut with the cut said."""
    contract, source, ref = _opened(request, state)
    params = request.query_params
    length = query_int(params, "length", DEFAULT_LENGTH, minimum=1, maximum=MAX_LENGTH)
    offset = query_int(params, "offset", 0, maximum=source.num_rows)
    columns_text = params.get("columns") or None
    page = source.read(offset, length, columns=_columns(columns_text))
    data = page.to_dict()
    data["rows"] = cut_page_rows(data["rows"])
    total = source.num_rows
    last_offset = max(0, (total - 1) // length * length) if total else 0
    data["ref"] = ref
    data["requested"] = request.path_params["ref"]
    data["paging"] = {
        "offset": offset,
        "length": length,
        "shown": len(page.rows),
        "total": total,
        "first": links.rows_url(ref, 0, length, columns_text),
        "previous": links.rows_url(ref, max(0, offset - length), length, columns_text) if offset else None,
        "next": links.rows_url(ref, offset + length, length, columns_text)
        if offset + length < total
        else None,
        "last": links.rows_url(ref, last_offset, length, columns_text),
    }
    data["links"] = {
        "rows": {str(r.position): links.row_url(ref, r.position) for r in page.rows},
        "media": {str(p): m for p, m in _media_links(ref, page).items()},
    }
    return Page(
        template="rows.html",
        title=f"{ref} rows {offset:,}-{offset + max(len(page.rows), 1) - 1:,}",
        data=data,
        context={
            "columns_text": columns_text or "",
            "version": contract.version,
            "lengths": (10, 25, 50, 100),
        },
    )


def _row_number(request: Request, source: RowSource) -> int:
    text = request.path_params["position"]
    if not text.isdigit():
        raise DatasetNotFound(f"{text[:40]!r} is not a row number: rows are 0 to {source.num_rows - 1:,}")
    position = int(text)
    if position >= source.num_rows:
        raise DatasetNotFound(
            f"{source.ref} has no row {position:,}: rows are 0 to {source.num_rows - 1:,}"
            if source.num_rows
            else f"{source.ref} has no rows"
        )
    return position


def row_page(request: Request, state: ServerState) -> Page:
    """One row, whole: every cell by role, where it lives (shard, row group, line), its deep link."""
    contract, source, ref = _opened(request, state)
    position = _row_number(request, source)
    columns_text = request.query_params.get("columns") or None
    page = source.take([position], columns=_columns(columns_text), selection={"kind": "row", "row": position})
    row = page.rows[0]
    data = page.to_dict()
    data["ref"] = ref
    data["requested"] = request.path_params["ref"]
    data["position"] = position
    data["where"] = row.location.describe()
    key = {name: row.cell(name).value for name in contract.schema.key if _has(row, name)}
    masked_key = any(source.policy.is_masked(name) for name in key)
    data["links"] = {
        "permalink": links.row_url(ref, position),
        "key": links.find_url(ref, key) if key and not masked_key else None,
        "previous": links.row_url(ref, position - 1) if position else None,
        "next": links.row_url(ref, position + 1) if position + 1 < source.num_rows else None,
        "rows": links.rows_url(ref, position // DEFAULT_LENGTH * DEFAULT_LENGTH, DEFAULT_LENGTH),
        "media": _media_links(ref, page).get(position, {}),
        "episodes": [links.episode_url(ref, plain(e.episode)) for e in page.episodes],
    }
    return Page(template="row.html", title=f"{ref} row {position:,}", data=data)


def _has(row: Any, name: str) -> bool:
    try:
        row.cell(name)
    except KeyError:
        return False
    return True


# -------------------------------------------------------------------------------------------- find


def find_page(request: Request, state: ServerState) -> Page | Response:
    """A row by position (``row=N``) or key (``key=id=123``, repeatable): the row's page, or with
    ``all=1`` every match (at most 100)."""
    contract, source, ref = _opened(request, state)
    params = request.query_params
    pairs = params.getlist("key")
    if "row" in params and not pairs:
        position = query_int(params, "row", 0)
        if position >= source.num_rows:
            raise DatasetNotFound(
                f"{source.ref} has no row {position:,}: rows are 0 to {source.num_rows - 1:,}"
            )
        positions, scanned, complete = [position], 1, True
        query: dict[str, Any] = {"row": position}
    elif pairs:
        wanted = parse_key(pairs, contract.schema.key)
        every = params.get("all") in ("1", "true", "yes")
        found = source.find(wanted, all=every, limit=MAX_LENGTH)
        positions, scanned, complete = list(found.positions), found.scanned_rows, found.complete
        shown = {k: source.policy.text(k, v) if source.policy.is_masked(k) else v for k, v in wanted.items()}
        query = {"key": shown, "all": every}
    else:
        raise InputError("give row=N or key=FIELD=VALUE (repeatable for a composite key)")
    if not positions:
        asked = ", ".join(f"{k}={v}" for k, v in query.get("key", {}).items())
        raise DatasetNotFound(f"{source.ref}: no row with {asked} ({scanned:,} rows read)")
    data = {
        "dataset": ref,
        "query": query,
        "positions": positions,
        "scanned_rows": scanned,
        "complete": complete,
        "links": [links.row_url(ref, p) for p in positions],
    }
    if len(positions) == 1 and not wants_json(request):
        return RedirectResponse(links.row_url(ref, positions[0]), status_code=303)
    page = source.take(positions, selection={"kind": "find", **query})
    return Page(
        template="find.html",
        title=f"{ref} find",
        data=data,
        context={"page": page.to_dict() | {"rows": cut_page_rows(page.to_dict()["rows"])}},
    )


# ------------------------------------------------------------------------------------------- media


def _media_args(request: Request, source: RowSource) -> tuple[int, str]:
    params = request.query_params
    if "row" not in params or "field" not in params:
        raise InputError("give row=N and field=NAME")
    position = query_int(params, "row", 0)
    if position >= source.num_rows:
        raise DatasetNotFound(f"{source.ref} has no row {position:,}: rows are 0 to {source.num_rows - 1:,}")
    field = params["field"]
    view = source.field(field)
    if view.masked:
        raise Refused(
            f"{source.ref}: field {field!r} is classified ({view.classification}) and masked; its bytes are "
            f"served only by a server started with --unmask {field} (audited)"
        )
    return position, field


def media_info(request: Request, state: ServerState) -> Response:
    """``/d/REF/media.json``: where a media value's bytes are (the layer's ``MediaRef``: source, media
    type, size, byte range in the shard) and the URL that serves them."""
    _, source, ref = _opened(request, state)
    position, field = _media_args(request, source)
    found = source.media_ref(position, field)
    return json_response(dict(found.to_dict(), src=links.media_url(ref, position, field), dataset=ref))


def _content_type(media_type: str | None) -> tuple[str, bool]:
    """The type to serve a value as, and whether it may be shown inline. Only image, audio and video types
    are served as themselves (anything else is a download): a value declared ``text/html`` must never run
    as a page of this server."""
    if media_type and media_type.startswith(_SAFE_MEDIA) and media_type.isascii() and ";" not in media_type:
        return media_type, True
    return "application/octet-stream", False


def media(request: Request, state: ServerState) -> Response:
    """The bytes of one media value, with ``Range`` (206), ``HEAD`` and a validator; streamed in chunks of
    the shard or file (never a temporary copy of the shard)."""
    contract, source, ref = _opened(request, state)
    position, field = _media_args(request, source)
    found = source.media_ref(position, field)
    size = found.size
    content_type, inline = _content_type(found.media_type)
    tag = hashlib.sha256(
        f"{contract.name}@{contract.version}:{position}:{field}:{size}".encode()
    ).hexdigest()[:32]
    headers = {
        "Accept-Ranges": "bytes",
        "ETag": f'"{tag}"',
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
        "Content-Disposition": "inline" if inline else f'attachment; filename="row{position}.bin"',
        "Cache-Control": "private, max-age=3600"
        if request.path_params["ref"] == ref
        else "private, no-cache",
    }
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    try:
        span = byte_range(request.headers.get("range"), size)
    except RangeNotSatisfiable:
        return Response(status_code=416, headers=headers | {"Content-Range": f"bytes */{size}"})
    start, end = span if span is not None else (0, size)
    status = 206 if span is not None else 200
    if span is not None:
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    headers["Content-Length"] = str(end - start)
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers, media_type=content_type)
    if found.source == "value" or end - start <= MEDIA_CHUNK:
        body = source.media_bytes(position, field, start=start, end=end)
        return Response(body, status_code=status, headers=headers, media_type=content_type)
    return StreamingResponse(
        _chunks(source, position, field, start, end),
        status_code=status,
        headers=headers,
        media_type=content_type,
    )


def _chunks(source: RowSource, position: int, field: str, start: int, end: int) -> Iterator[bytes]:
    at = start
    while at < end:
        stop = min(end, at + MEDIA_CHUNK)
        yield source.media_bytes(position, field, start=at, end=stop)
        at = stop
