"""``dsm convert-format`` and ``dsm reshard``: rewrite a dataset without changing one row.

Keywords -> :class:`~dsm.rewrite.spec.RewriteSpec` -> the registry's data policy on the destination
(docs/policy.md, before anything is written) -> the rewrite engine (:mod:`dsm.rewrite.run`: check the
target format can hold the schema, plan the output files from the source contract, check the source
shards, write and prove every file, resume after a crash) -> publish the new contract, the commit point
-> :class:`RewriteResult`. The result is byte-identical whatever ``workers`` is.

>>> result = reshard("web-text@3", "s3://bucket/web-text/v4/", num_shards=64)  # doctest: +SKIP
>>> result.dataset, result.fingerprint_match  # doctest: +SKIP
('web-text@4', True)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsm._moved import forwarding
from dsm._version import tool_name
from dsm.commands.policy import check_destination, policy_error
from dsm.contract import Contract, Lineage
from dsm.engine import EngineReport, Executor, Progress, open_executor
from dsm.errors import CheckFailed, ConflictError, InputError
from dsm.hashing import fingerprint_kernel
from dsm.registry import Catalog, Registry, open_registry, parse_reference
from dsm.rewrite.journal import DestinationClaim
from dsm.rewrite.run import PreparedRewrite, execute_rewrite, finish_rewrite, prepare_rewrite
from dsm.rewrite.spec import RewriteSpec
from dsm.storage import canonical_location, redact
from dsm.units import parse_workers, utc_now_text

__all__ = ["RewriteResult", "convert_format", "reshard", "rewrite"]

# Names that lived here before the engine owned them: importable from here until dsm 0.3, with a warning.
_MOVED = {
    "PROOF_READ_BACK": "dsm.rewrite.run",
    "PROOF_WRITTEN": "dsm.rewrite.run",
    "estimate_rows_per_shard": "dsm.rewrite.spec",
    "locations_overlap": "dsm.rewrite.spec",
    "target_format": "dsm.rewrite.spec",
    "write_options": "dsm.rewrite.spec",
}


__getattr__ = forwarding(__name__, _MOVED)


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
    engine: EngineReport | None = None
    """Where the units ran (None when nothing ran: the version was already published)."""

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
            "engine": self.engine.to_dict() if self.engine is not None else None,
        }


def _published_already(catalog: Catalog, name: str, job: PreparedRewrite) -> Contract | None:
    """The version this same plan already published at this destination (a run killed after publishing,
    or the same command run again), if there is one."""
    dest = canonical_location(job.dest)
    for (other, _), contract in sorted(catalog.contracts.items(), reverse=True):
        if other != name or contract.metadata.get("rewrite_plan") != job.plan.key:
            continue
        if canonical_location(catalog.location_of(contract)) == dest:
            return contract
    return None


def _check_still_there(catalog: Catalog, contract: Contract) -> None:
    """CheckFailed unless every file of the version this plan published is where it was written, with its
    recorded size (one listing): "already published, nothing rewritten" must not be said of files that
    were deleted or replaced since."""
    loc = catalog.location_of(contract)
    found = {f.path: f.size for f in loc.list_files()}
    for shard in contract.shards:
        size = found.get(shard.path)
        if size == shard.bytes:
            continue
        state = "is missing" if size is None else f"has {size} bytes, the contract records {shard.bytes}"
        raise CheckFailed(
            f"{contract.ref} was published by this same rewrite, but its shard {shard.path} {state} at "
            f"{redact(contract.location)}: run `dsm verify {contract.ref}` and restore its files, or write "
            "the rewrite to another destination"
        )


def rewrite(
    ref: str | Contract,
    dest: str,
    spec: RewriteSpec,
    *,
    name: str | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    read_back: bool = False,
    spill_dir: str | None = None,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    lineage: Mapping[str, Any] | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> RewriteResult:
    """Rewrite ``ref`` at ``dest`` as ``spec`` says and publish it as the next version of its name (or
    ``name``). ``lineage`` adds entries to the new version's lineage parameters and metadata (a cutover
    records its id so). :func:`convert_format` and :func:`reshard` are this with their keywords.

    ``engine`` (``"local"`` or ``"ray"``; default ``DSM_ENGINE``, else local) runs the units, with
    ``ray_address`` for Ray (else ``RAY_ADDRESS``, else a local Ray started for the job): the files, their
    names and bytes are the same on every engine; the new version's lineage records which one ran. The
    destination's claim is held by this process (the driver) whatever the engine."""
    if workers is not None:
        parse_workers(workers)  # before anything is read or written
    reg = open_registry(registry, storage_options)
    source = reg.resolve(ref)
    target_name = name or source.name
    if "@" in target_name:
        raise InputError(f"--name {target_name!r} is a name, without a version or alias")
    parse_reference(target_name)
    verdict = check_destination(source.schema, dest, registry=reg, storage_options=storage_options)
    if not verdict.ok:  # before the engine touches the destination
        raise policy_error(verdict, f"{spec.operation} of {source.ref} to {redact(dest)}")
    job = prepare_rewrite(
        source,
        dest,
        spec,
        overwrite=overwrite,
        read_back=read_back,
        spill_dir=spill_dir,
        storage_options=storage_options,
    )
    parameters = dict(job.parameters)
    doing = f"{spec.operation} of {source.ref}"
    catalog, done = _judge_destination(reg, storage_options, target_name, job, dest, doing)
    if done is not None:
        return _already(job, catalog, done, source, None)
    executor = open_executor(engine, ray_address=ray_address, workers=workers)  # before the claim is taken
    parameters["engine"] = executor.name
    with job.claim().take() as claim:
        # Judged again under the claim: a rewrite that held the claim until now may have published a
        # version here since. Of this same plan, its files are this rewrite's output; of any other, this
        # rewrite must not write among them (with --overwrite it would replace some).
        catalog, done = _judge_destination(reg, storage_options, target_name, job, dest, doing)
        if done is not None:
            return _already(job, catalog, done, source, claim)
        outcome = execute_rewrite(job, claim, workers=workers, progress=progress, executor=executor)
        extra = dict(lineage or {})
        contract = Contract(
            name=target_name,
            description=source.description,
            owners=source.owners,
            location=job.dest_url,
            format=job.out_fmt.name,
            format_options=job.out_fmt.options(),
            schema=job.contract_schema,
            shards=outcome.shards,
            fingerprint=outcome.fingerprint,
            lineage=Lineage(
                parent=source.ref,
                operation=spec.operation,
                parameters={**parameters, **extra},
                tool=tool_name(),
                created=utc_now_text(),
            ),
            metadata={"rewrite_plan": job.plan.key, **extra},
        )
        claim.confirm()  # the publish must not run twice
        published = reg.publish(contract)
        finish_rewrite(job, claim)
    notes = [*job.notes, *outcome.notes]
    return _result(
        published,
        source,
        spec.operation,
        parameters,
        outcome.units_written,
        outcome.units_resumed,
        False,
        notes,
        executor.report(),
    )


