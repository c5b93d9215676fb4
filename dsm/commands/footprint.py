"""``dsm footprint``: what datasets occupy on storage, what of it is shared, copied or unused, and its cost.

Every version's shards are located canonically (:func:`dsm.canonical.canonical_location`) and every
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
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import yaml

from dsm.canonical import canonical_location
from dsm.commands._common import open_registry
from dsm.contract import Contract
from dsm.cutover.prices import PriceTable, load_prices
from dsm.cutover.state import parse_time
from dsm.engine import map_units
from dsm.errors import ContractError, DatasetNotFound, DsmError, InputError
from dsm.readiness import StoredFile, probe_for
from dsm.registry import Registry, parse_reference
from dsm.storage import Location, location, redact

__all__ = [
    "ClassFootprint",
    "CutoverFootprint",
    "FootprintReport",
    "StorageClass",
    "StorageClassTable",
    "VersionFootprint",
    "footprint",
    "load_storage_classes",
]

STORAGE_CLASS_TABLE_VERSION = 1
_MONTH_SECONDS = 30 * 86400
_SAMPLE_ROWS = 2048


# ------------------------------------------------------------------------------------ storage classes


@dataclass(frozen=True, kw_only=True)
class StorageClass:
    """One storage class: the copies of each byte it keeps, and its price if it has its own."""

    name: str
    copies: float
    storage_per_gb_month: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"copies": self.copies}
        if self.storage_per_gb_month is not None:
            out["storage_per_gb_month"] = self.storage_per_gb_month
        return out


@dataclass(frozen=True, kw_only=True)
class StorageClassTable:
    """Storage classes by store (``s3``, ``az``, ``file``...), each store with its default class."""

    stores: Mapping[str, Mapping[str, StorageClass]]
    defaults: Mapping[str, str]
    aliases: Mapping[str, str]
    source: str = "built-in"

    def store_name(self, protocol: str) -> str:
        return self.aliases.get(protocol, protocol)

    def lookup(self, protocol: str, name: str | None) -> tuple[str, StorageClass, str | None]:
        """(class name, class, note): the class ``name`` of the store behind ``protocol`` (its default
        class when ``name`` is None). A store or class the table does not list counts one copy."""
        store = self.store_name(protocol)
        classes = self.stores.get(store)
        if classes is None:
            chosen = name or "default"
            return chosen, StorageClass(name=chosen, copies=1.0), f"{store} is not in {self.source}: 1 copy"
        chosen = name or self.defaults[store]
        found = classes.get(chosen)
        if found is None:
            return (
                chosen,
                StorageClass(name=chosen, copies=1.0),
                f"{store} class {chosen} is not in {self.source}",
            )
        return chosen, found, None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STORAGE_CLASS_TABLE_VERSION,
            "stores": {
                store: {
                    "default": self.defaults[store],
                    "classes": {n: c.to_dict() for n, c in classes.items()},
                }
                for store, classes in self.stores.items()
            },
            "aliases": dict(self.aliases),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str) -> StorageClassTable:
        """Validate a storage-class table; errors name ``source`` and the field."""
        if not isinstance(data, Mapping):
            raise ContractError(f"{source}: a storage-class table is a YAML mapping")
        if data.get("version", STORAGE_CLASS_TABLE_VERSION) != STORAGE_CLASS_TABLE_VERSION:
            raise ContractError(f"{source}: field version: this dsm reads storage-class tables of version 1")
        raw = data.get("stores")
        if not isinstance(raw, Mapping) or not raw:
            raise ContractError(f"{source}: field stores: a mapping of store name to its classes")
        stores: dict[str, dict[str, StorageClass]] = {}
        defaults: dict[str, str] = {}
        known = {f.name for f in fields(StorageClass)} - {"name"}
        for store, entry in raw.items():
            where = f"{source}: field stores.{store}"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("classes"), Mapping):
                raise ContractError(f"{where}: expected {{default: NAME, classes: {{NAME: {{copies: N}}}}}}")
            classes = {}
            for name, spec in entry["classes"].items():
                at = f"{where}.classes.{name}"
                if not isinstance(spec, Mapping):
                    raise ContractError(f"{at}: expected a mapping with copies")
                unknown = sorted(set(spec) - known)
                if unknown:
                    raise ContractError(f"{at}: unknown fields {unknown}; known: {', '.join(sorted(known))}")
                copies = spec.get("copies")
                if isinstance(copies, bool) or not isinstance(copies, (int, float)) or copies < 1:
                    raise ContractError(f"{at}.copies: expected a number at least 1, got {copies!r}")
                price = spec.get("storage_per_gb_month")
                if price is not None and (
                    isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0
                ):
                    raise ContractError(
                        f"{at}.storage_per_gb_month: expected a number at least 0, got {price!r}"
                    )
                classes[str(name)] = StorageClass(
                    name=str(name),
                    copies=float(copies),
                    storage_per_gb_month=None if price is None else float(price),
                )
            default = entry.get("default")
            if default not in classes:
                raise ContractError(
                    f"{where}.default: {default!r} is not one of its classes ({', '.join(classes)})"
                )
            stores[str(store)] = classes
            defaults[str(store)] = str(default)
        aliases = data.get("aliases") or {}
        if not isinstance(aliases, Mapping):
            raise ContractError(f"{source}: field aliases: a mapping of protocol to store name")
        return cls(
            stores=stores,
            defaults=defaults,
            aliases={str(k): str(v) for k, v in aliases.items()},
            source=source,
        )


def load_storage_classes(
    path: str | None = None, *, storage_options: Mapping[str, Any] | None = None
) -> StorageClassTable:
    """The storage-class table in ``path`` (YAML at any fsspec URL), or the one shipped with dsm."""
    if path is None:
        text = resources.files("dsm.commands").joinpath("storage_classes.yaml").read_text(encoding="utf-8")
        source = "built-in"
    else:
        parent, _, name = str(path).rstrip("/").rpartition("/")
        loc = location(parent or ".", storage_options)
        if not loc.exists(name):
            raise ContractError(f"storage-class table {redact(str(path))} does not exist")
        text = loc.read_bytes(name).decode("utf-8")
        source = redact(str(path))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ContractError(f"{source}: not valid YAML: {exc}") from None
    return StorageClassTable.from_dict(data, source=source)


# -------------------------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class VersionFootprint:
    """One version: what its contract lists, what of it is stored now, and how it shares it.

    ``bytes`` is what the contract lists; ``stored_bytes`` what of it is on storage now (``missing``
    files are not); ``shared_bytes`` the stored bytes of its files that another version lists too (same
    location); ``copy_bytes`` the stored bytes of its files whose content is also stored elsewhere;
    ``live`` whether readers reach it (an alias points at it, or it is its dataset's newest version that
    is not retired)."""

    ref: str
    name: str
    version: int
    status: str
    aliases: tuple[str, ...]
    live: bool
    format: str
    location: str
    shards: int
    rows: int | None
    logical_bytes: int | None
    logical_source: str | None
    bytes: int
    stored_bytes: int
    missing: int
    shared_bytes: int
    copy_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)
        }


@dataclass(frozen=True, kw_only=True)
class ClassFootprint:
    """The stored bytes in one store and storage class, the copies it keeps, and what it costs a month."""

    store: str
    storage_class: str
    files: int
    bytes: int
    copies: float
    raw_bytes: float
    price_per_gb_month: float
    price_source: str
    monthly_cost: float
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class CutoverFootprint:
    """An open cutover: the extra storage its target holds until it completes, and that cost until then.

    ``extra_source`` says where the figure comes from (the target version's stored files once copied,
    else the plan's estimate); ``months`` is the time left until complete (known after the switch, else
    the plan's remaining stage times plus the retain period)."""

    id: str
    dataset: str
    alias: str
    phase: str
    target: str | None
    extra_bytes: int
    extra_source: str
    complete_after: str | None
    months: float | None
    cost_until_complete: float | None
    delete_old: bool

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class FootprintReport:
    """The footprint of the datasets asked for (``datasets``): per version, per storage class, per open
    cutover, and the totals below. Bytes count each stored file once."""

    datasets: tuple[str, ...]
    versions: tuple[VersionFootprint, ...]
    classes: tuple[ClassFootprint, ...]
    cutovers: tuple[CutoverFootprint, ...]
    listed_bytes: int
    physical_bytes: int
    shared_bytes: int
    copy_bytes: int
    unreferenced_bytes: int
    unreferenced_retired_bytes: int
    unreferenced_unaliased_bytes: int
    missing_files: int
    currency: str
    prices: str
    storage_classes: str
    notes: tuple[str, ...] = ()

    @property
    def raw_bytes(self) -> float:
        return sum(c.raw_bytes for c in self.classes)

    @property
    def monthly_cost(self) -> float:
        return sum(c.monthly_cost for c in self.classes)

    @property
    def amplification(self) -> float:
        """Raw bytes per physical byte (1.0 when nothing is stored)."""
        return self.raw_bytes / self.physical_bytes if self.physical_bytes else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "datasets": list(self.datasets),
            "totals": {
                "listed_bytes": self.listed_bytes,
                "physical_bytes": self.physical_bytes,
                "raw_bytes": self.raw_bytes,
                "amplification": self.amplification,
                "shared_bytes": self.shared_bytes,
                "copy_bytes": self.copy_bytes,
                "unreferenced_bytes": self.unreferenced_bytes,
                "unreferenced_retired_bytes": self.unreferenced_retired_bytes,
                "unreferenced_unaliased_bytes": self.unreferenced_unaliased_bytes,
                "missing_files": self.missing_files,
                "monthly_cost": self.monthly_cost,
                "currency": self.currency,
            },
            "versions": [v.to_dict() for v in self.versions],
            "classes": [c.to_dict() for c in self.classes],
            "cutovers": [c.to_dict() for c in self.cutovers],
            "prices": self.prices,
            "storage_classes": self.storage_classes,
            "notes": list(self.notes),
        }

    def to_html(self) -> str:
        """A self-contained HTML page with the figures and their plots."""
        from dsm.commands._footprint_html import render_html

        return render_html(self)


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
    from dsm.reader import iter_shard
    from dsm.rewrite.execute import source_format

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
    known = reg.names()
    for name in names:
        parse_reference(name)
        if "@" in name:
            raise InputError(f"{name!r}: footprint takes dataset names; it covers every version of each")
        if name not in known:
            raise DatasetNotFound(f"no dataset named {name!r} in registry {redact(reg.url)}")
    selected = list(names) or known
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
        location(parent or ".", storage_options).write_bytes_atomic(base, report.to_html().encode("utf-8"))
    return report
