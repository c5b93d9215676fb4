"""The stages of ``dsm cutover`` (plan, copy, verify, shadow, switch, complete) and rollback's steps.

Each stage function takes the run's :class:`StageContext`, does its work, and returns the evidence its
``stage_finished`` record keeps; a check that does not hold raises :class:`StageCheckFailed` carrying the
evidence gathered so far. Every stage is idempotent: run again after a crash, it continues (the rewrite
resumes from its own journal) or finds its work done (the alias already moved, the status already set).
The runner, the lease and the journal are in :mod:`dsm.commands.cutover`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsm.contract import Contract, Lineage
from dsm.cutover.estimate import Estimate, Measurements, destination_speeds, estimate
from dsm.cutover.journal import CutoverJournal
from dsm.cutover.killpoints import copy_crash_units, kill_point
from dsm.cutover.lease import Lease
from dsm.cutover.prices import PriceTable
from dsm.cutover.state import CutoverState
from dsm.engine import Progress, default_workers
from dsm.errors import CheckFailed, InputError
from dsm.registry import Registry
from dsm.storage import TEMP_MARKER, Location, location, redact

__all__ = [
    "CutoverPlan",
    "StageCheckFailed",
    "StageContext",
    "StampingRegistry",
    "checksums_digest",
    "compute_plan",
    "discard_target",
    "rewrite_format",
]

SAMPLE_BYTES = 8 << 20
"""Stored source bytes the plan decodes, encodes and writes to measure the copy's speeds."""
PLAN_SAMPLE_NAME = "cutover-plan-sample"


class StageCheckFailed(CheckFailed):
    """A stage whose check did not hold (exit 1); ``evidence`` is what it found, for the journal."""

    def __init__(self, message: str, evidence: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.evidence = dict(evidence or {})


class StampingRegistry(Registry):
    """The registry, seen by the rewrite: every version it publishes records the cutover in its lineage
    (``lineage.parameters.cutover``) and metadata (``metadata.cutover``)."""

    def __init__(self, base: Registry, cutover_id: str, storage_options: Mapping[str, Any] | None) -> None:
        super().__init__(base.url, storage_options=storage_options)
        self.cutover_id = cutover_id

    def publish(self, contract: Contract) -> Contract:
        lineage = contract.lineage or Lineage(operation="cutover")
        stamped = contract.evolve(
            lineage=Lineage(
                parent=lineage.parent,
                operation=lineage.operation,
                parameters={**dict(lineage.parameters), "cutover": self.cutover_id},
                tool=lineage.tool,
                created=lineage.created,
            ),
            metadata={**dict(contract.metadata), "cutover": self.cutover_id},
        )
        return super().publish(stamped)


@dataclass(kw_only=True)
class StageContext:
    """What every stage of one run needs."""

    registry: Registry
    journal: CutoverJournal
    lease: Lease
    spec: Mapping[str, Any]
    storage_options: Mapping[str, Any] | None
    workers: int | None
    progress: Progress | None
    state: CutoverState | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.spec["dataset"])

    @property
    def alias(self) -> str:
        return str(self.spec["alias"])

    @property
    def source_version(self) -> int:
        return int(self.spec["source_version"])

    def source(self) -> Contract:
        return self.registry.get(self.name, self.source_version)

    def target_version(self) -> int:
        version = self.state.target_version if self.state is not None else None
        if version is None:
            raise InputError(f"cutover {self.journal.id}: the copy has not registered a target version yet")
        return version

    def target(self) -> Contract:
        return self.registry.get(self.name, self.target_version())


def checksums_digest(contract: Contract) -> str:
    """One digest of every shard's path, size and checksum (sha256): equal digests, equal target bytes."""
    lines = "".join(f"{s.path}\t{s.bytes}\t{s.checksum}\n" for s in contract.shards)
    return "sha256:" + hashlib.sha256(lines.encode("utf-8")).hexdigest()


