"""The registry pages: every dataset (``/``), one dataset with its lineage graph (``/d/NAME``), one version
with its contract, schema, shards and verify results (``/d/NAME@VERSION``), and verifying a version on request
(``/d/NAME@VERSION/verify``).

The data come from the commands (``dsm ls``, ``dsm log``, ``dsm audit``, ``dsm verify``, ``dsm cutover list``)
and the inspect layer (fields as viewers show them); nothing here reads rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request

from dsm.commands.catalog import ls
from dsm.commands.cutover import list_cutovers
from dsm.commands.inspect import LogEntry, audit, log
from dsm.commands.verify import VerifyReport, verify
from dsm.contract import Contract
from dsm.errors import InputError
from dsm.inspect import MaskPolicy
from dsm.inspect.episodes import EpisodeLayout
from dsm.inspect.view import field_views
from dsm.storage import redact
from dsm.viewers.web import links
from dsm.viewers.web.http import Page, query_int
from dsm.viewers.web.jobs import Job, JobProgress
from dsm.viewers.web.refs import pinned, url_reference
from dsm.viewers.web.state import ServerState

__all__ = [
    "SHARDS_PER_PAGE",
    "dataset_page",
    "lineage_layout",
    "registry_page",
    "verify_page",
    "version_page",
]

SHARDS_PER_PAGE = 500


def registry_page(request: Request, state: ServerState) -> Page:
    """Every dataset: versions, newest version's facts, aliases, statuses."""
    entries = ls(registry=state.registry)
    data = {
        "registry": state.registry_url,
        "datasets": [dict(e.to_dict(), location=redact(e.latest.location)) for e in entries],
        "unmasked": list(state.config.unmask),
    }
    return Page(template="registry.html", title="datasets", data=data)


# ------------------------------------------------------------------------------------- one dataset


def lineage_layout(entries: Sequence[LogEntry]) -> dict[str, Any]:
    """Boxes and edges of the lineage tree for an SVG: one row per version (newest first, as ``dsm log``
    lists them), indented by depth; an edge from each parent to the versions made from it."""
    width, height, indent, gap = 230, 44, 36, 14
    boxes: dict[int, dict[str, Any]] = {}
    for row, entry in enumerate(entries):
        boxes[entry.version] = {
            "version": entry.version,
            "x": 10 + entry.depth * indent,
            "y": 10 + row * (height + gap),
            "w": width,
            "h": height,
            "operation": entry.operation or "registered",
            "parent": entry.parent,
            "status": entry.status,
            "aliases": list(entry.aliases),
            "rows": entry.rows,
            "format": entry.format,
        }
    edges = []
    for entry in entries:
        for child in entry.children:
            a, b = boxes[entry.version], boxes[child]
            x = a["x"] + 12
            edges.append(
                {
                    "from": entry.version,
                    "to": child,
                    "d": f"M{x},{a['y'] + a['h']} V{b['y'] + b['h'] / 2} H{b['x']}"
                    if b["y"] > a["y"]
                    else f"M{x},{a['y']} V{b['y'] + b['h'] / 2} H{b['x']}",
                }
            )
    depth = max((e.depth for e in entries), default=0)
    return {
        "boxes": list(boxes.values()),
        "edges": edges,
        "width": 20 + depth * indent + width + 160,
        "height": 20 + len(entries) * (height + gap),
    }


def dataset_page(request: Request, state: ServerState) -> Page:
    """One dataset: its versions as a lineage graph, aliases, statuses and its audit log."""
    name, selector = url_reference(request.path_params["ref"])
    if selector is not None:
        raise InputError("internal: a version reference reached the dataset page")
    lineage = log(name, registry=state.registry)
    records = audit(name, registry=state.registry).records
    data = {
        "name": name,
        "aliases": dict(lineage.aliases),
        "versions": [dict(e.to_dict(), location=redact(e.location)) for e in lineage.entries],
        "audit": [r.to_dict() for r in records],
    }
    return Page(
        template="dataset.html",
        title=name,
        data=data,
        context={"graph": lineage_layout(lineage.entries)},
    )