def _judge_destination(
    reg: Registry,
    storage_options: Mapping[str, Any] | None,
    name: str,
    job: PreparedRewrite,
    dest: str,
    doing: str,
) -> tuple[Catalog, Contract | None]:
    """The registry's catalog and the version this same plan already published at ``dest``, if any; else
    InputError when ``dest`` overlaps any registered version's place (``doing`` says what was refused)."""
    catalog = reg.catalog(storage_options)
    done = _published_already(catalog, name, job)
    if done is None:
        catalog.refuse_destination(dest, doing=doing)
    return catalog, done


def _already(
    job: PreparedRewrite, catalog: Catalog, done: Contract, source: Contract, claim: DestinationClaim | None
) -> RewriteResult:
    """The result of a rewrite whose plan ``done`` published already: its files checked to be there, and
    what a run killed after publishing left at the destination cleared, under ``claim`` (or one taken
    here)."""
    _check_still_there(catalog, done)
    notes = list(job.notes)
    if claim is not None:
        finish_rewrite(job, claim)
    else:
        try:
            with job.claim().take() as taken:
                finish_rewrite(job, taken)
        except ConflictError as exc:  # the version stands; only the clean-up waits
            notes.append(f"the rewrite's journal at the destination was left as it is: {exc}")
    operation, units = job.spec.operation, len(job.plan.units)
    return _result(done, source, operation, dict(job.parameters), 0, units, True, notes)


