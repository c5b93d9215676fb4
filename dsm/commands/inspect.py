"""Looking at rows: ``dsm head``, ``sample``, ``find``, ``episodes``, ``log`` and ``audit``.

Each function opens the dataset through the inspect layer (:func:`dsm.inspect.open_rows`), which reads only
the pieces of shards that hold the rows asked for, renders values by the contract's field roles and masks
classified fields; ``unmask`` names classified fields to show, and each unmasking is recorded in the
registry's audit log (``dsm audit NAME``) before a value is read.

>>> page = head("web-text@prod", n=5, columns=["id", "text"])  # doctest: +SKIP
>>> page.rows[0].location.describe()  # doctest: +SKIP
'shard part-00000.parquet, row group 0 (row 0 of it), row 0 of the shard'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsm.contract import Contract
from dsm.errors import DatasetNotFound, InputError
from dsm.inspect.episodes import EpisodeLayout, EpisodeSummary
from dsm.inspect.source import RowSource, open_rows
from dsm.inspect.view import RowPage, plain
from dsm.registry import AuditRecord, Registry, open_registry, parse_reference

if TYPE_CHECKING:
    from dsm.engine import Progress

__all__ = [
    "AuditLog",
    "EpisodeReport",
    "FindResult",
    "LineageLog",
    "LogEntry",
    "audit",
    "episodes",
    "find",
    "head",
    "log",
    "parse_key",
    "sample",
]


def _open(
    ref: str | Contract,
    command: str,
    unmask: Sequence[str],
    reason: str | None,
    registry: str | Registry | None,
    storage_options: Mapping[str, Any] | None,
    cache_dir: str | None,
) -> RowSource:
    return open_rows(
        ref,
        registry=open_registry(registry, storage_options),
        unmask=unmask,
        reason=reason,
        command=command,
        storage_options=storage_options,
        cache_dir=cache_dir,
    )


def head(
    ref: str | Contract,
    *,
    n: int = 10,
    offset: int = 0,
    columns: Sequence[str] | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> RowPage:
    """The ``n`` rows from position ``offset`` (0-based, shards in contract order), rendered by role.

    Only the pieces holding those rows are read: a row group, record batch, block of lines or tar member
    range per shard touched.
    """
    source = _open(ref, "head", unmask, reason, registry, storage_options, cache_dir)
    return source.read(offset, n, columns=columns)


def sample(
    ref: str | Contract,
    *,
    n: int = 20,
    seed: int = 0,
    columns: Sequence[str] | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> RowPage:
    """``n`` rows drawn uniformly from the whole dataset (the same ``seed`` gives the same rows), shown in
    position order; only the pieces holding them are read."""
    source = _open(ref, "sample", unmask, reason, registry, storage_options, cache_dir)
    return source.sample(n, seed=seed, columns=columns)


# ------------------------------------------------------------------------------------------------ find


@dataclass(frozen=True, kw_only=True)
class FindResult:
    """The rows a ``find`` matched (with where they live), what was asked and how much was read.

    ``query`` is ``{"row": N}`` or ``{"key": {...}}`` (classified key values masked); ``complete`` is True
    when every row was looked at."""

    dataset: str
    query: Mapping[str, Any]
    page: RowPage
    scanned_rows: int
    complete: bool
    notes: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.page.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "query": dict(self.query),
            "found": self.found,
            "matches": len(self.page.rows),
            "scanned_rows": self.scanned_rows,
            "complete": self.complete,
            "notes": list(self.notes),
            "page": self.page.to_dict(),
        }


def parse_key(pairs: Sequence[str], key_fields: Sequence[str]) -> dict[str, str]:
    """``["id=123"]`` -> ``{"id": "123"}``; a bare ``VALUE`` names the contract's one key field."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            if len(key_fields) != 1:
                raise InputError(
                    f"--key {pair!r}: give FIELD=VALUE"
                    + (
                        f" (the contract's key is {list(key_fields)})"
                        if key_fields
                        else " (the contract has no key)"
                    )
                )
            name, value = key_fields[0], pair
        if not name:
            raise InputError(f"--key {pair!r}: give FIELD=VALUE")
        out[name] = value
    return out


