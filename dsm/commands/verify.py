"""``dsm verify``: prove that the data at a contract's location is what the contract says."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from dsm._version import tool_name
from dsm.contract import Contract, Shard
from dsm.engine import (
    EngineReport,
    Executor,
    Mode,
    NullProgress,
    Progress,
    default_workers,
    map_units,
    open_executor,
    report_progress,
    rows_as_bytes,
)
from dsm.errors import InputError
from dsm.hashing import fingerprint_kernel
from dsm.hashing.rowdigest import RowDigest
from dsm.registry import Registry, resolve
from dsm.storage import FileInfo, Location, location
from dsm.storage.stores import RequestStats, request_stats
from dsm.units import parse_workers
from dsm.validators.physical import PhysicalCheck, check_physical

if TYPE_CHECKING:
    from dsm.shards import IgnoredFile
    from dsm.validators.rows import RowCheck

__all__ = ["STATUSES", "ShardReport", "VerifyReport", "verify"]

STATUSES = ("ok", "corrupt", "resized", "missing", "extra", "unreadable", "schema_mismatch", "unverified")


@dataclass(frozen=True, kw_only=True)
class ShardReport:
    """One shard's outcome; ``verified_by`` says what was compared (bytes, rows, or nothing).

    ``expected`` and ``actual`` are the whole values compared where a comparison was made: the checksum of
    the bytes (``xxh3-128:...``) or, when the rows did not match, the row fingerprint."""

    path: str
    status: str
    detail: str = ""
    verified_by: str = "bytes"
    expected: str | None = None
    actual: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "detail": self.detail,
            "verified_by": self.verified_by,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    """The outcome of a verify: ``ok`` only when every shard is ok and nothing is extra or unverified.

    Two different checks of the dataset fingerprint, named apart:

    - ``fingerprint_match``: the fingerprint recomputed from the rows of every shard equals the contract's
      (``--deep`` with every shard decoded); None when the rows were not all read.
    - ``contract_consistent``: the contract's own shard fingerprints add up to its dataset fingerprint; a
      check of the contract, not of the data (None when the contract has no complete fingerprints).
    """

    dataset: str
    location: str
    deep: bool
    shards: tuple[ShardReport, ...]
    fingerprint_match: bool | None = None
    contract_consistent: bool | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    ignored: tuple[IgnoredFile, ...] = ()
    """Files at the location that are not data (``_SUCCESS``, ``*.crc``, ``README.md``...), as register
    ignores them: listed, never a failure."""
    provenance: Mapping[str, str] = field(default_factory=dict)
    engine: EngineReport | None = None
    """Where the shards were read and checked."""

    @property
    def ok(self) -> bool:
        return (
            all(s.status == "ok" for s in self.shards)
            and self.fingerprint_match is not False
            and self.contract_consistent is not False
        )

    @property
    def summary(self) -> dict[str, int]:
        counts = Counter(s.status for s in self.shards)
        return {status: counts[status] for status in STATUSES if counts[status]}

    @property
    def failures(self) -> list[ShardReport]:
        return [s for s in self.shards if s.status != "ok"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "ok": self.ok,
            "deep": self.deep,
            "location": self.location,
            "fingerprint_match": self.fingerprint_match,
            "contract_consistent": self.contract_consistent,
            "shards": [s.to_dict() for s in self.shards],
            "summary": self.summary,
            "ignored": [f.to_dict() for f in self.ignored],
            "notes": list(self.notes),
            "provenance": dict(self.provenance),
            "engine": self.engine.to_dict() if self.engine is not None else None,
        }


def _bytes_report(shard: Shard, physical: PhysicalCheck) -> ShardReport:
    """A shard's outcome from the check of its bytes, with both checksums where they were compared."""
    return ShardReport(
        path=shard.path,
        status=physical.status,
        detail=physical.detail,
        verified_by=physical.verified_by,
        expected=shard.checksum if physical.checksum else None,
        actual=physical.checksum,
    )


def _extra_and_ignored(contract: Contract, listed: Mapping[str, int]) -> tuple[list[str], list[IgnoredFile]]:
    """Files at the location the contract does not list, split the way ``register`` splits a listing
    (:func:`dsm.shards.dataset_files`): ``extra`` (would be shards) and ``ignored`` (not data)."""
    known = {s.path for s in contract.shards}
    if all(p in known for p in listed):
        return [], []
    from dsm.shards import dataset_files, takes_unnamed  # the format layer (Arrow) loads only when needed

    pattern = contract.metadata.get("source_glob")
    found = dataset_files(
        [FileInfo(path=p, size=n) for p, n in listed.items() if p not in known],
        format=contract.format,
        pattern=str(pattern) if pattern else None,
        unnamed=takes_unnamed(known, contract.format),
    )
    return [f.path for f in found.shards], list(found.ignored)