def _result(
    contract: Contract,
    source: Contract,
    operation: str,
    parameters: Mapping[str, Any],
    written: int,
    resumed: int,
    already: bool,
    notes: list[str],
    engine: EngineReport | None = None,
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
        provenance=fingerprint_kernel.provenance(),
        engine=engine,
    )


def _format_keyword(format: str | None, to: str | None, function: str) -> str | None:
    if to is None:
        return format
    warnings.warn(
        f"{function}(to=...) is renamed format=...: `to` is a destination everywhere in dsm "
        "(the old keyword works until dsm 0.3)",
        DeprecationWarning,
        stacklevel=3,
    )
    if format is not None and format != to:
        raise InputError(f"{function}: format={format!r} and to={to!r} disagree; give format only")
    return to


def convert_format(
    ref: str | Contract,
    dest: str,
    *,
    format: str | None = None,
    compression: str | None = None,
    compression_level: int | None = None,
    row_group_size: int | None = None,
    format_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    read_back: bool = False,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    to: str | None = None,
) -> RewriteResult:
    """Rewrite dataset ``ref`` in format ``format`` at ``dest``, one output file per source shard, and
    publish it as the next version of its name (or ``name``); return the result with the new contract.

    Refuses (SchemaError, nothing written) when ``format`` cannot hold the schema; raises CheckFailed, and
    registers nothing, when a source shard fails its checksum or the rows written differ from the source's
    (``fingerprint.unordered`` and ``ordered`` must both match). The proof digests the batches handed to
    the writer and hashes the bytes as written; ``read_back=True`` re-reads every written file instead,
    which also catches a writer that changes a value (slower). Running it again after a crash resumes.
    ``engine`` and ``ray_address`` choose where the units run (see :func:`rewrite`).
    ``to=`` is the old name of ``format=`` (until dsm 0.3).

    >>> convert_format("logs@2", "data/logs-parquet/", format="parquet", compression="zstd")  # doctest: +SKIP
    """
    format = _format_keyword(format, to, "convert_format")
    if format is None:
        raise InputError("convert_format needs the target format: format='parquet' (or jsonl, csv, ...)")
    spec = RewriteSpec.convert(
        format=format,
        compression=compression,
        compression_level=compression_level,
        row_group_size=row_group_size,
        format_options=format_options,
    )
    return rewrite(
        ref,
        dest,
        spec,
        name=name,
        workers=workers,
        overwrite=overwrite,
        read_back=read_back,
        engine=engine,
        ray_address=ray_address,
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
    format: str | None = None,
    compression: str | None = None,
    compression_level: int | None = None,
    row_group_size: int | None = None,
    format_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    read_back: bool = False,
    spill_dir: str | None = None,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    to: str | None = None,
) -> RewriteResult:
    """Rewrite dataset ``ref`` at ``dest`` as ``num_shards`` files, files of about ``shard_size`` bytes
    (``"256MB"``), or files of ``rows_per_shard`` rows (exactly one of the three), and publish it.

    Without ``shuffle`` the files, read in order, hold the source's rows in the source's order. With
    ``shuffle`` the rows are permuted across all files by a permutation fixed by ``seed`` (default 0):
    the same seed always gives the same files. ``format`` also converts the format (``to=`` is its old
    name, until dsm 0.3). Checks, proof (``read_back``) and resume are those of :func:`convert_format`;
    the unordered fingerprint must match, and the ordered one unless shuffled. ``spill_dir`` (a URL every
    worker can reach) holds a shuffle's pass-1 files instead of the destination's journal folder; they
    are deleted when the new version is published. ``engine`` and ``ray_address`` are :func:`rewrite`'s.

    >>> reshard("web-text@3", "data/web-text-64/", num_shards=64, shuffle=True, seed=7)  # doctest: +SKIP
    """
    format = _format_keyword(format, to, "reshard")
    spec = RewriteSpec.reshard(
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        format=format,
        compression=compression,
        compression_level=compression_level,
        row_group_size=row_group_size,
        format_options=format_options,
    )
    return rewrite(
        ref,
        dest,
        spec,
        name=name,
        workers=workers,
        overwrite=overwrite,
        read_back=read_back,
        spill_dir=spill_dir,
        engine=engine,
        ray_address=ray_address,
        registry=registry,
        storage_options=storage_options,
        progress=progress,
    )
