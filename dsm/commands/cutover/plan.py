"""The plan of a cutover, before anything moves: the target's files (the rewrite's own plan), measured
speeds (a short ``dsm bench`` of the source and a sample written to the destination), the estimate of time,
bytes, requests, cost and peak storage, and whether the target can replace the source for its readers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsm.commands.cutover.estimate import Estimate, Measurements, destination_speeds, estimate
from dsm.commands.cutover.spec import CutoverSpec
from dsm.commands.cutover.speed import measure_sample
from dsm.commands.policy import PolicyCheck, check_destination
from dsm.commands.storage_check import DEFAULT_REQUIRED, ReadinessReport, resolve_checks, storage_check
from dsm.contract import Contract
from dsm.engine import default_workers
from dsm.formats import Format
from dsm.policy import classified_fields, read_policy
from dsm.registry import Registry
from dsm.rewrite.execute import source_format
from dsm.rewrite.journal import is_journal_path
from dsm.rewrite.plan import RewritePlan, plan_rewrite
from dsm.rewrite.spec import estimate_rows_per_shard
from dsm.storage import Location, location, redact
from dsm.units import parse_size

__all__ = ["SAMPLE_BYTES", "CutoverPlan", "PlanReadiness", "compute_plan", "plan_readiness"]

SAMPLE_BYTES = 8 << 20
"""Stored source bytes the plan decodes, encodes and writes to measure the copy's speeds."""


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


PLAN_PROBE_OBJECTS = 4
PLAN_PROBE_SIZE = 1 << 20
"""The throughput probe a cutover plan runs on its destination: small, the plan takes about a second."""


@dataclass(frozen=True, kw_only=True)
class PlanReadiness:
    """What a cutover plan learns about its destination: the readiness report (None when the data policy
    forbids the location: then nothing is written there, not even a scratch object), the checks required
    (``permissions`` and ``consistency``, and what the policy's rules need), those skipped, the policy's
    verdict, and the problems that stop the cutover at plan. ``forbidden`` is True when a policy rule is
    broken: the plan then writes no sample of the data there either."""

    report: ReadinessReport | None
    required: tuple[str, ...]
    skipped: tuple[str, ...]
    policy: PolicyCheck
    problems: tuple[str, ...]

    @property
    def forbidden(self) -> bool:
        return not self.policy.ok

    def to_dict(self) -> dict[str, Any]:
        return {
            **(self.report.to_dict() if self.report is not None else {"checks": []}),
            "required": list(self.required),
            "skipped": list(self.skipped),
            "problems": list(self.problems),
        }


def plan_readiness(
    url: str,
    *,
    schema: Any,
    skip: Sequence[str] = (),
    workers: int | None = None,
    registry: Registry,
    storage_options: Mapping[str, Any] | None = None,
) -> PlanReadiness:
    """Run every readiness check on a cutover's destination ``url`` (a small throughput probe) and judge
    it: a required check that does not pass is a problem unless ``skip`` names it; the data policy's
    rules for ``schema``'s classifications are judged from the same answers (skipping does not lift a
    policy rule). A location the policy does not allow is not written to at all."""
    reg = registry
    skipped = resolve_checks(skip, what="--skip-readiness")
    policy = read_policy(reg.location)
    classified = classified_fields(schema)
    needs = policy.storage_requirements(classified) if policy is not None else {}
    required = tuple(
        c for c in resolve_checks([*DEFAULT_REQUIRED, *needs], what="required check") if c not in skipped
    )
    if policy is not None and classified:
        refused = policy.location_violations(classified, url, storage_options)
        if refused:
            verdict = PolicyCheck(
                url=redact(url), policy=policy.source, classified=classified, violations=tuple(refused)
            )
            return PlanReadiness(
                report=None,
                required=required,
                skipped=skipped,
                policy=verdict,
                problems=tuple(v.message for v in refused),
            )
    report = storage_check(
        url,
        require=list(needs),
        skip=skipped,
        objects=PLAN_PROBE_OBJECTS,
        object_size=PLAN_PROBE_SIZE,
        workers=max(1, min(4, workers or 4)),
        storage_options=storage_options,
    )
    problems = [
        f"readiness check {c.name} of {redact(url)}: {c.status}: {c.detail} "
        f"(--skip-readiness {c.name} to go on)"
        for c in report.checks
        if c.name in required and c.status != "pass"
    ]
    verdict = check_destination(schema, url, readiness=report, registry=reg, storage_options=storage_options)
    problems += [v.message for v in verdict.violations]
    return PlanReadiness(
        report=report, required=required, skipped=skipped, policy=verdict, problems=tuple(problems)
    )


