"""The stages of ``dsm cutover`` (plan, copy, verify, shadow, switch, complete) and rollback's steps.

Each stage function takes the run's :class:`StageContext`, does its work, and returns the evidence its
``stage_finished`` record keeps; a check that does not hold raises :class:`StageCheckFailed` carrying the
evidence gathered so far. Every stage is idempotent: run again after a crash, it continues (the rewrite
resumes from its own journal) or finds its work done (the alias already moved, the status already set).
The runner is :mod:`dsm.commands.cutover.runner`; the plan stage's figures come from
:mod:`dsm.commands.cutover.plan`.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsm._testing import kill_point
from dsm.commands.cutover.deletion import guarded_deletion
from dsm.commands.cutover.journal import CutoverJournal
from dsm.commands.cutover.lease import Lease
from dsm.commands.cutover.plan import compute_plan
from dsm.commands.cutover.spec import CutoverSpec
from dsm.commands.cutover.speed import PLAN_SAMPLE_NAME
from dsm.commands.cutover.state import CutoverState
from dsm.contract import Contract
from dsm.engine import Executor, Progress
from dsm.errors import InputError, StageCheckFailed
from dsm.registry import Registry
from dsm.rewrite.journal import JOURNAL_DIR, JOURNAL_FILE, DestinationClaim, Journal, remove_temporaries
from dsm.storage import Location, is_temporary, location, redact

SHADOW_REPORT = "shadow-bench.html"
"""The shadow stage's ``dsm bench --compare`` HTML report, in the cutover's folder of the registry."""

__all__ = [
    "SHADOW_REPORT",
    "STAGE_FUNCTIONS",
    "StageContext",
    "checksums_digest",
    "delete_old_data",
    "discard_target",
    "old_version_check",
    "restore_alias",
]


@dataclass(kw_only=True)
class StageContext:
    """What every stage of one run needs."""

    registry: Registry
    journal: CutoverJournal
    lease: Lease
    spec: CutoverSpec
    storage_options: Mapping[str, Any] | None
    workers: int | None
    progress: Progress | None
    state: CutoverState | None = None
    notes: list[str] = field(default_factory=list)
    engine: Executor | None = None
    """Where the copy's and the verifies' units run (None: this machine)."""

    @property
    def name(self) -> str:
        return self.spec.dataset

    @property
    def alias(self) -> str:
        return self.spec.alias

    @property
    def source_version(self) -> int:
        return self.spec.source_version

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


# ------------------------------------------------------------------------------------------------- plan


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


def stage_copy(ctx: StageContext) -> dict[str, Any]:
    """The rewrite engine writes and registers the target, its lineage naming the cutover; called again
    after a crash, it resumes (a test's ``copy:N`` crash point fires in the rewrite's journal)."""
    from dsm.commands.rewrite import rewrite

    result = rewrite(
        ctx.source(),
        ctx.spec.destination,
        ctx.spec.rewrite,
        lineage={"cutover": ctx.journal.id},
        registry=ctx.registry,
        workers=ctx.workers,
        engine=ctx.engine,
        storage_options=ctx.storage_options,
        progress=ctx.progress,
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
        "engine": result.engine.to_dict() if result.engine is not None else None,
    }


# ----------------------------------------------------------------------------------------------- verify


def stage_verify(ctx: StageContext) -> dict[str, Any]:
    """Deep verify of the target, its fingerprint against the source's, its lineage and its schema."""
    from dsm.commands.verify import verify
    from dsm.validators import compatibility as rules

    source, target = ctx.source(), ctx.target()
    report = verify(
        target,
        deep=True,
        registry=ctx.registry,
        workers=ctx.workers,
        engine=ctx.engine,
        storage_options=ctx.storage_options,
        progress=ctx.progress,
    )
    problems = [f"shard {s.path}: {s.status}: {s.detail}" for s in report.failures]
    if report.fingerprint_match is False:
        problems.append(f"the rows of {target.ref} do not add up to its contract's fingerprint")
    shuffled = ctx.spec.rewrite.shuffle
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
    changes = rules.compare_schemas(source.schema, target.schema)
    breaking = [c for c in changes if c.breaking]
    if breaking and not ctx.spec.allow_breaking:
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
        "engine": report.engine.to_dict() if report.engine is not None else None,
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
    from dsm.commands.cutover.shadow import compare_sample

    source, target = ctx.source(), ctx.target()
    gates = ctx.spec.gates
    report = bench(
        source,
        compare=target,
        workers=list(gates.shadow_workers),
        duration=gates.shadow_duration,
        mode="decode",
        max_regression=gates.max_regression,
        max_p99=gates.max_p99,
        min_throughput=gates.min_throughput,
        max_errors=0,
        # The whole report beside the journal (the evidence keeps its figures): what `dsm serve` shows.
        output=ctx.journal.loc.url_of(SHADOW_REPORT),
        registry=ctx.registry,
        storage_options=ctx.storage_options,
    )
    problems = [
        f"gate {g.name} on {g.dataset} at {g.workers} workers: measured {g.measured}, limit {g.threshold}"
        for g in report.failed_gates
    ]
    rows = gates.sample_rows
    sample = None
    if rows > 0:
        seed = ctx.spec.rewrite.seed if ctx.spec.rewrite.shuffle else None
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
            "report": SHADOW_REPORT,
            "passed": report.passed,
            "mode": report.mode,
            "metric": metric,
            "seconds": gates.shadow_duration,
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
        engine=ctx.engine,
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


