"""The row diff of two versions (``/d/OLD/diff/NEW``): counts, changed cells highlighted, paged.

The comparison is the inspect layer's (:func:`dsm.inspect.rowdiff.compare_rows`: by key, else by position;
shards with equal fingerprints skipped). It runs once per (OLD, NEW, key) as a job of the server; the page
shows its progress until it is done (answered 202), then its summary and one page of differences of a kind
(``changed``, ``added``, ``removed``) at a time. The work folder of a comparison is removed when the server
drops it (it keeps the newest few) or stops.
"""

from __future__ import annotations

import threading
from typing import Any

from starlette.requests import Request

from dsm.errors import InputError
from dsm.inspect.rowdiff import DIFF_KINDS, RowDiffRun, compare_rows
from dsm.viewers.web import links
from dsm.viewers.web.cells import cut_cell
from dsm.viewers.web.http import Page, query_int
from dsm.viewers.web.jobs import JobProgress
from dsm.viewers.web.refs import pinned
from dsm.viewers.web.state import ServerState

__all__ = ["DEFAULT_LENGTH", "MAX_LENGTH", "DiffResult", "diff_page"]

MAX_LENGTH = 100
DEFAULT_LENGTH = 20


class DiffResult:
    """A finished comparison and the lock its pages are read under (a run reads its files one page at a
    time)."""

    def __init__(self, run: RowDiffRun) -> None:
        self.run = run
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            self.run.close()


def _cut(row: dict[str, Any]) -> dict[str, Any]:
    for side in ("old", "new"):
        row[side] = {name: cut_cell(cell, chars=600) for name, cell in row[side].items()}
    return row


def diff_page(request: Request, state: ServerState) -> Page:
    """Rows added, removed and changed between OLD and NEW; ``key`` (repeatable) overrides OLD's key."""
    old = state.opened(request.path_params["ref"])
    new = state.opened(request.path_params["new"])
    old_contract, new_contract = old.contract, new.contract
    params = request.query_params
    key = tuple(params.getlist("key")) or None
    kind = params.get("kind") or "changed"
    if kind not in DIFF_KINDS:
        raise InputError(f"kind={kind[:40]!r}: one of {', '.join(DIFF_KINDS)}")
    offset = query_int(params, "offset", 0)
    length = query_int(params, "length", DEFAULT_LENGTH, minimum=1, maximum=MAX_LENGTH)
    old_ref = pinned(old_contract.name, int(old_contract.version or 0))
    new_ref = pinned(new_contract.name, int(new_contract.version or 0))

    def work(progress: JobProgress) -> DiffResult:
        return DiffResult(compare_rows(old, new, key=key, progress=progress))

    job = state.jobs.submit(
        ("diff", old_ref, new_ref, key),
        "diff",
        work,
        close=lambda result: result.close(),
        retry=request.query_params.get("retry") == "1",
    )
    data: dict[str, Any] = {"old": old_ref, "new": new_ref, "key": list(key or ()), "job": job.to_dict()}
    if not job.finished:
        return Page(template="diff.html", title=f"{old_ref} → {new_ref}", data=data, status=202)
    if job.state == "failed":
        data["error"] = job.error
        return Page(template="diff.html", title=f"{old_ref} → {new_ref}", data=data, status=400)
    result: DiffResult = job.result
    with result.lock:
        summary = result.run.summary
        total = result.run.total(kind)
        if offset > total:
            raise InputError(f"offset {offset:,} is past the last {kind} row ({total:,})")
        page = result.run.page(kind, offset, length)
    rows = [_cut(r.to_dict()) for r in page.rows]
    for row in rows:
        row["links"] = {
            "old": links.row_url(old_ref, row["old_position"]) if row["old_position"] is not None else None,
            "new": links.row_url(new_ref, row["new_position"]) if row["new_position"] is not None else None,
        }
    params_for = {"key": list(key) if key else None, "kind": kind, "length": length}
    data |= {
        "summary": summary.to_dict(),
        "kind": kind,
        "offset": offset,
        "length": length,
        "total": total,
        "page": dict(page.to_dict(), rows=rows),
        "links": {
            kind_name: links.diff_url(old_ref, new_ref, **(params_for | {"kind": kind_name}))
            for kind_name in DIFF_KINDS
        }
        | {
            "previous": links.diff_url(old_ref, new_ref, **params_for, offset=max(0, offset - length))
            if offset
            else None,
            "next": links.diff_url(old_ref, new_ref, **params_for, offset=offset + length)
            if offset + length < total
            else None,
        },
    }
    return Page(template="diff.html", title=f"{old_ref} → {new_ref}", data=data)
