"""``dsm convert-format`` and ``dsm reshard``: rewrite a dataset without changing one row.

Both run one engine (:mod:`dsm.rewrite`): check the target format can hold the schema, plan the output
files from the source contract, check the source shards' checksums, write every output file under a
temporary name (renamed when complete) while hashing its bytes as they are written and digesting the rows
handed to the writer (``proof: written-batches``; with ``read_back=True`` each file is instead re-read as a
reader will, exactly as ``dsm register`` does: ``proof: read-back``), compare the dataset's fingerprint with
the source's, and only then publish the new contract: the commit point. A killed run resumes from its
journal at the destination; the result is byte-identical to an uninterrupted run, whatever ``workers`` is.

>>> result = reshard("web-text@3", "s3://bucket/web-text/v4/", num_shards=64)  # doctest: +SKIP
>>> result.dataset, result.fingerprint_match  # doctest: +SKIP
('web-text@4', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dsm.commands._common import now_utc, open_registry, provenance, tool_name
from dsm.contract import Contract, Lineage, Shard
from dsm.engine import NullProgress, Progress, map_units
from dsm.errors import CheckFailed, DatasetNotFound, InputError, SchemaError
from dsm.fingerprint import ALGORITHM
from dsm.formats import Format, get_format
from dsm.registry import Registry, parse_reference
from dsm.rewrite.execute import (
    RewriteContext,
    bucket_pieces,
    copy_unit,
    digest_of,
    gather_unit,
    iter_range,
    scatter_unit,
    source_format,
)
from dsm.rewrite.journal import Journal, is_journal_path, remove_temporaries
from dsm.rewrite.permutation import SHUFFLE_ALGORITHM, Permutation
from dsm.rewrite.plan import RewritePlan, SourceRange, check_layout, parse_size, plan_rewrite, row_group_rows
from dsm.shards import DescribedShard, contract_location, dataset_fingerprint
from dsm.storage import Location, location, redact
from dsm.validators import check_physical

__all__ = [
    "PROOF_READ_BACK",
    "PROOF_WRITTEN",
    "RewriteResult",
    "convert_format",
    "estimate_rows_per_shard",
    "locations_overlap",
    "reshard",
    "target_format",
    "write_options",
]

PROOF_WRITTEN = "written-batches"
"""Default proof: a file's checksum from its bytes as written, its rows' digest from the batches written."""
PROOF_READ_BACK = "read-back"
"""``read_back=True``: each written file is read again as a reader will and its checksum and rows taken."""

_SAMPLE_SHARDS = 4
_SAMPLE_BYTES_PER_SHARD = 4 << 20


@dataclass(frozen=True, kw_only=True)
class RewriteResult:
    """A published rewrite: the new version, its source, and the proof that the rows are the same."""

    dataset: str
    source: str
    operation: str
    location: str
    contract: Contract
    fingerprint_match: bool
    parameters: Mapping[str, Any]
    units_written: int
    units_resumed: int
    already_published: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    provenance: Mapping[str, str] = field(default_factory=dict)

    @property
    def shards(self) -> int:
        return len(self.contract.shards)

    @property
    def rows(self) -> int:
        return self.contract.total_rows or 0

    @property
    def bytes(self) -> int:
        return self.contract.total_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "contract": self.contract.to_dict(),
            "source": self.source,
            "fingerprint_match": self.fingerprint_match,
            "operation": self.operation,
            "location": self.location,
            "parameters": dict(self.parameters),
            "shards": self.shards,
            "rows": self.rows,
            "bytes": self.bytes,
            "units_written": self.units_written,
            "units_resumed": self.units_resumed,
            "already_published": self.already_published,
            "notes": list(self.notes),
            "provenance": dict(self.provenance),
        }


def write_options(
    compression: str | None,
    compression_level: int | None,
    row_group_size: int | None,
    format_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The writer options the CLI flags and ``--format-option`` pairs give together; a key given twice
    with different values is refused."""
    options = dict(format_options or {})
    for key, value in (
        ("compression", compression),
        ("compression_level", compression_level),
        ("row_group_size", row_group_size),
    ):
        if value is not None:
            if key in options and options[key] != value:
                raise InputError(
                    f"{key} is given twice with different values ({options[key]!r} and {value!r})"
                )
            options[key] = value
    return options