def rewrite_format(spec: Mapping[str, Any], source: Contract) -> Any:
    """The target format instance exactly as the rewrite will build it (its options included)."""
    from dsm.commands.rewrite import target_format, write_options

    rewrite = spec["rewrite"]
    options = write_options(
        rewrite.get("compression"),
        rewrite.get("compression_level"),
        rewrite.get("row_group_size"),
        rewrite.get("format_options"),
    )
    return target_format(source, str(spec["format"]), options)


# ------------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True, kw_only=True)
class CutoverPlan:
    """What a cutover would do and cost, before anything moves.

    ``layout`` is the target's files (count, first names, rows per file), ``estimate`` the time per stage,
    bytes, requests, cost and peak extra storage, ``measured`` the speeds they come from, and
    ``compatibility`` whether the target can replace the source for its readers (``problems`` say why not).
    """

    dataset: str
    source: str
    alias: str
    destination: str
    operation: str
    format: str
    format_options: Mapping[str, Any]
    parameters: Mapping[str, Any]
    layout: Mapping[str, Any]
    estimate: Estimate | None
    measured: Measurements | None
    compatibility: Mapping[str, Any]
    prices: str
    notes: tuple[str, ...] = ()
    readiness: Mapping[str, Any] = field(default_factory=dict)
    """``dsm storage check`` of the destination, with the checks required and skipped."""
    policy: Mapping[str, Any] = field(default_factory=dict)
    """The data policy's verdict on the destination (``dsm.commands.policy.check_destination``)."""

    @property
    def ok(self) -> bool:
        return bool(self.compatibility.get("ok"))

    @property
    def problems(self) -> list[str]:
        return list(self.compatibility.get("problems") or [])

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "source": self.source,
            "alias": self.alias,
            "destination": self.destination,
            "operation": self.operation,
            "format": self.format,
            "format_options": dict(self.format_options),
            "parameters": dict(self.parameters),
            "layout": dict(self.layout),
            "estimate": self.estimate.to_dict() if self.estimate is not None else None,
            "measured": self.measured.to_dict() if self.measured is not None else None,
            "compatibility": dict(self.compatibility),
            "ok": self.ok,
            "prices": self.prices,
            "notes": list(self.notes),
            "readiness": dict(self.readiness),
            "policy": dict(self.policy),
        }


def _layout(spec: Mapping[str, Any], source: Contract, out_fmt: Any, storage_options: Any) -> Any:
    """The rewrite's own plan of the target files (deterministic, from the contract and the options)."""
    from dsm.commands.rewrite import estimate_rows_per_shard
    from dsm.formats import Format
    from dsm.rewrite.execute import source_format
    from dsm.rewrite.plan import parse_size, plan_rewrite

    rewrite = spec["rewrite"]
    rows_per_shard = rewrite.get("rows_per_shard")
    src_fmt = source_format(source)
    if rewrite.get("shard_size") is not None:
        src_loc = location(source.location, storage_options)
        rows_per_shard = estimate_rows_per_shard(
            source, src_loc, src_fmt, out_fmt, source.schema.to_arrow(), parse_size(rewrite["shard_size"])
        )
    return plan_rewrite(
        source,
        out_fmt,
        operation=str(spec["operation"]),
        parameters={},
        num_shards=rewrite.get("num_shards"),
        rows_per_shard=rows_per_shard,
        shuffle=bool(rewrite.get("shuffle")),
        seed=rewrite.get("seed"),
        splittable_source=type(src_fmt).fragment_count is not Format.fragment_count,
    )


def _dest_files(dest: Location) -> list[str]:
    from dsm.rewrite.journal import is_journal_path

    return [f.path for f in dest.list_files() if not is_journal_path(f.path)]