def find(
    ref: str | Contract,
    *,
    row: int | None = None,
    key: Mapping[str, Any] | Sequence[str] | None = None,
    all: bool = False,
    limit: int = 100,
    columns: Sequence[str] | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    progress: Progress | None = None,
) -> FindResult:
    """A row by position (``row``: one piece of one shard is read) or the rows whose fields equal ``key``
    (``{"id": 123}``, or ``["id=123"]``; values in text are parsed by the field's type).

    A key lookup reads only the key's columns and stops at the first match unless ``all`` (then at ``limit``
    matches). Each match comes with its shard, row group (record batch, block, sample), line and position.
    """
    if (row is None) == (key is None or not key):
        raise InputError("give exactly one of --row N or --key FIELD=VALUE")
    if limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    source = _open(ref, "find", unmask, reason, registry, storage_options, cache_dir)
    if row is not None:
        page = source.take([row], columns=columns, selection={"kind": "find", "row": row})
        return FindResult(dataset=source.ref, query={"row": row}, page=page, scanned_rows=1, complete=True)
    contract_key = tuple(source.contract.schema.key)
    wanted = dict(key) if isinstance(key, Mapping) else parse_key(list(key or []), contract_key)
    shown = {
        name: source.policy.text(name, value) if source.policy.is_masked(name) else plain(value)
        for name, value in wanted.items()
    }
    notes = []
    if contract_key and set(wanted) != set(contract_key):
        notes.append(f"{', '.join(wanted)} is not the contract's key ({', '.join(contract_key)})")
    matches = source.find(wanted, all=all, limit=limit, progress=progress)
    page = source.take(
        list(matches.positions), columns=columns, selection={"kind": "find", "key": shown, "all": all}
    )
    if all and len(matches.positions) >= limit and not matches.complete:
        notes.append(f"stopped at {limit:,} matches (--limit)")
    return FindResult(
        dataset=source.ref,
        query={"key": shown},
        page=page,
        scanned_rows=matches.scanned_rows,
        complete=matches.complete,
        notes=tuple(notes),
    )


# -------------------------------------------------------------------------------------------- episodes


@dataclass(frozen=True, kw_only=True)
class EpisodeReport:
    """The episodes of an RL dataset: how many, how many look wrong and why, and their summaries (the
    first ``limit``, or the anomalous ones only)."""

    dataset: str
    layout: EpisodeLayout
    total: int
    anomalous: int
    by_anomaly: Mapping[str, int]
    episodes: tuple[EpisodeSummary, ...]
    anomalies_only: bool = False
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "layout": self.layout.to_dict(),
            "total": self.total,
            "anomalous": self.anomalous,
            "by_anomaly": dict(self.by_anomaly),
            "anomalies_only": self.anomalies_only,
            "truncated": self.truncated,
            "episodes": [e.to_dict() for e in self.episodes],
        }


def _anomaly_kind(text: str) -> str:
    return text.split(":")[0].split(" at step")[0].split(" (")[0]


def episodes(
    ref: str | Contract,
    *,
    anomalies_only: bool = False,
    limit: int = 1000,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    progress: Progress | None = None,
) -> EpisodeReport:
    """Every episode of an RL dataset summarised (length, return, where the terminal flag fires) with its
    anomalies (no terminal step, NaN rewards, steps out of order...). Reads only the RL columns."""
    if limit < 0:
        raise InputError(f"limit must be at least 0, got {limit}")
    source = _open(ref, "episodes", unmask, reason, registry, storage_options, cache_dir)
    layout = source.episode_layout
    if layout is None:
        raise InputError(
            f"{source.ref}: no field has an RL role (reward, done, terminated, truncated); give the fields "
            "roles in the contract (dsm register --infer-roles proposes them)"
        )
    masked = [name for name in layout.columns if source.policy.is_masked(name)]
    if masked:
        raise InputError(
            f"{source.ref}: RL field {masked[0]!r} is classified; pass --unmask {masked[0]} (audited)"
        )
    found = source.episodes(progress=progress)
    anomalous = [e for e in found if e.anomalies]
    counts: dict[str, int] = {}
    for summary in anomalous:
        for text in summary.anomalies:
            counts[_anomaly_kind(text)] = counts.get(_anomaly_kind(text), 0) + 1
    chosen = anomalous if anomalies_only else found
    return EpisodeReport(
        dataset=source.ref,
        layout=layout,
        total=len(found),
        anomalous=len(anomalous),
        by_anomaly=counts,
        episodes=tuple(chosen[:limit]),
        anomalies_only=anomalies_only,
        truncated=len(chosen) > limit,
    )


