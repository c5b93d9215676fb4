"""``dsm footprint``: what datasets occupy on storage, what of it is shared, copied or unused, and its cost.

Every version's shards are located canonically (:func:`dsm.storage.canonical_location`) and every
location is listed once, from the store, so the figures are what is stored now, not what contracts once
said. Per version: rows and logical bytes (uncompressed: Parquet footers; the file itself for an Arrow IPC
file; else estimated from decoded rows) against physical bytes. Across versions:

- **shared** bytes: one stored file that several versions list (same canonical location): stored once;
- **copy** bytes: the same content (size and checksum) stored at more than one location: the extra copies
  are what deduplication would save;
- **unreferenced** bytes: files that only retired versions, or versions no alias points at and that are not
  their dataset's newest version, list: what ``dsm retire`` and ``dsm gc`` can free;
- per store and storage class: physical bytes, the copies the store keeps of each byte (the storage-class
  table, ``storage_classes.yaml``, replaceable with ``storage_classes=FILE``), the raw bytes that makes,
  and the monthly cost (the class's price where the table gives one, else the price table's store price);
- per open cutover: the extra storage it holds until it completes, and what that costs until then.

>>> report = footprint(["web-text"], registry="s3://registry/")  # doctest: +SKIP
>>> report.unreferenced_bytes, report.monthly_cost  # doctest: +SKIP
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsm.commands.cutover.prices import PriceTable, load_prices
from dsm.commands.cutover.state import parse_time
from dsm.commands.footprint.classes import StorageClass, StorageClassTable, load_storage_classes
from dsm.commands.footprint.html import render_html
from dsm.commands.footprint.report import ClassFootprint, CutoverFootprint, FootprintReport, VersionFootprint
from dsm.contract import Contract
from dsm.engine import map_units
from dsm.errors import DsmError
from dsm.registry import Registry, open_registry
from dsm.storage import Location, canonical_location, location, redact
from dsm.storage.readiness import StoredFile, probe_for

__all__ = [
    "ClassFootprint",
    "CutoverFootprint",
    "FootprintReport",
    "StorageClass",
    "StorageClassTable",
    "VersionFootprint",
    "footprint",
    "load_storage_classes",
    "render_html",
]

_MONTH_SECONDS = 30 * 86400
_SAMPLE_ROWS = 2048


# ------------------------------------------------------------------------------------------ computing


@dataclass(kw_only=True)
class _File:
    """One stored file, by canonical location, and the versions that list it."""

    canonical: str
    store: str
    listed_by: list[tuple[str, int]] = field(default_factory=list)
    size: int | None = None  # None: not on storage
    checksum: str | None = None
    stored: StoredFile | None = None


def _live_versions(
    reg: Registry, name: str, versions: Sequence[int], statuses: Mapping[int, Any]
) -> set[int]:
    live = set(reg.aliases(name).values())
    newest = [v for v in versions if (statuses.get(v) is None or statuses[v].status != "retired")]
    if newest:
        live.add(newest[-1])
    return live


def _logical(
    contract: Contract, loc: Location, inventory: Mapping[str, StoredFile]
) -> tuple[int | None, str | None]:
    """Uncompressed bytes of a version, and where the figure comes from."""
    present = [s for s in contract.shards if s.path in inventory]
    if not present:
        return None, None
    if contract.format == "parquet":
        import pyarrow.parquet as pq

        def uncompressed(path: str) -> int:
            with loc.open(path) as handle:
                meta = pq.ParquetFile(handle).metadata
                return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))

        sizes = map_units(uncompressed, [s.path for s in present], workers=loc.io_workers)
        if len(present) < len(contract.shards):
            return None, "parquet metadata (some shards are missing)"
        return sum(sizes), "parquet metadata"
    if contract.format == "arrow" and not contract.format_options.get("compression"):
        return contract.total_bytes, "Arrow IPC file bytes (uncompressed)"
    rows = contract.total_rows
    if not rows:
        return (0, "no rows") if rows == 0 else (None, None)
    from dsm.rewrite.execute import source_format
    from dsm.shards import iter_shard

    first = present[0]
    for batch in iter_shard(
        loc, first.path, source_format(contract), schema=contract.schema.to_arrow(), batch_rows=_SAMPLE_ROWS
    ):
        if batch.num_rows:
            per_row = batch.nbytes / batch.num_rows
            return int(per_row * rows), f"Arrow bytes estimated from {batch.num_rows} decoded rows"
    return None, None


def _cutover_footprints(
    reg: Registry,
    names: Sequence[str],
    files: Mapping[str, _File],
    by_version: Mapping[tuple[str, int], list[str]],
    prices: PriceTable,
    storage_options: Mapping[str, Any] | None,
    now: datetime,
) -> list[CutoverFootprint]:
    from dsm.commands.cutover import list_cutovers

    out = []
    for name in names:
        for report in list_cutovers(name=name, registry=reg, storage_options=storage_options):
            state = report.state
            if state.terminal:
                continue
            plan = state.stage("plan").evidence
            estimate = plan.get("estimate") or {}
            key = (name, state.target_version) if state.target_version is not None else None
            if key is not None and key in by_version:
                extra = sum(files[c].size or 0 for c in by_version[key])
                source = f"{name}@{state.target_version} stored"
            else:
                extra = int((estimate.get("storage") or {}).get("peak_extra_bytes") or 0)
                source = "the plan's estimate" if estimate else "nothing copied or planned yet"
            if state.complete_after is not None:
                seconds = max(0.0, (parse_time(state.complete_after) - now).total_seconds())
            elif estimate:
                done = {s.name for s in state.stages if s.status == "done"}
                left = sum(v for k, v in (estimate.get("seconds") or {}).items() if k not in done)
                seconds = left + float(state.spec.get("retain_seconds") or 0)
            else:
                seconds = None
            destination = str(state.spec.get("destination", ""))
            protocol = location(destination, storage_options).protocol if destination else "file"
            price = prices.store(protocol).storage_per_gb_month
            months = seconds / _MONTH_SECONDS if seconds is not None else None
            out.append(
                CutoverFootprint(
                    id=state.id,
                    dataset=name,
                    alias=state.alias,
                    phase=state.phase,
                    target=f"{name}@{state.target_version}" if state.target_version is not None else None,
                    extra_bytes=extra,
                    extra_source=source,
                    complete_after=state.complete_after,
                    months=months,
                    cost_until_complete=extra / prices.gb * price * months if months is not None else None,
                    delete_old=bool(state.spec.get("delete_old")),
                )
            )
    return out


def footprint(
    names: Sequence[str] = (),
    *,
    prices: str | None = None,
    storage_classes: str | None = None,
    output: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> FootprintReport:
    """The storage footprint of the datasets ``names`` (default: every dataset in the registry).

    ``prices`` is a price table (``dsm cutover plan --prices``; default the shipped one),
    ``storage_classes`` a storage-class table (default the shipped one); ``output`` also writes the
    report as an HTML page with plots. Every location is listed once; nothing is written but ``output``.

    >>> footprint(["web-text"], output="footprint.html").physical_bytes  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    table = load_prices(prices, storage_options=storage_options)
    classes_table = load_storage_classes(storage_classes, storage_options=storage_options)
    selected = reg.select(names, command="footprint")
    known = reg.names()
    now = datetime.now(UTC)
    locations: dict[str, Location] = {}
    inventories: dict[str, dict[str, StoredFile]] = {}

    def loc_of(url: str) -> Location:
        if url not in locations:
            locations[url] = location(url, storage_options)
        return locations[url]

    files: dict[str, _File] = {}
    contracts: dict[tuple[str, int], Contract] = {}
    live: dict[tuple[str, int], bool] = {}
    by_version: dict[tuple[str, int], list[str]] = {}
    for name in known:  # every dataset: a file another dataset's live version lists is referenced
        versions = reg.versions(name)
        statuses = reg.statuses(name)
        alive = _live_versions(reg, name, versions, statuses)
        for version in versions:
            contract = reg.get(name, version)
            key = (name, version)
            contracts[key] = contract
            live[key] = version in alive
            loc = loc_of(contract.location)
            canon: list[str] = []
            for shard in contract.shards:
                c = canonical_location(loc, shard.path)
                entry = files.setdefault(c, _File(canonical=c, store=classes_table.store_name(loc.protocol)))
                entry.listed_by.append(key)
                entry.checksum = entry.checksum or shard.checksum
                canon.append(c)
            by_version[key] = canon
    # What is stored now: one listing per location of the selected datasets.
    chosen = [k for k in contracts if k[0] in selected]
    for key in chosen:
        url = contracts[key].location
        if url not in inventories:
            inventories[url] = probe_for(loc_of(url)).inventory(loc_of(url))
        loc = loc_of(url)
        for shard in contracts[key].shards:
            listed = inventories[url].get(posixpath.normpath(shard.path))
            entry = files[canonical_location(loc, shard.path)]
            if listed is not None:
                entry.size, entry.stored = listed.size, listed
    mine = {c for key in chosen for c in by_version[key]}
    present = [files[c] for c in sorted(mine) if files[c].size is not None]
    # Content stored at several locations: same size and checksum.
    content: dict[tuple[int, str], list[_File]] = {}
    for f in present:
        if f.checksum:
            content.setdefault((f.size or 0, f.checksum), []).append(f)
    copies_of = {f.canonical for group in content.values() if len(group) > 1 for f in group}
    copy_bytes = sum((len(g) - 1) * (g[0].size or 0) for g in content.values() if len(g) > 1)
    shared = [f for f in present if len(set(f.listed_by)) > 1]
    unreferenced = [f for f in present if not any(live[k] for k in f.listed_by)]
    retired_only = [f for f in unreferenced if all(contracts[k].status == "retired" for k in f.listed_by)]

    versions_out = []
    for key in sorted(chosen):
        contract = contracts[key]
        loc = loc_of(contract.location)
        mine_files = [files[c] for c in by_version[key]]
        stored = [f for f in mine_files if f.size is not None]
        logical, source = _logical(contract, loc, inventories[contract.location])
        aliases = tuple(sorted(a for a, v in reg.aliases(key[0]).items() if v == key[1]))
        versions_out.append(
            VersionFootprint(
                ref=contract.ref,
                name=key[0],
                version=key[1],
                status=contract.status,
                aliases=aliases,
                live=live[key],
                format=contract.format,
                location=redact(contract.location),
                shards=len(contract.shards),
                rows=contract.total_rows,
                logical_bytes=logical,
                logical_source=source,
                bytes=contract.total_bytes,
                stored_bytes=sum(f.size or 0 for f in stored),
                missing=len(mine_files) - len(stored),
                shared_bytes=sum(f.size or 0 for f in stored if len(set(f.listed_by)) > 1),
                copy_bytes=sum(f.size or 0 for f in stored if f.canonical in copies_of),
            )
        )
    # Per store and storage class.
    groups: dict[tuple[str, str], list[_File]] = {}
    notes: list[str] = []
    looked_up: dict[tuple[str, str], tuple[StorageClass, str | None]] = {}
    for f in present:
        name, cls, note = classes_table.lookup(f.store, f.stored.storage_class if f.stored else None)
        looked_up[(f.store, name)] = (cls, note)
        groups.setdefault((f.store, name), []).append(f)
    classes_out = []
    for (store, name), members in sorted(groups.items()):
        cls, note = looked_up[(store, name)]
        nbytes = sum(f.size or 0 for f in members)
        if cls.storage_per_gb_month is not None:
            price, price_source = cls.storage_per_gb_month, f"storage classes ({classes_table.source})"
        else:
            price, price_source = (
                table.store(store).storage_per_gb_month,
                f"price table {table.store_name(store)}",
            )
        if note:
            notes.append(note)
        classes_out.append(
            ClassFootprint(
                store=store,
                storage_class=name,
                files=len(members),
                bytes=nbytes,
                copies=cls.copies,
                raw_bytes=nbytes * cls.copies,
                price_per_gb_month=price,
                price_source=price_source,
                monthly_cost=nbytes / table.gb * price,
                note=note,
            )
        )
    missing = sum(1 for c in mine if files[c].size is None)
    if missing:
        notes.append(f"{missing} file(s) listed by these versions are not on storage (deleted, or moved)")
    try:
        cutovers = _cutover_footprints(reg, selected, files, by_version, table, storage_options, now)
    except (DsmError, OSError) as exc:
        cutovers = []
        notes.append(f"open cutovers could not be read: {redact(str(exc))}")
    report = FootprintReport(
        datasets=tuple(selected),
        versions=tuple(versions_out),
        classes=tuple(classes_out),
        cutovers=tuple(cutovers),
        listed_bytes=sum(contracts[k].total_bytes for k in chosen),
        physical_bytes=sum(f.size or 0 for f in present),
        shared_bytes=sum(f.size or 0 for f in shared),
        copy_bytes=copy_bytes,
        unreferenced_bytes=sum(f.size or 0 for f in unreferenced),
        unreferenced_retired_bytes=sum(f.size or 0 for f in retired_only),
        unreferenced_unaliased_bytes=sum(f.size or 0 for f in unreferenced)
        - sum(f.size or 0 for f in retired_only),
        missing_files=missing,
        currency=table.currency,
        prices=table.source,
        storage_classes=classes_table.source,
        notes=tuple(dict.fromkeys(notes)),
    )
    if output is not None:
        parent, _, base = str(output).rstrip("/").rpartition("/")
        location(parent or ".", storage_options).write_bytes_atomic(base, render_html(report).encode("utf-8"))
    return report