def compute_plan(
    spec: Mapping[str, Any],
    source: Contract,
    *,
    registry: Registry,
    storage_options: Mapping[str, Any] | None,
    workers: int | None,
) -> CutoverPlan:
    """Plan the cutover ``spec`` describes: layout, measured speeds, estimate and compatibility.

    Reads a sample of the source (a short ``dsm bench`` and about 8 MB of rows) and writes one temporary
    file to the destination, removed at once; nothing else is written.
    """
    from dsm.commands.bench import bench
    from dsm.commands.diff import compare_schemas
    from dsm.commands.storage_check import plan_readiness
    from dsm.cutover.sample import measure_sample

    prices = PriceTable.from_dict(spec["prices"], source=str(spec["prices"].get("source", "journal")))
    out_fmt = rewrite_format(spec, source)
    schema = source.schema.to_arrow()
    problems = [f"format {out_fmt.name} cannot hold field {p}" for p in out_fmt.unsupported(schema)]
    dest = location(str(spec["destination"]), storage_options)
    foreign = _dest_files(dest)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else "")
        problems.append(
            f"the destination {redact(dest.url)} is not empty ({shown}): a cutover writes into an "
            "empty folder"
        )
    ready = plan_readiness(
        str(spec["destination"]),
        schema=source.schema,
        skip=(spec.get("readiness") or {}).get("skip", ()),
        workers=workers,
        registry=registry,
        storage_options=storage_options,
    )
    problems += ready.problems
    changes = compare_schemas(source.schema, source.schema)  # the rewrite keeps the schema as it is
    breaking = [c.to_dict() for c in changes if c.breaking]
    if breaking and not spec.get("allow_breaking"):
        problems.append(
            "the target is not compatible for readers of the source: "
            + "; ".join(f"{c['field']}: {c['change']}" for c in breaking)
            + " (pass --allow-breaking to go on)"
        )
    classified = {f.name: f.classification for f in source.schema.fields if f.classification}
    compatibility = {
        "ok": not problems,
        "problems": problems,
        "verdict": "breaking" if breaking else ("compatible" if changes else "identical"),
        "changes": [c.to_dict() for c in changes],
        "unsupported": list(out_fmt.unsupported(schema)),
        "classifications_kept": classified,
    }
    layout: dict[str, Any] = {}
    measured: Measurements | None = None
    figures: Estimate | None = None
    notes: list[str] = []
    rewrite = spec["rewrite"]
    if not compatibility["unsupported"] and not ready.forbidden:
        plan = _layout(spec, source, out_fmt, storage_options)
        rows = [u.rows for u in plan.units]
        duration = float(spec.get("measure_seconds") or 1.0)
        report = bench(
            source,
            workers=1,
            duration=duration,
            mode="bytes",
            max_errors=None,
            storage_options=storage_options,
        )
        first = report.ref.results[0]
        speeds = measure_sample(
            source, out_fmt, dest, sample_bytes=SAMPLE_BYTES, storage_options=storage_options
        )
        measured = Measurements(
            read_bytes_per_s=first.bytes_per_s,
            sample_rows=speeds.rows,
            sample_source_bytes=speeds.source_bytes,
            sample_target_bytes=speeds.target_bytes,
            decode_seconds=speeds.decode_seconds,
            encode_seconds=speeds.encode_seconds,
            fingerprint_seconds=speeds.fingerprint_seconds,
            write_seconds=speeds.write_seconds,
            **destination_speeds(ready.report.throughput if ready.report is not None else None),
            bench={
                "workers": first.workers,
                "seconds": duration,
                "bytes_per_s": first.bytes_per_s,
                "requests": first.requests,
                "latency_p50_s": first.latency_s.p50,
                "latency_p99_s": first.latency_s.p99,
                "errors": first.errors,
            },
        )
        per_row = speeds.target_bytes / speeds.rows if speeds.rows else 0.0
        target_sizes = [int(r * per_row) for r in rows]
        figures = estimate(
            source_sizes=[s.bytes for s in source.shards],
            target_sizes=target_sizes,
            source_protocol=location(source.location, storage_options).protocol,
            target_protocol=dest.protocol,
            measured=measured,
            prices=prices,
            workers=workers or default_workers(),
            shuffle=bool(rewrite.get("shuffle")),
            shadow_seconds=float(spec["gates"]["shadow_duration"]),
            sample_rows=int(spec["gates"]["sample_rows"]),
            retain_seconds=float(spec["retain_seconds"]),
            delete_old=bool(spec["delete_old"]),
        )
        names = plan.paths
        layout = {
            "files": len(names),
            "names": names[:3] + (["...", names[-1]] if len(names) > 4 else names[3:]),
            "rows": sum(rows),
            "rows_per_file": {"min": min(rows, default=0), "max": max(rows, default=0)},
            "bytes_estimated": sum(target_sizes),
            "shuffle": bool(rewrite.get("shuffle")),
            "seed": rewrite.get("seed"),
        }
    elif ready.forbidden:
        notes.append(
            "no estimate: the data policy does not allow this data at the destination (no sample of it "
            "was written there)"
        )
    else:
        notes.append("no layout or estimate: the target format cannot hold the schema")
    return CutoverPlan(
        dataset=source.name,
        source=source.ref,
        alias=str(spec["alias"]),
        destination=str(spec["destination"]),
        operation=str(spec["operation"]),
        format=out_fmt.name,
        format_options=out_fmt.options(),
        parameters={k: v for k, v in rewrite.items() if v is not None},
        layout=layout,
        estimate=figures,
        measured=measured,
        compatibility=compatibility,
        prices=prices.source,
        notes=tuple(notes),
        readiness=ready.to_dict(),
        policy=ready.policy.to_dict(),
    )