def target_format(source: Contract, to: str, options: Mapping[str, Any]) -> Format:
    """The writer's format: the source's options when the format stays, overlaid with the given ones.

    A format with row groups gets groups of about ``ROW_GROUP_BYTES`` decoded bytes unless the row group
    size is given (its own default of 131,072 rows would buffer ~400 MB of 3 KB text rows per writer).
    """
    base = dict(source.format_options) if to == source.format else {}
    chosen = {**base, **options}
    fmt = get_format(to, **chosen)
    default = fmt.options().get("row_group_size")
    if "row_group_size" not in chosen and isinstance(default, int):
        fmt = get_format(to, **chosen, row_group_size=row_group_rows(source, default))
    return fmt


def locations_overlap(a: Location, b: Location) -> bool:
    """Whether one location contains the other (a rewrite must never write into its own source)."""
    if a.protocol != b.protocol:
        return False
    x, y = a.root.rstrip("/") + "/", b.root.rstrip("/") + "/"
    return x.startswith(y) or y.startswith(x)


class _CountingSink:
    """A write-only file that only counts bytes (to measure a sample's encoded size)."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self.size += n
        return n

    def flush(self) -> None:
        pass


def estimate_rows_per_shard(
    source: Contract, loc: Location, src_fmt: Format, out_fmt: Format, schema: pa.Schema, target: int
) -> int:
    """Rows per output file so that files come out near ``target`` bytes in the target format.

    The estimate encodes a deterministic sample (the first ~4 MiB of rows of up to 4 shards spread over the
    dataset) with the target format and options, so it depends only on the source and the parameters.
    """
    shards = [s for s in source.shards if s.rows]
    if not shards:
        return 1
    picks = sorted({k * (len(shards) - 1) // max(1, _SAMPLE_SHARDS - 1) for k in range(_SAMPLE_SHARDS)})
    sink = _CountingSink()
    sampled = 0
    writer = out_fmt.open_writer(sink, schema)  # type: ignore[arg-type]
    for pick in picks:
        shard = shards[pick]
        rows = shard.rows or 0
        take = max(1, min(rows, _SAMPLE_BYTES_PER_SHARD * rows // max(1, shard.bytes)))
        rng = SourceRange(shard=shard.path, start=0, stop=take, whole=take == rows)
        for batch in iter_range(loc, src_fmt, schema, rng, 4096):
            writer.write_batch(batch)
            sampled += batch.num_rows
    writer.close()
    per_row = sink.size / max(1, sampled)
    return max(1, int(target // max(per_row, 1e-9)))


def _check_sources(source: Contract, loc: Location, workers: int | None, progress: Progress) -> list[str]:
    """Check every source shard's size and checksum before anything is written; CheckFailed names the
    shards that fail. Returns notes (shards that could not be verified)."""

    def unit(shard: Shard) -> Any:
        try:
            size: int | None = loc.size(shard.path)
        except DatasetNotFound:
            size = None
        return check_physical(loc, shard, actual_size=size, on_bytes=progress.advance)

    checks = map_units(unit, source.shards, workers=workers)
    bad = [c for c in checks if c.status not in ("ok", "unverified")]
    if bad:
        shown = "; ".join(f"shard {c.path}: {c.status}: {c.detail}" for c in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise CheckFailed(f"source {source.ref} failed its checks, nothing was written: {shown}{more}")
    return [f"source shard {c.path} was not verified: {c.detail}" for c in checks if c.status == "unverified"]


def _prepare_destination(
    dest: Location, plan: RewritePlan, overwrite: bool
) -> tuple[dict[str, Any] | None, list[str]]:
    """Refuse a destination that holds something else (unless ``overwrite``); clear a previous rewrite's
    files when overwriting it. Returns the journal header of this same plan (to resume) and notes."""
    header = Journal.read_header(dest)
    files = [f.path for f in dest.list_files()]
    planned = set(plan.paths)
    notes: list[str] = []
    same_plan = header is not None and header.get("plan") == plan.key
    if header is not None and not same_plan:
        what = f"the output of another rewrite ({header.get('operation')} of {header.get('source')})"
        if header.get("published"):
            raise InputError(
                f"{redact(dest.url)} holds {header['published']}, a published dataset version ({what}); "
                "it is never overwritten: choose another destination"
            )
        if not overwrite:
            raise InputError(
                f"{redact(dest.url)} holds {what}; pass --overwrite to replace it, "
                "or choose another destination"
            )
        previous = set(header.get("outputs") or [])
        for path in files:
            if path in previous:
                dest.remove(path)
        Journal(dest, str(header.get("plan"))).clear_units()
        files = [f.path for f in dest.list_files()]
        header = None
        notes.append("the files of an unfinished previous rewrite at the destination were replaced")
    mine = planned if same_plan else set()
    foreign = sorted(p for p in files if not is_journal_path(p) and p not in mine)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else "")
        if not overwrite:
            raise InputError(
                f"{redact(dest.url)} is not empty: it holds files dsm did not write ({shown}); choose an "
                "empty destination, or pass --overwrite to write beside them (they are never deleted)"
            )
        clobbered = sorted(set(foreign) & planned)
        notes.append(
            f"{len(foreign)} file(s) dsm did not write are at the destination and were kept: {shown}"
        )
        if clobbered:
            notes.append(f"{len(clobbered)} of them had an output's name and were overwritten")
    return (header if same_plan else None), notes


def _published_already(reg: Registry, name: str, plan: RewritePlan, dest_url: str) -> Contract | None:
    """The version this plan already published (a run killed after publishing), if there is one."""
    versions = reg.versions(name)
    if not versions:
        return None
    latest = reg.get(name, versions[-1])
    if latest.metadata.get("rewrite_plan") == plan.key and latest.location == dest_url:
        return latest
    return None


def _rewrite(
    ref: str | Contract,
    dest: str,
    *,
    operation: str,
    to: str | None,
    options: Mapping[str, Any],
    parameters: dict[str, Any],
    num_shards: int | None,
    shard_size: int | str | None,
    rows_per_shard: int | None,
    shuffle: bool,
    seed: int | None,
    name: str | None,
    workers: int | None,
    overwrite: bool,
    read_back: bool,
    registry: str | Registry | None,
    storage_options: Mapping[str, Any] | None,
    progress: Progress | None,
) -> RewriteResult:
    reg = open_registry(registry, storage_options)
    source = reg.resolve(ref)
    target_name = name or source.name
    if "@" in target_name:
        raise InputError(f"--name {target_name!r} is a name, without a version or alias")
    parse_reference(target_name)
    to = to or source.format
    parameters["to"] = to
    src_fmt = source_format(source)
    out_fmt = target_format(source, to, options)
    schema = source.schema.to_arrow()
    problems = out_fmt.unsupported(schema)
    if problems:
        raise SchemaError(
            f"format {to} cannot hold the schema of {source.ref}: {'; '.join(problems)}; nothing was written"
        )
    expected = source.fingerprint
    if expected is None or expected.algorithm != ALGORITHM:
        raise InputError(
            f"{source.ref} has no {ALGORITHM} row fingerprint to prove the rewrite against; re-register it"
        )
    src_loc = location(source.location, storage_options)
    dest_loc = location(dest, storage_options)
    if locations_overlap(src_loc, dest_loc):
        raise InputError(
            f"destination {redact(dest)} overlaps the location of {source.ref} ({redact(source.location)}); "
            "write to a folder of its own"
        )
    if shard_size is not None:
        target = parse_size(shard_size, what="--shard-size")
        rows_per_shard = estimate_rows_per_shard(source, src_loc, src_fmt, out_fmt, schema, target)
        parameters["planned_rows_per_shard"] = rows_per_shard
    parameters["format_options"] = out_fmt.options()
    plan = plan_rewrite(
        source,
        out_fmt,
        operation=operation,
        parameters=parameters,
        num_shards=num_shards,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        splittable_source=type(src_fmt).fragment_count is not Format.fragment_count,
    )
    # How the output was proven; recorded in the lineage, not in the plan (it changes no output byte).
    parameters["proof"] = PROOF_READ_BACK if read_back else PROOF_WRITTEN
    header, notes = _prepare_destination(dest_loc, plan, overwrite)
    dest_url = contract_location(dest_loc)
    if header is not None and header.get("published"):
        try:
            done = reg.resolve(str(header["published"]))
        except DatasetNotFound:
            done = None
        if done is not None and done.metadata.get("rewrite_plan") == plan.key:
            return _result(done, source, operation, parameters, 0, len(plan.units), True, notes)

    progress = progress or NullProgress()
    progress.start(
        total_bytes=source.total_bytes * (3 if shuffle else 2),
        total_units=len(plan.units),
        description=f"{operation} {source.ref}",
    )
    try:
        notes += _check_sources(source, src_loc, workers, progress)
        journal = Journal(dest_loc, plan.key)
        journal.write_header(
            {"operation": operation, "source": source.ref, "outputs": plan.paths, "published": None}
        )
        remove_temporaries(dest_loc, set(plan.paths))
        ctx = RewriteContext(
            source=source,
            source_loc=src_loc,
            source_fmt=src_fmt,
            dest=dest_loc,
            out_fmt=out_fmt,
            schema=schema,
            plan=plan,
            journal=journal,
            progress=progress,
            read_back=read_back,
        )
        results, resumed = _run(ctx, workers, resume=header is not None)
    finally:
        progress.finish()

    total = dataset_fingerprint(r.digest for r in results)
    match = total.rows == expected.rows and total.unordered == expected.unordered
    if not shuffle:
        match = match and total.ordered == expected.ordered
    if not match:
        raise CheckFailed(
            f"the rows written to {redact(dest)} do not match {source.ref}: fingerprint "
            f"{total.unordered[:16]}../{total.ordered[:16]}.. ({total.rows} rows), expected "
            f"{expected.unordered[:16]}../{expected.ordered[:16]}.. ({expected.rows} rows); "
            "nothing was registered"
        )
    published = _published_already(reg, target_name, plan, dest_url)
    if published is None:
        contract = Contract(
            name=target_name,
            description=source.description,
            owners=source.owners,
            location=dest_url,
            format=out_fmt.name,
            format_options=out_fmt.options(),
            schema=source.schema,
            shards=tuple(r.shard for r in results),
            fingerprint=total,
            lineage=Lineage(
                parent=source.ref,
                operation=operation,
                parameters=parameters,
                tool=tool_name(),
                created=now_utc(),
            ),
            metadata={"rewrite_plan": plan.key},
        )
        published = reg.publish(contract)
    journal.write_header(
        {"operation": operation, "source": source.ref, "outputs": plan.paths, "published": published.ref}
    )
    journal.clear_units()
    written = len(plan.units) - resumed
    return _result(published, source, operation, parameters, written, resumed, False, notes)


def _result(
    contract: Contract,
    source: Contract,
    operation: str,
    parameters: Mapping[str, Any],
    written: int,
    resumed: int,
    already: bool,
    notes: list[str],
) -> RewriteResult:
    if already:
        notes = [*notes, f"{contract.ref} was already published by this same rewrite; nothing was rewritten"]
    return RewriteResult(
        dataset=contract.ref,
        source=source.ref,
        operation=operation,
        location=contract.location,
        contract=contract,
        fingerprint_match=True,
        parameters=dict(parameters),
        units_written=written,
        units_resumed=resumed,
        already_published=already,
        notes=tuple(notes),
        provenance=provenance(rows_hashed=True),
    )


def _kept(
    ctx: RewriteContext,
    kind: str,
    records: Mapping[int, dict[str, Any]],
    paths: Mapping[int, str],
    workers: int | None,
) -> dict[int, dict[str, Any]]:
    """The journaled units whose file is still there with the recorded size and checksum."""
    candidates = [(i, r) for i, r in sorted(records.items()) if i in paths and r.get("path") == paths[i]]

    def still_good(item: tuple[int, dict[str, Any]]) -> bool:
        _, record = item
        shard = Shard(path=record["path"], bytes=int(record["bytes"]), checksum=record.get("checksum"))
        try:
            size: int | None = ctx.dest.size(shard.path)
        except DatasetNotFound:
            size = None
        return check_physical(ctx.dest, shard, actual_size=size).status == "ok"

    good = map_units(still_good, candidates, workers=workers)
    return {i: r for (i, r), ok in zip(candidates, good, strict=True) if ok}


def _run(ctx: RewriteContext, workers: int | None, *, resume: bool) -> tuple[list[DescribedShard], int]:
    plan, journal = ctx.plan, ctx.journal
    if not resume:
        journal.clear_units()
    unit_paths = {u.index: u.path for u in plan.units}
    kept_records = _kept(ctx, "unit", journal.records("unit"), unit_paths, workers) if resume else {}
    kept: dict[int, DescribedShard] = {}
    for index, record in kept_records.items():
        shard = Shard.from_dict(
            {
                k: record[k]
                for k in ("path", "bytes", "rows", "checksum", "fingerprint", "ordered_fingerprint")
            }
        )
        kept[index] = DescribedShard(shard=shard, digest=digest_of(shard))
    todo = [u for u in plan.units if u.index not in kept]
    if todo and plan.shuffle:
        spill_paths = {s.index: journal.data_path("scatter", s.index, ".arrow") for s in plan.scatter}
        spilled = _kept(ctx, "scatter", journal.records("scatter"), spill_paths, workers) if resume else {}
        missing = [s for s in plan.scatter if s.index not in spilled]
        permutation = Permutation(plan.total_rows, plan.seed or 0)
        records = map_units(lambda s: scatter_unit(ctx, s, permutation), missing, workers=workers)
        spilled.update({s.index: r for s, r in zip(missing, records, strict=True)})
        ctx.bucket_pieces = bucket_pieces(spilled)
        ctx.spill_paths = spill_paths
        done = map_units(lambda u: gather_unit(ctx, u), todo, workers=workers)
    else:
        done = map_units(lambda u: copy_unit(ctx, u), todo, workers=workers)
    for unit, found in zip(todo, done, strict=True):
        kept[unit.index] = found
    return [kept[u.index] for u in plan.units], len(plan.units) - len(todo)


def convert_format(
    ref: str | Contract,
    dest: str,
    *,
    to: str,
    compression: str | None = None,
    compression_level: int | None = None,
    row_group_size: int | None = None,
    format_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    read_back: bool = False,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> RewriteResult:
    """Rewrite dataset ``ref`` in format ``to`` at ``dest``, one output file per source shard, and publish
    it as the next version of its name (or ``name``); return the result with the new contract.

    Refuses (SchemaError, nothing written) when ``to`` cannot hold the schema; raises CheckFailed, and
    registers nothing, when a source shard fails its checksum or the rows written differ from the source's
    (``fingerprint.unordered`` and ``ordered`` must both match). The proof digests the batches handed to
    the writer and hashes the bytes as written; ``read_back=True`` re-reads every written file instead,
    which also catches a writer that changes a value (slower). Running it again after a crash resumes.

    >>> convert_format("logs@2", "data/logs-parquet/", to="parquet", compression="zstd")  # doctest: +SKIP
    """
    options = write_options(compression, compression_level, row_group_size, format_options)
    parameters: dict[str, Any] = {"to": to}
    return _rewrite(
        ref,
        dest,
        operation="convert-format",
        to=to,
        options=options,
        parameters=parameters,
        num_shards=None,
        shard_size=None,
        rows_per_shard=None,
        shuffle=False,
        seed=None,
        name=name,
        workers=workers,
        overwrite=overwrite,
        read_back=read_back,
        registry=registry,
        storage_options=storage_options,
        progress=progress,
    )


def reshard(
    ref: str | Contract,
    dest: str,
    *,
    num_shards: int | None = None,
    shard_size: int | str | None = None,
    rows_per_shard: int | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    to: str | None = None,
    compression: str | None = None,
    compression_level: int | None = None,
    row_group_size: int | None = None,
    format_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    read_back: bool = False,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> RewriteResult:
    """Rewrite dataset ``ref`` at ``dest`` as ``num_shards`` files, files of about ``shard_size`` bytes
    (``"256MB"``), or files of ``rows_per_shard`` rows (exactly one of the three), and publish it.

    Without ``shuffle`` the files, read in order, hold the source's rows in the source's order. With
    ``shuffle`` the rows are permuted across all files by a permutation fixed by ``seed`` (default 0):
    the same seed always gives the same files. ``to`` also converts the format. Checks, proof
    (``read_back``) and resume are those of :func:`convert_format`; the unordered fingerprint must match,
    and the ordered one unless shuffled.

    >>> reshard("web-text@3", "data/web-text-64/", num_shards=64, shuffle=True, seed=7)  # doctest: +SKIP
    """
    chosen = check_layout(
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
    )
    if shuffle and seed is None:
        seed = 0
    options = write_options(compression, compression_level, row_group_size, format_options)
    parameters: dict[str, Any] = {
        chosen: {"num_shards": num_shards, "shard_size": shard_size, "rows_per_shard": rows_per_shard}[chosen]
    }
    parameters["shuffle"] = shuffle
    if shuffle:
        parameters["seed"] = seed
        parameters["shuffle_algorithm"] = SHUFFLE_ALGORITHM
    return _rewrite(
        ref,
        dest,
        operation="reshard",
        to=to,
        options=options,
        parameters=parameters,
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        name=name,
        workers=workers,
        overwrite=overwrite,
        read_back=read_back,
        registry=registry,
        storage_options=storage_options,
        progress=progress,
    )