def verify(
    ref: str | Contract,
    *,
    deep: bool = False,
    fast: bool = False,
    registry: str | Registry | None = None,
    workers: int | None = None,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Compare every shard with its contract entry: presence, size and checksum of its bytes; with
    ``deep``, also the schema, row count and row fingerprint of its decoded rows. Files at the location
    that the contract does not list are reported as ``extra``. With ``fast``, shards whose contract
    records a ``server_checksum`` are checked against the object store's full-object checksum without
    being read (``verified_by: server``); the others are read as usual. The shards are read on
    ``engine`` (``"local"`` or ``"ray"``, with ``ray_address``; default ``DSM_ENGINE``, else local); the
    report is the same on every engine, apart from its ``engine`` field.

    >>> report = verify("web-text@prod", deep=True)  # doctest: +SKIP
    >>> report.ok, report.summary  # doctest: +SKIP
    (True, {'ok': 64})
    """
    if fast and deep:
        raise InputError("--fast and --deep exclude each other: --deep reads every byte of every shard")
    if workers is not None:
        parse_workers(workers)  # before anything is read
    executor = open_executor(engine, ray_address=ray_address, workers=workers)
    contract = resolve(ref, registry, storage_options)
    loc = location(contract.location, storage_options)
    stats = request_stats(loc)
    before = stats.snapshot() if stats is not None else None
    listed = {f.path: f.size for f in loc.list_files()}
    progress = progress or NullProgress()
    # The bar counts the data's bytes once (with --deep, bytes and rows are checked from one read).
    progress.start(
        total_bytes=contract.total_bytes,
        total_units=len(contract.shards),
        description=f"verify {contract.ref}",
    )

    try:
        digests: list[RowDigest | None] = [None] * len(contract.shards)
        if deep:
            # One read per shard: bytes and rows are checked from the same read.
            physical = []
            checked = _check_deep(contract, loc, listed, workers, progress, executor)
            for i, (bytes_check, rows) in enumerate(checked):
                bytes_report = _bytes_report(contract.shards[i], bytes_check)
                if rows is None:
                    physical.append(bytes_report)
                    continue
                physical.append(
                    ShardReport(
                        path=rows.path,
                        status=rows.status,
                        detail=rows.detail,
                        verified_by="bytes+rows",
                        expected=rows.expected or bytes_report.expected,
                        actual=rows.actual or bytes_report.actual,
                    )
                )
                digests[i] = rows.digest
        else:
            physical = map_units(
                partial(_physical_unit, loc, fast),
                [(shard, listed.get(shard.path)) for shard in contract.shards],
                workers=workers or loc.io_workers,
                on_progress=progress.advance,
                executor=executor,
            )
    finally:
        progress.finish()
    results = list(zip(physical, digests, strict=True))
    reports = [r for r, _ in results]
    extra, ignored = _extra_and_ignored(contract, listed)
    reports += [
        ShardReport(
            path=p, status="extra", detail="at the location but not in the contract", verified_by="listing"
        )
        for p in extra
    ]
    match, consistent, notes = _dataset_fingerprint(contract, [d for _, d in results], deep)
    if ignored:
        shown = ", ".join(f.path for f in ignored[:3]) + (
            f" (and {len(ignored) - 3} more)" if len(ignored) > 3 else ""
        )
        notes.append(f"{len(ignored)} file(s) at the location are not data and were ignored: {shown}")
    notes += _storage_notes(reports, fast, stats, before)
    return VerifyReport(
        dataset=contract.ref,
        location=contract.location,
        deep=deep,
        shards=tuple(reports),
        fingerprint_match=match,
        contract_consistent=consistent,
        notes=tuple(notes),
        ignored=tuple(ignored),
        provenance=fingerprint_kernel.provenance() if deep else {"tool": tool_name()},
        engine=executor.report(),
    )


def _physical_unit(loc: Location, fast: bool, item: tuple[Shard, int | None]) -> ShardReport:
    """One unit of a verify: a shard's presence, size and checksum (``item``: it and its listed size).
    The bar moves as its bytes are read (report_progress), from threads, forked workers or Ray tasks."""
    shard, size = item
    read = [0]

    def on_bytes(nbytes: int) -> None:
        read[0] += nbytes
        report_progress(nbytes)

    physical = check_physical(loc, shard, actual_size=size, on_bytes=on_bytes, fast=fast)
    report_progress(max(0, shard.bytes - read[0]))  # not read (missing, resized, by the store): done too
    return _bytes_report(shard, physical)


def _storage_notes(
    reports: list[ShardReport], fast: bool, stats: RequestStats | None, before: tuple[int, int, int] | None
) -> list[str]:
    """What the store did: shards checked by its checksums (--fast), and retried requests."""
    notes = []
    if fast:
        by_server = sum(1 for r in reports if r.verified_by == "server")
        read = sum(1 for r in reports if r.verified_by == "bytes" and r.status not in ("missing", "resized"))
        notes.append(
            f"--fast: {by_server} shard(s) verified by the store's full-object checksum without reading "
            f"them, {read} read and hashed (no trusted store checksum recorded or offered)"
        )
    if stats is not None and before is not None:
        requests, retries, failures = (now - then for now, then in zip(stats.snapshot(), before, strict=True))
        if retries or failures:
            notes.append(
                f"storage: {requests} requests, {retries} retried after transient errors, {failures} failed"
            )
    return notes


def _check_deep(
    contract: Contract,
    loc: Location,
    listed: Mapping[str, int],
    workers: int | None,
    progress: Progress,
    executor: Executor,
) -> list[tuple[PhysicalCheck, RowCheck | None]]:
    """Check every shard's bytes and rows from one read each (:func:`~dsm.validators.rows.check_shard`),
    in shard order.

    Threads, where the compiled fingerprint kernel hashes with the GIL released (decoding releases it
    too). The pure-Python path holds the GIL for every string value, so there, on local disk, the local
    engine checks the shards in forked worker processes instead; an in-process ``memory://`` store is not
    visible to another process, so it always gets threads. A unit crosses as data (the location as its
    URL, the contract, the batch size), so it runs the same on every engine. Arrow and the format layer
    load only here and in :func:`_check_job`: a bytes-only verify starts in a fraction of the time.
    """
    from dsm.rewrite.plan import decoded_row_bytes
    from dsm.shards import batch_rows_for

    # Batches of a few MiB decoded, as the rewrite reads: wide rows (long texts, images) keep memory flat.
    job = partial(_check_job, loc, contract, batch_rows_for(decoded_row_bytes(contract)))

    # Each job reports its rows as it checks them (report_progress), from threads or forked workers alike.
    items = [(shard, listed.get(shard.path)) for shard in contract.shards]
    mode: Mode = "process" if loc.is_local and not fingerprint_kernel.enabled() else "thread"
    count = workers or (default_workers() if mode == "process" else loc.io_workers)
    return map_units(job, items, workers=count, mode=mode, on_progress=progress.advance, executor=executor)


def _check_job(
    loc: Location, contract: Contract, batch_rows: int, item: tuple[Shard, int | None]
) -> tuple[PhysicalCheck, RowCheck | None]:
    """One unit of a deep verify: a shard's bytes and rows checked from one read (``item``: the shard
    and its listed size); the format is made here from the contract, where the format layer loads."""
    from dsm.formats import contract_format
    from dsm.validators.rows import check_shard

    shard, size = item
    done = [0]

    def moved(nbytes: int) -> None:
        done[0] += nbytes
        report_progress(nbytes)

    # The bar moves as rows are checked, each row its share of the shard's bytes (the one read hashes them).
    found = check_shard(
        loc,
        shard,
        contract_format(contract),
        contract.schema.to_arrow(),
        actual_size=size,
        batch_rows=batch_rows,
        on_rows=rows_as_bytes(moved, shard.bytes, shard.rows),
    )
    report_progress(max(0, shard.bytes - done[0]))  # not read or not decoded to the end: done too
    return found


def _dataset_fingerprint(
    contract: Contract, digests: list[RowDigest | None], deep: bool
) -> tuple[bool | None, bool | None, list[str]]:
    """(rows recomputed equal the contract's fingerprint, the contract's shard fingerprints add up to its
    dataset fingerprint, notes saying which was checked)."""
    expected = contract.fingerprint
    if expected is None:
        return None, None, ["the contract has no dataset fingerprint"]
    want = (expected.rows, expected.unordered, expected.ordered)
    notes = []
    match: bool | None = None
    if deep and digests and all(d is not None for d in digests):
        total = RowDigest.combine(d for d in digests if d is not None)
        match = (total.rows, total.unordered, total.ordered) == want
        notes.append(
            f"row fingerprint recomputed from every shard: {'matches' if match else 'DIFFERS from'} "
            "the contract"
        )
    elif deep:
        unread = sum(1 for d in digests if d is None)
        notes.append(f"row fingerprint not recomputed: the rows of {unread} shard(s) could not be checked")
    consistent: bool | None = None
    if all(s.fingerprint and s.ordered_fingerprint and s.rows is not None for s in contract.shards):
        combined = RowDigest.combine(
            RowDigest.from_hex(
                rows=s.rows or 0, unordered=s.fingerprint or "", ordered=s.ordered_fingerprint or ""
            )
            for s in contract.shards
        )
        consistent = (combined.rows, combined.unordered, combined.ordered) == want
        if not consistent:
            notes.append(
                "the contract is not self-consistent: its shard fingerprints do not add up to its dataset "
                "fingerprint (the contract was edited or damaged)"
            )
        elif match is None:
            notes.append(
                "rows not read: the contract's shard fingerprints add up to its dataset fingerprint (a "
                "check of the contract only; --deep checks the rows)"
            )
    else:
        notes.append("shard fingerprints are incomplete; the contract's dataset fingerprint was not checked")
    return match, consistent, notes