def stage_plan(ctx: StageContext) -> dict[str, Any]:
    plan = compute_plan(
        ctx.spec,
        ctx.source(),
        registry=ctx.registry,
        storage_options=ctx.storage_options,
        workers=ctx.workers,
    )
    evidence = plan.to_dict()
    kill_point("plan")
    if not plan.ok:
        raise StageCheckFailed(f"plan of cutover {ctx.journal.id}: " + "; ".join(plan.problems), evidence)
    return evidence


# ------------------------------------------------------------------------------------------------- copy


@contextlib.contextmanager
def _crash_after_units(units: int | None) -> Iterator[None]:
    """Arm the rewrite's own crash hook for ``DSM_TEST_KILL_AT=copy:N`` (tests only)."""
    if units is None:
        yield
        return
    from dsm.rewrite.journal import CRASH_ENV

    before = os.environ.get(CRASH_ENV)
    os.environ[CRASH_ENV] = str(units)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CRASH_ENV, None)
        else:
            os.environ[CRASH_ENV] = before


def stage_copy(ctx: StageContext) -> dict[str, Any]:
    """The rewrite engine writes and registers the target; called again after a crash, it resumes."""
    from dsm.commands.rewrite import convert_format, reshard

    source = ctx.source()
    rewrite = dict(ctx.spec["rewrite"])
    common: dict[str, Any] = {
        "registry": StampingRegistry(ctx.registry, ctx.journal.id, ctx.storage_options),
        "workers": ctx.workers,
        "storage_options": ctx.storage_options,
        "progress": ctx.progress,
    }
    with _crash_after_units(copy_crash_units()):
        if ctx.spec["operation"] == "reshard":
            result = reshard(
                source, str(ctx.spec["destination"]), to=str(ctx.spec["format"]), **rewrite, **common
            )
        else:
            result = convert_format(
                source, str(ctx.spec["destination"]), to=str(ctx.spec["format"]), **rewrite, **common
            )
    target = result.contract
    return {
        "target": target.ref,
        "target_version": target.version,
        "location": target.location,
        "format": target.format,
        "shards": len(target.shards),
        "rows": target.total_rows,
        "bytes_copied": target.total_bytes,
        "units_written": result.units_written,
        "units_resumed": result.units_resumed,
        "already_published": result.already_published,
        "fingerprint_match": result.fingerprint_match,
        "checksums_digest": checksums_digest(target),
        "notes": list(result.notes),
    }


# ----------------------------------------------------------------------------------------------- verify