# ------------------------------------------------------------------------------------------------- log


@dataclass(frozen=True, kw_only=True)
class LogEntry:
    """One version in the lineage tree: how it was made, its status, the aliases on it, and its place in
    the tree (``depth`` 0 for a version whose parent is not a version of this dataset)."""

    version: int
    operation: str | None
    parent: str | None
    parameters: Mapping[str, Any]
    created: str | None
    status: str
    aliases: tuple[str, ...]
    rows: int | None
    format: str
    location: str
    tool: str | None
    depth: int
    children: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "operation": self.operation,
            "parent": self.parent,
            "parameters": dict(self.parameters),
            "created": self.created,
            "status": self.status,
            "aliases": list(self.aliases),
            "rows": self.rows,
            "format": self.format,
            "location": self.location,
            "tool": self.tool,
            "depth": self.depth,
            "children": list(self.children),
        }


@dataclass(frozen=True, kw_only=True)
class LineageLog:
    """Every version of a dataset as a lineage tree, newest first (depth-first: each version is followed by
    the versions made from it)."""

    name: str
    entries: tuple[LogEntry, ...]
    aliases: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": dict(self.aliases),
            "entries": [e.to_dict() for e in self.entries],
        }


def _parent_version(name: str, parent: str | None) -> int | None:
    if not parent:
        return None
    try:
        parent_name, selector = parse_reference(parent)
    except InputError:
        return None
    return int(selector) if parent_name == name and selector and selector.isdigit() else None


def log(
    name: str, *, registry: str | Registry | None = None, storage_options: Mapping[str, Any] | None = None
) -> LineageLog:
    """Every version of dataset ``name``: operation, parent, parameters, created, status and aliases, as a
    lineage tree, newest first. Reads contracts only."""
    reg = open_registry(registry, storage_options)
    if "@" in name:
        raise InputError(f"dsm log takes a dataset name, not a version: {name.split('@')[0]!r}")
    versions = reg.versions(name)
    if not versions:
        raise DatasetNotFound(f"no dataset named {name!r} in the registry; `dsm ls` lists the names")
    aliases = reg.aliases(name)
    by_version = {v: reg.get(name, v) for v in versions}
    parents = {
        v: _parent_version(name, c.lineage.parent if c.lineage else None) for v, c in by_version.items()
    }
    children: dict[int, list[int]] = {v: [] for v in versions}
    roots = []
    for v in versions:
        p = parents[v]
        if p is not None and p in children and p != v:
            children[p].append(v)
        else:
            roots.append(v)
    on_version: dict[int, list[str]] = {}
    for alias_name, v in sorted(aliases.items()):
        on_version.setdefault(v, []).append(alias_name)
    entries: list[LogEntry] = []

    def visit(v: int, depth: int) -> None:
        c = by_version[v]
        lineage = c.lineage
        entries.append(
            LogEntry(
                version=v,
                operation=lineage.operation if lineage else None,
                parent=lineage.parent if lineage else None,
                parameters=dict(lineage.parameters) if lineage else {},
                created=(lineage.created if lineage and lineage.created else None) or c.created,
                status=c.status,
                aliases=tuple(on_version.get(v, ())),
                rows=c.total_rows,
                format=c.format,
                location=c.location,
                tool=lineage.tool if lineage and lineage.tool else None,
                depth=depth,
                children=tuple(sorted(children[v], reverse=True)),
            )
        )
        for child in sorted(children[v], reverse=True):
            visit(child, depth + 1)

    for root in sorted(roots, reverse=True):
        visit(root, 0)
    return LineageLog(name=name, entries=tuple(entries), aliases=aliases)


# ----------------------------------------------------------------------------------------------- audit


@dataclass(frozen=True, kw_only=True)
class AuditLog:
    """Every unmasking of a dataset's classified fields, oldest first."""

    name: str
    records: tuple[AuditRecord, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "records": [r.to_dict() for r in self.records]}


def audit(
    name: str, *, registry: str | Registry | None = None, storage_options: Mapping[str, Any] | None = None
) -> AuditLog:
    """The audit log of dataset ``name``: who unmasked which fields of which version, when, how and why."""
    reg = open_registry(registry, storage_options)
    dataset = name.split("@", 1)[0]
    return AuditLog(name=dataset, records=reg.audit(dataset))