def _layout(spec: CutoverSpec, source: Contract, out_fmt: Format, storage_options: Any) -> RewritePlan:
    """The rewrite's own plan of the target files (deterministic, from the contract and the options)."""
    rewrite = spec.rewrite
    rows_per_shard = rewrite.rows_per_shard
    src_fmt = source_format(source)
    if rewrite.shard_size is not None:
        src_loc = location(source.location, storage_options)
        rows_per_shard = estimate_rows_per_shard(
            source, src_loc, src_fmt, out_fmt, source.schema.to_arrow(), parse_size(rewrite.shard_size)
        )
    return plan_rewrite(
        source,
        out_fmt,
        operation=spec.operation,
        parameters={},
        num_shards=rewrite.num_shards,
        rows_per_shard=rows_per_shard,
        shuffle=rewrite.shuffle,
        seed=rewrite.seed,
        splittable_source=type(src_fmt).fragment_count is not Format.fragment_count,
    )


def _dest_files(dest: Location) -> list[str]:
    return [f.path for f in dest.list_files() if not is_journal_path(f.path)]


def compute_plan(
    spec: CutoverSpec,
    source: Contract,
    *,
    registry: Registry,
    storage_options: Mapping[str, Any] | None,
    workers: int | None,
) -> CutoverPlan:
    """Plan the cutover ``spec`` describes: layout, measured speeds, estimate and compatibility.

    Runs ``dsm storage check`` on the destination (its scratch objects removed), reads a sample of the
    source (a short ``dsm bench`` and about 8 MB of rows) and writes one temporary file to the
    destination, removed at once; nothing else is written. A destination the data policy does not allow
    gets nothing written to it.
    """
    from dsm.commands.bench import bench
    from dsm.validators import compatibility as rules

    prices = spec.price_table()
    out_fmt = spec.rewrite.target_format(source)
    schema = source.schema.to_arrow()
    problems = [f"format {out_fmt.name} cannot hold field {p}" for p in out_fmt.unsupported(schema)]
    dest = location(spec.destination, storage_options)
    foreign = _dest_files(dest)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else "")
        problems.append(
            f"the destination {redact(dest.url)} is not empty ({shown}): a cutover writes into an "
            "empty folder"
        )
    ready = plan_readiness(
        spec.destination,
        schema=source.schema,
        skip=spec.skip_readiness,
        workers=workers,
        registry=registry,
        storage_options=storage_options,
    )
    problems += ready.problems
    changes = rules.compare_schemas(source.schema, source.schema)  # the rewrite keeps the schema as it is
    breaking = [c.to_dict() for c in changes if c.breaking]
    if breaking and not spec.allow_breaking:
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
    rewrite = spec.rewrite
    if not compatibility["unsupported"] and not ready.forbidden:
        plan = _layout(spec, source, out_fmt, storage_options)
        rows = [u.rows for u in plan.units]
        duration = spec.measure_seconds
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
            shuffle=rewrite.shuffle,
            shadow_seconds=spec.gates.shadow_duration,
            sample_rows=spec.gates.sample_rows,
            retain_seconds=spec.retain_seconds,
            delete_old=spec.delete_old,
        )
        names = plan.paths
        layout = {
            "files": len(names),
            "names": names[:3] + (["...", names[-1]] if len(names) > 4 else names[3:]),
            "rows": sum(rows),
            "rows_per_file": {"min": min(rows, default=0), "max": max(rows, default=0)},
            "bytes_estimated": sum(target_sizes),
            "shuffle": rewrite.shuffle,
            "seed": rewrite.seed,
        }
    elif ready.forbidden:
        notes.append(
            "no estimate: the data policy does not allow this data at the destination (no sample of it was "
            "written there)"
        )
    else:
        notes.append("no layout or estimate: the target format cannot hold the schema")
    return CutoverPlan(
        dataset=source.name,
        source=source.ref,
        alias=spec.alias,
        destination=spec.destination,
        operation=spec.operation,
        format=out_fmt.name,
        format_options=out_fmt.options(),
        parameters={k: v for k, v in rewrite.to_dict().items() if v is not None},
        layout=layout,
        estimate=figures,
        measured=measured,
        compatibility=compatibility,
        prices=prices.source,
        notes=tuple(notes),
        readiness=ready.to_dict(),
        policy=ready.policy.to_dict(),
    )