def delete_old_data(ctx: StageContext, old: Contract) -> dict[str, Any]:
    """Delete the files ``old``'s contract lists (never the folder, never other files) once no alias
    points at it; mark it retired first so no alias can move to it. A file another version of any dataset
    lists, compared by canonical location, is kept (and said so), as is one that changed (size, store
    checksum or bytes: :func:`guarded_deletion`)."""
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
    deletable, kept, by_size = guarded_deletion(
        reg, loc, [s.path for s in old.shards], owner=old, storage_options=ctx.storage_options
    )
    removed_bytes = 0
    for path, size in deletable:
        loc.remove(path)
        removed_bytes += size
    gone = len(old.shards) - len(deletable) - len(kept)
    if kept:
        ctx.notes.append(
            f"{len(kept)} file(s) of {old.ref} were kept: another version lists them, or they changed "
            f"(first: {kept[0]['path']}, {kept[0]['reason']})"
        )
    if by_size:
        ctx.notes.append(
            f"{len(by_size)} deleted file(s) of {old.ref} were compared with the contract by size alone: the "
            "store keeps no checksum the contract recorded (first: " + by_size[0] + ")"
        )
    return {
        "location": old.location,
        "files_removed": len(deletable),
        "bytes_removed": removed_bytes,
        "files_already_gone": gone,
        "files_kept": kept[:100],
        "files_kept_count": len(kept),
        "files_compared_by_size_only": len(by_size),
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
    if ctx.spec.delete_old:
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
    reg, name = ctx.registry, ctx.name
    dest = location(ctx.spec.destination, ctx.storage_options)
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
    # Nobody else writes the destination while its files go: another rewrite there gets "busy" (exit 3),
    # and a claim its copy left when it died is stale (DestinationClaim), then removed with the journal.
    with DestinationClaim(dest).take() if dest.exists() else contextlib.nullcontext():
        header = Journal.read_header(dest)
        if header is not None:
            files |= {str(p) for p in header.get("outputs") or []}
        owner = reg.get(name, target_version) if target_version is not None else None
        deletable, kept, _ = guarded_deletion(
            reg, dest, files, owner=owner, storage_options=ctx.storage_options, content=False
        )
        removed_bytes = 0
        for path, size in deletable:
            dest.remove(path)
            removed_bytes += size
        removed = len(deletable)
        journal_files = [f"{JOURNAL_DIR}/{f.path}" for f in dest.child(JOURNAL_DIR).list_files()]
        if header is not None:
            journal_files.append(JOURNAL_FILE)
        for path in journal_files:
            if dest.exists(path):
                dest.remove(path)
        temporaries = remove_temporaries(dest, files) + _remove_plan_samples(dest)
    if kept:
        ctx.notes.append(
            f"{len(kept)} file(s) at {redact(dest.url)} were kept: another version lists them, or they "
            f"changed (first: {kept[0]['path']}, {kept[0]['reason']})"
        )
    return {
        "location": redact(dest.url),
        "files_removed": removed,
        "bytes_removed": removed_bytes,
        "journal_files_removed": len(journal_files),
        "temporaries_removed": temporaries,
        "files_kept": kept[:100],
        "files_kept_count": len(kept),
        "target_retired": target_version is not None,
        "folder_kept": True,
    }


def _remove_plan_samples(dest: Location) -> int:
    if not dest.exists():
        return 0
    removed = 0
    for info in dest.list_files(recursive=False, temporary=True):
        if is_temporary(info.path) and info.path.endswith("-" + PLAN_SAMPLE_NAME):
            dest.remove(info.path)
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
