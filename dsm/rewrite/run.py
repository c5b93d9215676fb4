"""Running a rewrite: prepare it (format, proof, overlap, plan), claim the destination, execute its units
with resume, prove the rows, and clear its journal once published. The engine under ``dsm
convert-format``, ``dsm reshard`` and a cutover's copy; the command (:mod:`dsm.commands.rewrite`)
resolves, checks the destination against the registry, publishes and reports.

Every source shard's checksum is checked before anything is written; every output file is written under a
temporary name (renamed when complete) while its bytes are hashed and the rows handed to the writer are
digested (``proof: written-batches``; ``read_back`` re-reads each file instead: ``proof: read-back``); the
dataset fingerprint must equal the source's. A killed run resumes from its journal at the destination; the
result is byte-identical to an uninterrupted run, whatever the worker count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa

from dsm._testing import unit_journaled
from dsm.contract import Contract, DatasetFingerprint, Schema, Shard
from dsm.engine import Executor, LocalExecutor, NullProgress, Progress, default_workers, map_units
from dsm.engine.progress import Passes, report_progress
from dsm.errors import CheckFailed, DatasetNotFound, InputError, SchemaError
from dsm.formats import Format
from dsm.hashing.checksum import algorithm_of, known_algorithms
from dsm.hashing.fingerprint import ALGORITHM
from dsm.rewrite.chains import Unit, UnitChain, chain_units, read_whole, source_fragments
from dsm.rewrite.execute import (
    RewriteContext,
    bucket_pieces,
    copy_units,
    digest_of,
    gather_unit,
    scatter_units,
    source_format,
    spill_name,
)
from dsm.rewrite.journal import DestinationClaim, Journal, is_journal_path, remove_spill, remove_temporaries
from dsm.rewrite.plan import OutputUnit, RewritePlan, ScatterUnit, plan_rewrite
from dsm.rewrite.reading import SourceChanged, keeps_stored_groups
from dsm.rewrite.spec import RewriteSpec, estimate_rows_per_shard
from dsm.shards import DescribedShard, contract_location, dataset_fingerprint
from dsm.storage import Location, canonical_location, claimed_location, is_within, location, overlaps, redact
from dsm.units import parse_size
from dsm.validators import PhysicalCheck, check_physical

__all__ = [
    "PROOF_READ_BACK",
    "PROOF_WRITTEN",
    "PreparedRewrite",
    "RewriteOutcome",
    "execute_rewrite",
    "finish_rewrite",
    "prepare_rewrite",
]

PROOF_WRITTEN = "written-batches"
"""Default proof: a file's checksum from its bytes as written, its rows' digest from the batches written."""
PROOF_READ_BACK = "read-back"
"""``read_back=True``: each written file is read again as a reader will and its checksum and rows taken."""


@dataclass(frozen=True, kw_only=True)
class PreparedRewrite:
    """A rewrite checked and planned, before anything at the destination is read or written: its source
    and destination, the formats, the plan (whose ``key`` a resumed run must match) and the lineage
    ``parameters`` of the version it will publish. The destination is inspected by
    :func:`execute_rewrite`, under the destination's claim."""

    source: Contract
    spec: RewriteSpec
    plan: RewritePlan
    source_loc: Location
    dest: Location
    source_fmt: Format
    out_fmt: Format
    schema: pa.Schema
    parameters: Mapping[str, Any]
    read_back: bool
    overwrite: bool = False
    notes: tuple[str, ...] = ()
    spill: Location | None = None
    """``--spill-dir``: where a shuffle's pass-1 files go (this plan's folder in it); None: the journal's
    folder at the destination."""
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)  # may hold credentials
    """The run's storage options: a spill folder an interrupted run recorded is opened with them."""
    out_schema: pa.Schema | None = None
    """What the target format's files hold (``Format.storage`` of ``schema``); ``schema`` when None."""
    keep_groups: bool = False
    """Source row groups may be written as stored (:func:`~dsm.rewrite.execute.keeps_stored_groups`)."""

    @property
    def contract_schema(self) -> Schema:
        """The new version's schema: the types its files hold, the source's annotations."""
        stored = self.schema if self.out_schema is None else self.out_schema
        return Schema.from_arrow(stored, annotations=self.source.schema)

    @property
    def dest_url(self) -> str:
        """The location the new contract records (credentials never included)."""
        return contract_location(self.dest)

    def claim(self) -> DestinationClaim:
        """The destination's claim (not yet taken: ``with job.claim().take():``)."""
        return DestinationClaim(self.dest)