def stage_verify(ctx: StageContext) -> dict[str, Any]:
    """Deep verify of the target, its fingerprint against the source's, its lineage and its schema."""
    from dsm.commands.diff import compare_schemas
    from dsm.commands.verify import verify

    source, target = ctx.source(), ctx.target()
    report = verify(
        target,
        deep=True,
        registry=ctx.registry,
        workers=ctx.workers,
        storage_options=ctx.storage_options,
        progress=ctx.progress,
    )
    problems = [f"shard {s.path}: {s.status}: {s.detail}" for s in report.failures]
    if report.fingerprint_match is False:
        problems.append(f"the rows of {target.ref} do not add up to its contract's fingerprint")
    shuffled = bool(ctx.spec["rewrite"].get("shuffle"))
    src_fp, tgt_fp = source.fingerprint, target.fingerprint
    same_rows = bool(
        src_fp
        and tgt_fp
        and src_fp.rows == tgt_fp.rows
        and src_fp.unordered == tgt_fp.unordered
        and (shuffled or src_fp.ordered == tgt_fp.ordered)
    )
    if not same_rows:
        problems.append(f"the row fingerprint of {target.ref} differs from {source.ref}'s")
    stamped = target.lineage is not None and target.lineage.parameters.get("cutover") == ctx.journal.id
    if not stamped:
        problems.append(
            f"{target.ref} was not written by cutover {ctx.journal.id} (its lineage does not say so)"
        )
    changes = compare_schemas(source.schema, target.schema)
    breaking = [c for c in changes if c.breaking]
    if breaking and not ctx.spec.get("allow_breaking"):
        problems.append(
            "not compatible for readers of the source: "
            + "; ".join(f"{c.field}: {c.change}" for c in breaking)
            + " (pass --allow-breaking at start to accept it)"
        )
    target_fields = {f.name: f for f in target.schema.fields}
    lost = [
        f"{f.name} ({f.classification})"
        for f in source.schema.fields
        if f.classification
        and (f.name not in target_fields or target_fields[f.name].classification != f.classification)
    ]
    if lost:
        problems.append(f"classification tags were not kept on {', '.join(lost)}")
    evidence = {
        "target": target.ref,
        "verify": {
            "ok": report.ok,
            "summary": report.summary,
            "fingerprint_match": report.fingerprint_match,
            "failures": [s.to_dict() for s in report.failures],
            "notes": list(report.notes),
        },
        "fingerprint": {
            "source": src_fp.to_dict() if src_fp else None,
            "target": tgt_fp.to_dict() if tgt_fp else None,
            "same_rows": same_rows,
            "compared": "rows, unordered" + ("" if shuffled else ", ordered"),
        },
        "lineage_cutover": stamped,
        "compatibility": {
            "verdict": "breaking" if breaking else ("compatible" if changes else "identical"),
            "changes": [c.to_dict() for c in changes],
        },
        "classifications_lost": lost,
        "checksums_digest": checksums_digest(target),
        "shards": len(target.shards),
        "bytes": target.total_bytes,
    }
    kill_point("verify")
    if problems:
        shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        raise StageCheckFailed(f"verify of {target.ref} failed: {shown}; the alias was not moved", evidence)
    return evidence


# ----------------------------------------------------------------------------------------------- shadow


