"""Cutovers and bench reports: every cutover (``/cutovers``), one with its stages, evidence, lease and plan
beside actual (``/cutovers/ID``, refreshed while it runs), its shadow stage's bench report
(``/cutovers/ID/bench``), and the HTML reports of ``dsm bench --output`` in the folder given at start
(``/bench``, ``/bench/NAME``).

Cutover states come from ``dsm cutover status`` and ``list`` (:mod:`dsm.commands.cutover`); reports are
served as their writer made them, under a policy that lets them style themselves and nothing more.
"""

from __future__ import annotations

import posixpath
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from dsm.commands.cutover import cutover_status, list_cutovers, shadow_report
from dsm.errors import DatasetNotFound
from dsm.storage import Location, location, redact
from dsm.viewers.web import links
from dsm.viewers.web.http import Page
from dsm.viewers.web.state import ServerState

__all__ = ["REPORT_POLICY", "bench_list", "bench_report", "cutover_bench", "cutover_page", "cutovers_page"]

REPORT_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"
"""A report is self-contained HTML with inline SVG and no script: it may style itself, run nothing and
reach nothing."""


def _running(report: dict[str, Any]) -> bool:
    """Whether a process holds the cutover's lease now (the page then refreshes itself)."""
    lease = report.get("lease")
    if not isinstance(lease, dict):
        return False
    return not lease.get("released") and float(lease.get("expires") or 0) > time.time()


def cutovers_page(request: Request, state: ServerState) -> Page:
    """Every cutover of the registry, newest first: dataset, alias, phase, next stage, lease holder."""
    reports = [r.to_dict() for r in reversed(list_cutovers(registry=state.registry))]
    for report in reports:
        report["link"] = links.cutover_url(report["id"])
    data = {"cutovers": reports}
    return Page(
        template="cutovers.html",
        title="cutovers",
        data=data,
        context={"refresh": any(_running(r) for r in reports)},
    )


def cutover_page(request: Request, state: ServerState) -> Page:
    """One cutover: stages with their evidence, the lease, the copy's progress, the plan beside actual."""
    cutover_id = request.path_params["cutover"]
    report = cutover_status(cutover_id, registry=state.registry).to_dict()
    report["links"] = {
        "bench": f"{links.cutover_url(cutover_id)}/bench" if _has_report(report) else None,
        "source": links.version_url(f"{report['dataset']}@{report['state']['source_version']}"),
        "target": links.version_url(f"{report['dataset']}@{report['state']['target_version']}")
        if report["state"].get("target_version")
        else None,
    }
    return Page(
        template="cutover.html",
        title=f"cutover {cutover_id}",
        data=report,
        context={"refresh": _running(report)},
    )


def _has_report(report: dict[str, Any]) -> bool:
    for stage in report["state"]["stages"]:
        if stage["name"] == "shadow" and (stage.get("evidence") or {}).get("bench", {}).get("report"):
            return True
    return False


def cutover_bench(request: Request, state: ServerState) -> Response:
    """The HTML report of the cutover's shadow stage (``dsm bench --compare`` of old and new)."""
    cutover_id = request.path_params["cutover"]
    html = shadow_report(cutover_id, registry=state.registry)
    if html is None:
        raise DatasetNotFound(f"cutover {cutover_id}: its shadow stage has not written a bench report")
    return Response(html, media_type="text/html", headers={"Content-Security-Policy": REPORT_POLICY})


# --------------------------------------------------------------------------------------- bench reports


def _reports_folder(state: ServerState) -> Location:
    folder = state.config.bench_reports
    if folder is None:
        raise DatasetNotFound("no bench reports folder: start dsm serve with --bench-reports URL")
    return location(folder, state.config.storage_options)


def _reports(loc: Location) -> dict[str, Any]:
    """The HTML files directly in the folder, by name (no subfolders: a name is never a path)."""
    out = {}
    for info in loc.list_files(recursive=False):
        name = posixpath.basename(info.path)
        if name == info.path and name.lower().endswith((".html", ".htm")) and not name.startswith("."):
            out[name] = info
    return out


def bench_list(request: Request, state: ServerState) -> Page:
    """The bench reports of the folder given with ``--bench-reports``, by name."""
    folder = None
    items: list[dict[str, Any]] = []
    if state.config.bench_reports is not None:
        loc = _reports_folder(state)
        folder = redact(loc.url_of(""))
        items = [
            {"name": name, "bytes": info.size, "link": f"/bench/{name}"}
            for name, info in sorted(_reports(loc).items())
        ]
    return Page(template="bench.html", title="bench reports", data={"folder": folder, "reports": items})


def bench_report(request: Request, state: ServerState) -> Response:
    """One report of that folder, by its exact listed name (anything else is a 404)."""
    name = request.path_params["name"]
    loc = _reports_folder(state)
    found = _reports(loc)
    if name not in found:
        raise DatasetNotFound(f"no bench report named {name[:80]!r} in {redact(loc.url_of(''))}")
    return Response(
        loc.read_bytes(name), media_type="text/html", headers={"Content-Security-Policy": REPORT_POLICY}
    )