@dataclass(frozen=True, kw_only=True)
class RewriteOutcome:
    """What executing a rewrite wrote and proved: the new shards, their fingerprint (equal to the source's),
    and how many units were written now or kept from an interrupted run."""

    shards: tuple[Shard, ...]
    fingerprint: DatasetFingerprint
    units_written: int
    units_resumed: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def prepare_rewrite(
    source: Contract,
    dest: str,
    spec: RewriteSpec,
    *,
    overwrite: bool = False,
    read_back: bool = False,
    spill_dir: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PreparedRewrite:
    """Check ``spec`` against ``source`` and plan the output files; nothing at the destination is read.

    Refuses (nothing written) a target format that cannot hold the schema (SchemaError), a source without a
    row fingerprint to prove against, a destination that overlaps the source's location (compared as
    canonical locations: a symlink or another spelling of it is the same place), and a ``spill_dir``
    without a shuffle, inside the source or inside the destination.
    """
    if spill_dir is not None and not spec.shuffle:
        raise InputError("--spill-dir only applies with --shuffle (only a shuffle writes pass-1 files)")
    to = spec.format or source.format
    parameters: dict[str, Any] = spec.lineage_parameters()
    parameters["to"] = to
    src_fmt = source_format(source)
    out_fmt = spec.target_format(source)
    schema = source.schema.to_arrow()
    # What the target's files will hold: the contract records it, exact conversions are noted in lineage.
    storage = out_fmt.storage(schema)
    if storage.problems:
        raise SchemaError(
            f"format {to} cannot hold the schema of {source.ref}: {'; '.join(storage.problems)}; "
            "nothing was written"
        )
    if storage.changes:
        parameters["stored_types"] = storage.retyped()
    expected = source.fingerprint
    if expected is None or expected.algorithm != ALGORITHM:
        raise InputError(
            f"{source.ref} has no {ALGORITHM} row fingerprint to prove the rewrite against; re-register it"
        )
    src_loc = location(source.location, storage_options)
    dest_loc = location(dest, storage_options)
    pattern = source.metadata.get("source_glob")
    held = claimed_location(src_loc, [s.path for s in source.shards], str(pattern) if pattern else None)
    if overlaps(held, canonical_location(dest_loc)):
        raise InputError(
            f"destination {redact(dest)} overlaps the location of {source.ref} ({redact(source.location)}); "
            "write to a folder of its own; nothing was written"
        )
    spill_root = location(spill_dir, storage_options) if spill_dir is not None else None
    if spill_root is not None:
        _check_spill_dir(spill_root, held, dest_loc, source)
    rows_per_shard = spec.rows_per_shard
    if spec.shard_size is not None:
        target = parse_size(spec.shard_size, what="--shard-size")
        rows_per_shard = estimate_rows_per_shard(source, src_loc, src_fmt, out_fmt, schema, target)
        parameters["planned_rows_per_shard"] = rows_per_shard
    parameters["format_options"] = out_fmt.options()
    plan = plan_rewrite(
        source,
        out_fmt,
        operation=spec.operation,
        parameters=parameters,
        num_shards=spec.num_shards,
        rows_per_shard=rows_per_shard,
        shuffle=spec.shuffle,
        seed=spec.seed,
        splittable_source=type(src_fmt).fragment_count is not Format.fragment_count,
    )
    # How the output was proven; recorded in the lineage, not in the plan (it changes no output byte).
    parameters["proof"] = PROOF_READ_BACK if read_back else PROOF_WRITTEN
    notes = [f"{change} by {to} (exact: the same values and row fingerprint)" for change in storage.changes]
    spill = spill_root.child(f"dsm-spill-{plan.key[:16]}") if spill_root is not None else None
    return PreparedRewrite(
        source=source,
        spec=spec,
        plan=plan,
        source_loc=src_loc,
        dest=dest_loc,
        source_fmt=src_fmt,
        out_fmt=out_fmt,
        schema=schema,
        parameters=parameters,
        read_back=read_back,
        overwrite=overwrite,
        notes=tuple(notes),
        spill=spill,
        storage_options=dict(storage_options or {}),
        out_schema=storage.schema,
        keep_groups=keeps_stored_groups(
            src_fmt, out_fmt, src_loc, shuffle=spec.shuffle, given=spec.write_options()
        ),
    )


def _check_spill_dir(spill: Location, held: str, dest: Location, source: Contract) -> None:
    """A spill folder is neither in the source (``held``: the canonical place it holds; never written
    into) nor in the destination (its files would be taken for someone else's), compared as canonical
    locations. Holding them is fine: the files go to a folder of their own."""
    place = canonical_location(spill)
    if is_within(place, held):
        raise InputError(
            f"--spill-dir {redact(spill.url)} is inside the location of {source.ref}; a rewrite never writes "
            "into its source: choose another folder"
        )
    if is_within(place, canonical_location(dest)):
        raise InputError(
            f"--spill-dir {redact(spill.url)} is inside the destination: leave --spill-dir out (the default "
            "is the journal's folder there) or choose a folder outside it"
        )


def _header(job: PreparedRewrite) -> dict[str, Any]:
    header: dict[str, Any] = {
        "operation": job.spec.operation,
        "source": job.source.ref,
        "outputs": job.plan.paths,
        "published": None,
    }
    if job.spill is not None:
        header["spill"] = contract_location(job.spill)  # absolute on local disk, no credentials
    return header


def _recorded_spill(job: PreparedRewrite, header: Mapping[str, Any] | None) -> Location | None:
    """The ``--spill-dir`` folder this plan's journal records, when it is not this run's: an interrupted
    run used another one, and its pass-1 files (this plan's) are deleted."""
    before = str(header.get("spill") or "") if header is not None else ""
    if not before or before == (contract_location(job.spill) if job.spill is not None else ""):
        return None
    return location(before, job.storage_options)


def execute_rewrite(
    job: PreparedRewrite,
    claim: DestinationClaim,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> RewriteOutcome:
    """With the destination's ``claim`` held: refuse a destination that holds something else (unless
    ``overwrite``; a published version never), check the source shards, write (or resume) every output
    file, and prove the rows: CheckFailed, with nothing registered, when a source shard fails its checksum
    or the rows differ from the source's.

    The units run on ``executor`` (default: this machine's threads), at most ``workers`` at once; the
    output is the same whatever the executor, the worker count or the retries of a unit. The claim stays
    with this process (the driver): no unit needs it.
    """
    source, plan = job.source, job.plan
    claim.check()
    header, notes = _prepare_destination(job.dest, plan, job.overwrite)
    stale_spill = _recorded_spill(job, header)
    if stale_spill is not None:
        notes.append(f"the pass-1 files an interrupted run left in {redact(stale_spill.url)} are deleted")
    runner: Executor = executor if executor is not None else LocalExecutor()
    fragments = source_fragments(job.source_loc, job.source_fmt, source, _units(plan), workers)
    # One read per source shard where a unit, or a chain of units, reads it whole: its checksum is checked
    # from that read. The others (split between units, or a resumed run's) are checked before anything is
    # written.
    in_read = frozenset() if header is not None else whole_reads(plan, fragments, workers)
    in_read = frozenset(
        s.path
        for s in source.shards
        if s.path in in_read and s.checksum and algorithm_of(s.checksum) in known_algorithms()
    )
    first = [s for s in source.shards if s.path not in in_read]
    # The checks before writing, (a shuffle's scatter,) the writing: passes over the same data, counted once.
    work = sum(s.bytes for s in first) + source.total_bytes * (2 if job.spec.shuffle else 1)
    progress = Passes(progress or NullProgress(), work / max(1, source.total_bytes))
    progress.start(
        total_bytes=source.total_bytes,
        total_units=len(plan.units),
        description=f"{job.spec.operation} {source.ref}",
    )
    try:
        notes += _check_sources(source, first, job.source_loc, workers, progress, runner)
        if stale_spill is not None:
            remove_spill(stale_spill)
        journal = Journal(job.dest, plan.key)
        journal.write_header(_header(job))
        ctx = RewriteContext(
            source=source,
            source_loc=job.source_loc,
            source_fmt=job.source_fmt,
            dest=job.dest,
            out_fmt=job.out_fmt,
            schema=job.schema,
            out_schema=job.out_schema,
            plan=plan,
            journal=journal,
            spill=job.spill,
            read_back=job.read_back,
            checked_in_read=in_read,
            fragments=fragments,
            keep_groups=job.keep_groups,
        )
        _sweep(ctx)
        try:
            results, resumed = _run(ctx, workers, runner, progress, resume=header is not None)
        except SourceChanged as exc:
            _undo(ctx, journal)
            raise CheckFailed(f"source {source.ref} failed its checks: {exc}") from None
        # A unit whose worker died was run again under a new temporary name; the old one goes now.
        _sweep(ctx)
    finally:
        progress.finish()
    total = dataset_fingerprint(r.digest for r in results)
    expected = source.fingerprint
    if expected is None:  # prepare_rewrite refuses such a source; a job made by hand may not have
        raise InputError(f"{source.ref} has no {ALGORITHM} row fingerprint to prove the rewrite against")
    match = total.rows == expected.rows and total.unordered == expected.unordered
    if not job.spec.shuffle:
        match = match and total.ordered == expected.ordered
    if not match:
        raise CheckFailed(
            f"the rows written to {redact(job.dest.url)} do not match {source.ref}: fingerprint "
            f"{total.unordered[:16]}../{total.ordered[:16]}.. ({total.rows} rows), expected "
            f"{expected.unordered[:16]}../{expected.ordered[:16]}.. ({expected.rows} rows); "
            "nothing was registered"
        )
    return RewriteOutcome(
        shards=tuple(r.shard for r in results),
        fingerprint=total,
        units_written=len(plan.units) - resumed,
        units_resumed=resumed,
        notes=tuple(notes),
    )


def finish_rewrite(job: PreparedRewrite, claim: DestinationClaim) -> None:
    """Once the new version is published: delete this plan's journal, its shuffle's pass-1 files in
    ``--spill-dir`` (this run's, and one an interrupted run recorded) and the claim, so that the folder
    holds the data files alone (a journal of another plan is not this rewrite's to delete)."""
    claim.confirm()
    header = Journal.read_header(job.dest)
    if header is not None and header.get("plan") == job.plan.key:  # else a finished run removed them
        for spill in (_recorded_spill(job, header), job.spill):
            if spill is not None:
                remove_spill(spill)
    if header is None or header.get("plan") == job.plan.key:
        Journal(job.dest, job.plan.key).remove()
    claim.remove()


def _sweep(ctx: RewriteContext) -> None:
    """Delete the temporary files that killed runs or dead workers left for this plan's files."""
    remove_temporaries(ctx.dest, set(ctx.plan.paths))
    if ctx.spill is not None:
        remove_temporaries(ctx.spill, {spill_name(s.index) for s in ctx.plan.scatter})


def _undo(ctx: RewriteContext, journal: Journal) -> None:
    """Remove what this run wrote at the destination (its finished outputs, as journaled, its pass-1
    files, in ``--spill-dir`` too, its records and journal header, and the temporaries of units another
    worker was still writing): a source that fails its checks leaves the destination as it was. Only
    files this run recorded are removed: a file of another writer with an output's name stays."""
    for record in journal.records("unit").values():
        with contextlib.suppress(DatasetNotFound):
            ctx.dest.remove(str(record["path"]))
    _sweep(ctx)
    if ctx.spill is not None:
        remove_spill(ctx.spill)
    journal.remove()


def whole_reads(
    plan: RewritePlan, fragments: Mapping[str, Sequence[int]], workers: int | None
) -> frozenset[str]:
    """The source shards that one unit, or one chain of units, reads whole (each once) when the plan runs
    from its start."""
    return read_whole(chain_units(_units(plan), fragments, plan.batch_rows, _parallel(workers)))


def _checking(ctx: RewriteContext, chains: tuple[UnitChain[Unit], ...]) -> tuple[UnitChain[Unit], ...]:
    """``chains``, after making sure that each shard left to be checked by the read that copies it is read
    whole by one of them (else it would go unchecked: a bug, stopped here)."""
    unread = ctx.checked_in_read - read_whole(chains)
    if unread:
        raise RuntimeError(f"source shards {sorted(unread)} would be checked by a read that is not made")
    return chains


def _units(plan: RewritePlan) -> Sequence[OutputUnit | ScatterUnit]:
    """The units that read the source: a shuffle's pass-1 pieces, else the output files."""
    return plan.scatter if plan.shuffle else plan.units


def _parallel(workers: int | None) -> int:
    """How many units run at once: what chains are cut to keep busy."""
    return workers or default_workers()


def _check_source(loc: Location, shard: Shard) -> PhysicalCheck:
    """One unit of the source check: the shard's size and checksum against its contract entry; the bar
    moves as its bytes are read (report_progress)."""
    try:
        size: int | None = loc.size(shard.path)
    except DatasetNotFound:
        size = None
    read = [0]

    def on_bytes(nbytes: int) -> None:
        read[0] += nbytes
        report_progress(nbytes)

    checked = check_physical(loc, shard, actual_size=size, on_bytes=on_bytes)
    report_progress(max(0, shard.bytes - read[0]))  # not read (missing, resized): done too
    return checked


def _check_sources(
    source: Contract,
    shards: list[Shard],
    loc: Location,
    workers: int | None,
    progress: Progress,
    executor: Executor,
) -> list[str]:
    """Check the size and checksum of ``shards`` (of ``source``) before anything is written; CheckFailed
    names the shards that fail. Returns notes (shards that could not be verified)."""
    checks = map_units(
        partial(_check_source, loc), shards, workers=workers, on_progress=progress.advance, executor=executor
    )
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


def _still_good(loc: Location, record: Mapping[str, Any]) -> bool:
    """One unit of a resume: whether a journaled file is still there with its size and checksum."""
    shard = Shard(path=record["path"], bytes=int(record["bytes"]), checksum=record.get("checksum"))
    try:
        size: int | None = loc.size(shard.path)
    except DatasetNotFound:
        size = None
    return check_physical(loc, shard, actual_size=size).status == "ok"


def _kept(
    loc: Location,
    records: Mapping[int, dict[str, Any]],
    paths: Mapping[int, str],
    workers: int | None,
    executor: Executor,
) -> dict[int, dict[str, Any]]:
    """The journaled units whose file is still at ``loc`` with the recorded size and checksum."""
    candidates = [(i, r) for i, r in sorted(records.items()) if i in paths and r.get("path") == paths[i]]
    good = map_units(
        partial(_still_good, loc), [r for _, r in candidates], workers=workers, executor=executor
    )
    return {i: r for (i, r), ok in zip(candidates, good, strict=True) if ok}


def _run(
    ctx: RewriteContext, workers: int | None, executor: Executor, progress: Progress, *, resume: bool
) -> tuple[list[DescribedShard], int]:
    plan, journal = ctx.plan, ctx.journal
    if not resume:
        journal.clear_units()
        if ctx.spill is not None:
            remove_spill(ctx.spill)
    unit_paths = {u.index: u.path for u in plan.units}
    records = journal.records("unit") if resume else {}
    kept_records = _kept(ctx.dest, records, unit_paths, workers, executor) if resume else {}
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
    try:
        done = _write_units(ctx, todo, resume, workers, executor, progress)
    except KeyboardInterrupt as exc:  # what the CLI tells the person who pressed Ctrl-C
        exc.add_note(
            "resume: run the same command again; the files this run finished are kept and not written again"
        )
        raise
    for unit, found in zip(todo, done, strict=True):
        kept[unit.index] = found
    return [kept[u.index] for u in plan.units], len(plan.units) - len(todo)


def _write_units(
    ctx: RewriteContext,
    todo: list[OutputUnit],
    resume: bool,
    workers: int | None,
    executor: Executor,
    progress: Progress,
) -> list[DescribedShard]:
    """Write the output files of ``todo``: in chains that read their rows once (see
    :func:`~dsm.rewrite.chains.chain_units`), or a shuffle's scatter pass (kept from a previous run) and then
    its gathers. The bar moves as each unit finishes, in this process (the driver), whatever the executor."""
    plan, journal = ctx.plan, ctx.journal
    if not plan.shuffle:
        chains = _checking(ctx, chain_units(todo, ctx.fragments, plan.batch_rows, _parallel(workers)))

        def chain_done(index: int, _: list[DescribedShard]) -> None:
            for unit in chains[index].units:
                progress.advance(ctx.unit_bytes(unit))
                unit_journaled()  # a test's crash point (dsm._testing): counted here, where the job runs

        written = map_units(
            partial(copy_units, ctx), chains, workers=workers, on_done=chain_done, executor=executor
        )
        return [found for part in written for found in part]

    def unit_done(index: int, _: DescribedShard) -> None:
        progress.advance(ctx.unit_bytes(todo[index]))
        unit_journaled()

    if todo:
        spill_paths = {s.index: spill_name(s.index) for s in plan.scatter}
        spill_records = journal.records("scatter") if resume else {}
        spilled = _kept(ctx.spill_loc, spill_records, spill_paths, workers, executor) if resume else {}
        missing = [s for s in plan.scatter if s.index not in spilled]
        pieces = _checking(ctx, chain_units(missing, ctx.fragments, plan.batch_rows, _parallel(workers)))

        def scatter_done(index: int, _: list[dict[str, Any]]) -> None:
            for unit in pieces[index].units:
                progress.advance(ctx.range_bytes(unit.ranges[0]))
                unit_journaled()

        scattered = map_units(
            partial(scatter_units, ctx), pieces, workers=workers, on_done=scatter_done, executor=executor
        )
        spilled.update(
            {s.index: r for s, r in zip(missing, [r for part in scattered for r in part], strict=True)}
        )
        ctx.bucket_pieces = bucket_pieces(spilled)
    return map_units(partial(gather_unit, ctx), todo, workers=workers, on_done=unit_done, executor=executor)