def stage_shadow(ctx: StageContext) -> dict[str, Any]:
    """Old against new through ``dsm bench --compare``, and a sample of rows compared value by value."""
    from dsm.commands.bench import bench
    from dsm.cutover.sample import compare_sample

    source, target = ctx.source(), ctx.target()
    gates = ctx.spec["gates"]
    report = bench(
        source,
        compare=target,
        workers=list(gates["shadow_workers"]),
        duration=float(gates["shadow_duration"]),
        mode="decode",
        max_regression=gates.get("max_regression"),
        max_p99=gates.get("max_p99"),
        min_throughput=gates.get("min_throughput"),
        max_errors=0,
        registry=ctx.registry,
        storage_options=ctx.storage_options,
    )
    problems = [
        f"gate {g.name} on {g.dataset} at {g.workers} workers: measured {g.measured}, limit {g.threshold}"
        for g in report.failed_gates
    ]
    rows = int(gates["sample_rows"])
    sample = None
    if rows > 0:
        seed = ctx.spec["rewrite"].get("seed") if ctx.spec["rewrite"].get("shuffle") else None
        sample = compare_sample(
            source, target, rows=rows, shuffle_seed=seed, storage_options=ctx.storage_options
        )
        if not sample.ok:
            first = sample.examples[0] if sample.examples else None
            problems.append(
                f"{sample.mismatches} of {sample.rows_compared} sampled rows differ"
                + (f" (first: row {first.row}, {first.detail})" if first else "")
            )
    metric = report.metric
    comparison = [
        c.to_dict() for c in report.comparison if c.metric in (metric, "latency_p99_s", "bytes_per_s")
    ]
    evidence = {
        "bench": {
            "passed": report.passed,
            "mode": report.mode,
            "metric": metric,
            "seconds": float(gates["shadow_duration"]),
            "comparison": comparison,
            "gates": [g.to_dict() for g in report.gates],
        },
        "sample": sample.to_dict() if sample is not None else None,
    }
    kill_point("shadow")
    if problems:
        raise StageCheckFailed(
            f"shadow of {target.ref} against {source.ref} failed: " + "; ".join(problems), evidence
        )
    return evidence


# ----------------------------------------------------------------------------------------------- switch


def _old_verifies(ctx: StageContext, source: Contract) -> tuple[bool, dict[str, Any]]:
    """Whether every file of ``source``'s contract still has its size and checksum (what rollback needs).

    Files at its location that the contract does not list (``extra``) are reported but do not count:
    readers of the old version never read them."""
    from dsm.commands.verify import verify

    report = verify(
        source,
        registry=ctx.registry,
        workers=ctx.workers,
        storage_options=ctx.storage_options,
        progress=ctx.progress,
    )
    failures = [s for s in report.failures if s.status != "extra"]
    return not failures, {
        "dataset": source.ref,
        "ok": not failures,
        "summary": report.summary,
        "failures": [s.to_dict() for s in failures[:20]],
        "extra_files": [s.path for s in report.failures if s.status == "extra"][:20],
    }


def stage_switch(ctx: StageContext) -> dict[str, Any]:
    """Move the alias from the source to the target atomically, once rollback is known to be possible."""
    source = ctx.source()
    target_version = ctx.target_version()
    name, alias = ctx.name, ctx.alias
    current = ctx.registry.aliases(name).get(alias)
    ok, old_check = _old_verifies(ctx, source)
    evidence: dict[str, Any] = {
        "alias": f"{name}@{alias}",
        "from": ctx.source_version,
        "to": target_version,
        "rollback_check": {"old_verifies": old_check, "alias_was": current},
    }
    if current == target_version:
        evidence.update(moved=False, note="the alias already pointed at the target: a previous run moved it")
        if not ok:
            evidence["note"] += f"; {source.ref} no longer verifies, so a rollback would not be safe"
        return evidence
    if current != ctx.source_version:
        raise InputError(
            f"{name}@{alias} points at {current}, not at {source.ref} where this cutover found it: someone "
            f"moved it meanwhile. Nothing was changed; roll back cutover {ctx.journal.id} (`dsm cutover "
            f"rollback {ctx.journal.id}`) or move the alias back to {ctx.source_version}"
        )
    if not ok:
        shown = "; ".join(f"shard {f['path']}: {f['status']}" for f in old_check["failures"][:5])
        raise StageCheckFailed(
            f"rollback would not be possible: {source.ref} no longer verifies ({shown}); "
            "the alias was not moved",
            evidence,
        )
    ctx.lease.confirm()
    move = ctx.registry.set_alias(name, alias, target_version, if_points_to=ctx.source_version)
    kill_point("switch")
    evidence.update(moved=True, previous=move.previous, atomic=move.atomic)
    if not move.atomic:
        ctx.notes.append("the registry's store has no conditional writes: the alias move was not atomic")
    return evidence


# --------------------------------------------------------------------------------------------- complete