# ------------------------------------------------------------------------------------- one version


def _shard_rows(contract: Contract, offset: int, count: int) -> list[dict[str, Any]]:
    start = sum(int(s.rows or 0) for s in contract.shards[:offset])
    out = []
    for index, shard in enumerate(contract.shards[offset : offset + count], start=offset):
        out.append(dict(shard.to_dict(), index=index, first_position=start))
        start += int(shard.rows or 0)
    return out


def _cutover_verifies(contract: Contract, state: ServerState) -> list[dict[str, Any]]:
    """The verify stages of cutovers whose target is this version (their evidence is in the registry)."""
    out = []
    for report in list_cutovers(name=contract.name, registry=state.registry):
        for stage in report.state.stages:
            evidence = stage.evidence or {}
            if stage.name == "verify" and evidence.get("target") == contract.ref:
                out.append(
                    {
                        "cutover": report.id,
                        "status": stage.status,
                        "finished": stage.finished,
                        "verify": evidence.get("verify"),
                        "fingerprint": evidence.get("fingerprint"),
                    }
                )
    return out


def _verify_key(contract: Contract, deep: bool) -> tuple[str, str, bool]:
    return ("verify", contract.ref, deep)


def _latest_verify(contract: Contract, state: ServerState) -> dict[str, Any] | None:
    for job in state.jobs.finished("verify"):
        key = job.key
        if isinstance(key, tuple) and key[1] == contract.ref:
            return _verify_data(job)
    return None


def _verify_data(job: Job) -> dict[str, Any]:
    report: VerifyReport | None = job.result
    return {"job": job.to_dict(), "deep": job.key[2], "report": report.to_dict() if report else None}  # type: ignore[index]


def version_page(request: Request, state: ServerState) -> Page:
    """One version: contract, schema with roles and classifications, shards, the latest verify results."""
    requested = request.path_params["ref"]
    contract = state.contract(requested)
    offset = query_int(request.query_params, "shards", 0)
    policy = MaskPolicy.of(contract.schema, state.unmask_for(contract))
    fields = field_views(contract.schema.fields, policy, contract.schema.key)
    latest = _latest_verify(contract, state)
    statuses = {}
    if latest and latest["report"]:
        statuses = {s["path"]: s for s in latest["report"]["shards"]}
    contract_data = contract.to_dict()
    contract_data["location"] = redact(contract.location)
    ref = pinned(contract.name, int(contract.version or 0))
    data = {
        "ref": ref,
        "requested": requested,
        "contract": contract_data,
        "fields": [f.to_dict() for f in fields],
        "rows": contract.total_rows,
        "bytes": contract.total_bytes,
        "episodes": EpisodeLayout.of(fields) is not None,
        "shards": {
            "offset": offset,
            "total": len(contract.shards),
            "items": _shard_rows(contract, offset, SHARDS_PER_PAGE),
        },
        "verify": latest,
        "cutover_verifies": _cutover_verifies(contract, state),
        "links": links.version_links(contract),
    }
    return Page(
        template="version.html",
        title=ref,
        data=data,
        context={"shard_status": statuses, "shards_per_page": SHARDS_PER_PAGE},
    )


def verify_page(request: Request, state: ServerState) -> Page:
    """``dsm verify`` of one version, run by the server on request (bytes; ``deep=1`` also the rows): the
    page shows its progress, then its report. The data and the registry are only read."""
    contract = state.contract(request.path_params["ref"])
    deep = request.query_params.get("deep") in ("1", "true", "yes")
    registry, options = state.registry, state.config.storage_options

    def work(progress: JobProgress) -> VerifyReport:
        return verify(contract, deep=deep, registry=registry, storage_options=options, progress=progress)

    job = state.jobs.submit(
        _verify_key(contract, deep), "verify", work, retry=request.query_params.get("retry") == "1"
    )
    data = dict(_verify_data(job), dataset=contract.ref)
    return Page(
        template="verify.html",
        title=f"verify {contract.ref}",
        data=data,
        status=200 if job.finished else 202,
        context={"refresh": not job.finished},
    )