def _shared_with_others(registry: Registry, old: Contract) -> list[str]:
    """Versions (of any dataset) other than ``old``, not retired, that list one of its files."""
    paths = {s.path for s in old.shards}
    found = []
    for name in registry.names():
        for version in registry.versions(name):
            if name == old.name and version == old.version:
                continue
            other = registry.get(name, version)
            if other.status == "retired" or other.location != old.location:
                continue
            if paths & {s.path for s in other.shards}:
                found.append(other.ref)
    return found


def delete_old_data(ctx: StageContext, old: Contract) -> dict[str, Any]:
    """Delete the files ``old``'s contract lists (never the folder, never other files) once no alias
    points at it and no other version lists them; mark it retired first so no alias can move to it."""
    reg, name = ctx.registry, ctx.name
    status = reg.statuses(name).get(old.version or 0)
    ours = status is not None and status.status == "retired" and status.by == ctx.journal.id
    if not ours:
        pointing = sorted(a for a, v in reg.aliases(name).items() if v == old.version)
        if pointing:
            raise StageCheckFailed(
                f"{old.ref} is still the version of alias(es) {', '.join(pointing)}: its data is never "
                "deleted while an alias points to it; move them, then `dsm cutover resume` again",
                {"aliases_pointing": pointing},
            )
        shared = _shared_with_others(reg, old)
        if shared:
            raise StageCheckFailed(
                f"files of {old.ref} are also listed by {', '.join(shared[:5])}: they are not deleted; "
                "retire those versions first, or complete without --delete-old",
                {"shared_with": shared},
            )
        reg.set_status(
            name,
            old.version or 0,
            "retired",
            reason=f"data deleted by cutover {ctx.journal.id}",
            by=ctx.journal.id,
        )
        pointing = sorted(a for a, v in reg.aliases(name).items() if v == old.version)
        if pointing:  # an alias moved to it between the check and the status: put it back, delete nothing
            reg.set_status(
                name,
                old.version or 0,
                "deprecated",
                reason=f"superseded (cutover {ctx.journal.id}); deletion refused: alias {pointing[0]} "
                "points here",
                by=ctx.journal.id,
            )
            raise InputError(
                f"alias {pointing[0]} was moved to {old.ref} meanwhile: its data was not deleted"
            )
    loc = location(old.location, ctx.storage_options)
    removed = missing = removed_bytes = 0
    for shard in old.shards:
        if loc.exists(shard.path):
            loc.remove(shard.path)
            removed += 1
            removed_bytes += shard.bytes
        else:
            missing += 1
    return {
        "location": old.location,
        "files_removed": removed,
        "bytes_removed": removed_bytes,
        "files_already_gone": missing,
        "folder_kept": True,
    }


def stage_complete(ctx: StageContext) -> dict[str, Any]:
    """Mark the old version deprecated (and, with ``delete_old``, delete its files)."""
    reg, name, alias = ctx.registry, ctx.name, ctx.alias
    target_version = ctx.target_version()
    current = reg.aliases(name).get(alias)
    if current != target_version:
        raise InputError(
            f"{name}@{alias} points at {current}, not at the target {name}@{target_version}: completing "
            "would "
            f"deprecate what readers use. Roll back cutover {ctx.journal.id}, or move the alias back to "
            f"{target_version}"
        )
    old = ctx.source()
    status = reg.statuses(name).get(ctx.source_version)
    if status is None or status.status not in ("deprecated", "retired"):
        reg.set_status(
            name,
            ctx.source_version,
            "deprecated",
            reason=f"superseded by {name}@{target_version} (cutover {ctx.journal.id})",
            by=ctx.journal.id,
        )
    evidence: dict[str, Any] = {"deprecated": old.ref, "superseded_by": f"{name}@{target_version}"}
    if ctx.spec.get("delete_old"):
        evidence["deleted"] = delete_old_data(ctx, old)
    else:
        evidence["deleted"] = None
        evidence["note"] = f"the data of {old.ref} is kept at {old.location} (no --delete-old)"
    kill_point("complete")
    return evidence


STAGE_FUNCTIONS = {
    "plan": stage_plan,
    "copy": stage_copy,
    "verify": stage_verify,
    "shadow": stage_shadow,
    "switch": stage_switch,
    "complete": stage_complete,
}


# --------------------------------------------------------------------------------------------- rollback


def discard_target(ctx: StageContext, target_version: int | None) -> dict[str, Any]:
    """Delete what the cutover's copy wrote at the destination: the target's files (those its contract
    lists, or the rewrite's planned outputs if it never registered), the rewrite's journal, and
    temporary files of those names. Never other files, never the folder. The target version is marked
    retired first; refused while an alias points at it."""
    from dsm.rewrite.journal import JOURNAL_DIR, JOURNAL_FILE, Journal, remove_temporaries

    reg, name = ctx.registry, ctx.name
    dest = location(str(ctx.spec["destination"]), ctx.storage_options)
    files: set[str] = set()
    if target_version is not None:
        pointing = sorted(a for a, v in reg.aliases(name).items() if v == target_version)
        if pointing:
            raise InputError(
                f"{name}@{target_version} is the version of alias(es) {', '.join(pointing)}: its files are "
                "not "
                "discarded while an alias points to it"
            )
        target = reg.get(name, target_version)
        files |= {s.path for s in target.shards}
        if target.status != "retired":
            reg.set_status(
                name,
                target_version,
                "retired",
                reason=f"data discarded by the rollback of cutover {ctx.journal.id}",
                by=ctx.journal.id,
            )
    header = Journal.read_header(dest)
    if header is not None:
        files |= {str(p) for p in header.get("outputs") or []}
    removed = removed_bytes = 0
    for path in sorted(files):
        if dest.exists(path):
            removed_bytes += dest.size(path)
            dest.remove(path)
            removed += 1
    journal_files = [f"{JOURNAL_DIR}/{f.path}" for f in dest.child(JOURNAL_DIR).list_files()]
    if header is not None:
        journal_files.append(JOURNAL_FILE)
    for path in journal_files:
        if dest.exists(path):
            dest.remove(path)
    temporaries = remove_temporaries(dest, files) + _remove_plan_samples(dest)
    return {
        "location": redact(dest.url),
        "files_removed": removed,
        "bytes_removed": removed_bytes,
        "journal_files_removed": len(journal_files),
        "temporaries_removed": temporaries,
        "target_retired": target_version is not None,
        "folder_kept": True,
    }


def _remove_plan_samples(dest: Location) -> int:
    if not dest.exists():
        return 0
    removed = 0
    for full in dest.fs.find(dest.root, withdirs=False, maxdepth=1):
        base = posixpath.basename(full)
        if base.startswith(TEMP_MARKER) and base.endswith("-" + PLAN_SAMPLE_NAME):
            dest.fs.rm(full)
            removed += 1
    return removed


def restore_alias(ctx: StageContext, state: CutoverState) -> dict[str, Any]:
    """Point the alias back at the source version if the cutover moved it (atomically, from the target)."""
    name, alias = ctx.name, ctx.alias
    current = ctx.registry.aliases(name).get(alias)
    if current == ctx.source_version:
        return {"alias": f"{name}@{alias}", "moved": False, "points_at": current}
    target = state.target_version
    if target is None or current != target:
        raise InputError(
            f"{name}@{alias} points at {current}, neither the old version {ctx.source_version} nor this "
            f"cutover's target {target}: someone moved it; nothing was changed"
        )
    ctx.lease.confirm()
    move = ctx.registry.set_alias(name, alias, ctx.source_version, if_points_to=target)
    kill_point("rollback")
    return {
        "alias": f"{name}@{alias}",
        "moved": True,
        "from": target,
        "to": ctx.source_version,
        "atomic": move.atomic,
    }


def old_version_check(ctx: StageContext) -> tuple[bool, dict[str, Any]]:
    """Whether the source version still verifies (bytes), and the evidence."""
    return _old_verifies(ctx, ctx.source())
