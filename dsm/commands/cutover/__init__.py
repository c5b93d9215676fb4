"""``dsm cutover``: move a dataset and its alias to a new location or format, in stages, with evidence.

A cutover moves ``NAME@ALIAS`` from the version it points at (the source) to a copy written elsewhere (the
target), through six stages that each leave evidence in an append-only journal in the registry:

``plan``      the target layout; bytes, requests, time and cost estimated from measured speeds; peak extra
              storage; compatibility (the format holds the schema, classification tags are kept)
``copy``      the rewrite engine writes the target and registers it as a new version (resumable)
``verify``    deep verify of the target; its row fingerprint equals the source's; lineage names the cutover
``shadow``    ``dsm bench --compare`` old against new with gates, and sampled rows compared value by value
``switch``    the alias moves atomically from source to target, once rollback is known to be possible
``complete``  after the retain period, the source is marked deprecated (and its files deleted on request)

One process at a time runs a cutover (a lease with a heartbeat); a killed run is resumed with
:func:`resume_cutover`, each stage continuing or finding its work done. Until ``complete`` starts,
:func:`rollback_cutover` puts the alias back on the untouched source. See docs/cutover.md.

This module is the API (the seven functions, and :func:`shadow_report`, the shadow stage's bench report);
the parts are :mod:`~dsm.commands.cutover.spec` (what the cutover does: the journal's ``created`` record),
:mod:`~dsm.commands.cutover.runner` (lease, stages in order, hooks, reports),
:mod:`~dsm.commands.cutover.stages`, :mod:`~dsm.commands.cutover.plan`,
:mod:`~dsm.commands.cutover.state`, :mod:`~dsm.commands.cutover.journal`, :mod:`~dsm.commands.cutover.lease`,
:mod:`~dsm.commands.cutover.prices`, :mod:`~dsm.commands.cutover.estimate`,
:mod:`~dsm.commands.cutover.speed` and :mod:`~dsm.commands.cutover.shadow`.

>>> report = start_cutover("web-text@prod", to="s3://new-bucket/web-text/", format="parquet",
...                        run=True, retain="7d")  # doctest: +SKIP
>>> report.state.phase, report.stopped  # doctest: +SKIP
('paused', 'waiting for the retain period: complete runs from 2026-12-07T10:00:00.000Z')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsm.commands.cutover.lease import DEFAULT_LEASE_SECONDS
from dsm.commands.cutover.plan import CutoverPlan, compute_plan
from dsm.commands.cutover.runner import (
    HOOK_ENV,
    CutoverReport,
    PlanVsActual,
    cutover_ids,
    find_cutover,
    journal_of,
    new_cutover_id,
    record_failure,
    report,
    run_stages,
    with_lease,
)
from dsm.commands.cutover.spec import CutoverSpec
from dsm.commands.cutover.stages import SHADOW_REPORT, StageContext, old_version_check, restore_alias
from dsm.commands.cutover.stages import discard_target as discard_target_files
from dsm.commands.cutover.state import stage_index
from dsm.engine import Executor, Progress
from dsm.errors import DatasetNotFound, InputError, StageCheckFailed
from dsm.registry import Registry, open_registry, parse_reference
from dsm.storage import redact

__all__ = [
    "HOOK_ENV",
    "CutoverPlan",
    "CutoverReport",
    "CutoverSpec",
    "PlanVsActual",
    "cutover_status",
    "list_cutovers",
    "plan_cutover",
    "resume_cutover",
    "rollback_cutover",
    "run_cutover",
    "shadow_report",
    "start_cutover",
]


def plan_cutover(
    ref: str,
    *,
    to: str,
    format: str | None = None,
    num_shards: int | None = None,
    shard_size: int | str | None = None,
    rows_per_shard: int | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    compression: str | None = None,
    compression_level: int | None = None,
    row_group_size: int | None = None,
    format_options: Mapping[str, Any] | None = None,
    alias: str | None = None,
    prices: str | None = None,
    retain: str | float = "7d",
    delete_old: bool = False,
    sample_rows: int = 1000,
    shadow_duration: float = 2.0,
    allow_breaking: bool = False,
    measure_seconds: float = 1.0,
    skip_readiness: Sequence[str] = (),
    workers: int | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> CutoverPlan:
    """What :func:`start_cutover` with these options would do and cost, without starting anything.

    Measures a short read of the source and a sample of rows written to the destination (one temporary
    file, removed), and runs ``dsm storage check`` on the destination (its scratch objects removed);
    ``plan.ok`` is False, with ``plan.problems`` saying why, when the cutover would stop at its plan stage
    (the format cannot hold the schema, the destination is not empty, a breaking change, a required
    readiness check not in ``skip_readiness`` that did not pass, a data policy rule broken).

    >>> plan = plan_cutover("web-text@prod", to="s3://new/web-text/", format="parquet")  # doctest: +SKIP
    >>> plan.estimate.total_seconds, plan.estimate.total_cost  # doctest: +SKIP
    (5400.0, 212.5)
    """
    reg = open_registry(registry, storage_options)
    spec, source = CutoverSpec.build(
        reg,
        ref,
        destination=to,
        format=format,
        rewrite={
            "num_shards": num_shards,
            "shard_size": shard_size,
            "rows_per_shard": rows_per_shard,
            "shuffle": shuffle,
            "seed": seed,
            "compression": compression,
            "compression_level": compression_level,
            "row_group_size": row_group_size,
            "format_options": format_options,
        },
        alias=alias,
        prices=prices,
        retain=retain,
        delete_old=delete_old,
        postpone_switch=False,
        on_stage=(),
        gates={
            "max_regression": None,
            "max_p99": None,
            "min_throughput": None,
            "sample_rows": sample_rows,
            "shadow_duration": shadow_duration,
            "shadow_workers": 1,
        },
        allow_breaking=allow_breaking,
        measure_seconds=measure_seconds,
        skip_readiness=skip_readiness,
        storage_options=storage_options,
    )
    return compute_plan(spec, source, registry=reg, storage_options=storage_options, workers=workers)


def start_cutover(
    ref: str,
    *,
    to: str,
    format: str | None = None,
    num_shards: int | None = None,
    shard_size: int | str | None = None,
    rows_per_shard: int | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    compression: str | None = None,
    compression_level: int | None = None,
    row_group_size: int | None = None,
    format_options: Mapping[str, Any] | None = None,
    alias: str | None = None,
    prices: str | None = None,
    retain: str | float = "7d",
    delete_old: bool = False,
    postpone_switch: bool = False,
    on_stage: Sequence[str] = (),
    max_regression: float | None = None,
    max_p99: float | None = None,
    min_throughput: float | str | None = None,
    sample_rows: int = 1000,
    shadow_duration: float = 2.0,
    shadow_workers: int | str | Sequence[int] = 1,
    allow_breaking: bool = False,
    measure_seconds: float = 1.0,
    skip_readiness: Sequence[str] = (),
    run: bool = False,
    through: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    workers: int | None = None,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> CutoverReport:
    """Create a cutover of ``ref`` (``NAME@ALIAS``) to ``to`` and run its plan stage (with ``run``, every
    stage; with ``through``, up to that stage). Returns the report; ``report.ok`` is False when a stage
    failed a check (the journal says which and why).

    ``format`` (default: the source's) and the reshard options (``num_shards`` | ``shard_size`` |
    ``rows_per_shard``, ``shuffle``, ``seed``) and write options are the rewrite's. The shadow gates are
    ``max_regression`` (percent), ``max_p99`` (seconds), ``min_throughput`` (bytes/s or ``"200MB/s"``)
    and ``sample_rows``. ``retain`` (``"7d"``) is how long after the switch ``complete`` waits;
    ``delete_old`` lets it delete the old files. ``postpone_switch`` holds the cutover before the switch
    until ``run_cutover(id, through="switch")``. ``on_stage`` commands run after each stage.
    ``skip_readiness`` names readiness checks of the destination that may fail without stopping the plan.

    ``engine`` (``"local"`` or ``"ray"``, with ``ray_address``) runs the copy's and the verifies' units;
    ``run_cutover`` and ``resume_cutover`` take the same two keywords for their run.

    Raises InputError before anything is created for bad options, a reference that is not ``NAME@ALIAS``,
    an alias not on the source, a destination overlapping the source, or another cutover of the same
    alias still open.

    >>> start_cutover("web-text@prod", to="data/web-text-jsonl/", format="jsonl", run=True)  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    spec, source = CutoverSpec.build(
        reg,
        ref,
        destination=to,
        format=format,
        rewrite={
            "num_shards": num_shards,
            "shard_size": shard_size,
            "rows_per_shard": rows_per_shard,
            "shuffle": shuffle,
            "seed": seed,
            "compression": compression,
            "compression_level": compression_level,
            "row_group_size": row_group_size,
            "format_options": format_options,
        },
        alias=alias,
        prices=prices,
        retain=retain,
        delete_old=delete_old,
        postpone_switch=postpone_switch,
        on_stage=on_stage,
        gates={
            "max_regression": max_regression,
            "max_p99": max_p99,
            "min_throughput": min_throughput,
            "sample_rows": sample_rows,
            "shadow_duration": shadow_duration,
            "shadow_workers": shadow_workers,
        },
        allow_breaking=allow_breaking,
        measure_seconds=measure_seconds,
        skip_readiness=skip_readiness,
        storage_options=storage_options,
    )
    if through is not None:
        stage_index(through)
    if lease_seconds <= 0:
        raise InputError(f"lease_seconds must be more than 0, got {lease_seconds}")
    for other in cutover_ids(reg, source.name):
        state = journal_of(reg, source.name, other).state()
        if not state.terminal and state.alias == spec.alias:
            raise InputError(
                f"cutover {other} is already moving {source.name}@{state.alias} (phase {state.phase}); "
                "finish it "
                f"or roll it back (`dsm cutover rollback {other}`) first"
            )
    cutover_id = new_cutover_id()
    journal = journal_of(reg, source.name, cutover_id)
    journal.append("created", spec=spec.to_dict())
    return run_stages(
        reg,
        journal,
        through=through or ("complete" if run else "plan"),
        explicit=through is not None,
        force=False,
        lease_seconds=lease_seconds,
        workers=workers,
        storage_options=storage_options,
        progress=progress,
        engine=engine,
        ray_address=ray_address,
    )


def run_cutover(
    cutover_id: str,
    *,
    through: str | None = None,
    force: bool = False,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    workers: int | None = None,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> CutoverReport:
    """Run the cutover's next stages, up to ``through`` (default: all of them).

    It stops before ``switch`` when the cutover was started with ``postpone_switch`` unless ``through`` is
    ``"switch"`` or ``"complete"``, and before ``complete`` until the retain period has passed. A stage that
    failed, or whose process died, runs again. Another process holding the lease makes this raise
    ConflictError naming it (exit 3); ``force`` breaks that lease (the report says whose).

    >>> run_cutover("20261130T100000Z-3fa2c1", through="switch")  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    return run_stages(
        reg,
        find_cutover(reg, cutover_id),
        through=through or "complete",
        explicit=through is not None,
        force=force,
        lease_seconds=lease_seconds,
        workers=workers,
        storage_options=storage_options,
        progress=progress,
        engine=engine,
        ray_address=ray_address,
    )


def resume_cutover(
    cutover_id: str,
    *,
    force: bool = False,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    workers: int | None = None,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> CutoverReport:
    """Finish what the last run of the cutover was doing (after a crash, a failure, or Ctrl-C): the same
    stages, up to the same ``through``, each continuing where it stopped or finding its work done.

    >>> resume_cutover("20261130T100000Z-3fa2c1", force=True)  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    journal = find_cutover(reg, cutover_id)
    last = journal.state().last_run or {}
    return run_stages(
        reg,
        journal,
        through=str(last.get("through") or "complete"),
        explicit=bool(last.get("explicit")),
        force=force,
        lease_seconds=lease_seconds,
        workers=workers,
        storage_options=storage_options,
        progress=progress,
        engine=engine,
        ray_address=ray_address,
    )


def rollback_cutover(
    cutover_id: str,
    *,
    discard_target: bool = False,
    force: bool = False,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    workers: int | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> CutoverReport:
    """Undo a cutover before ``complete``: check that the old version still verifies (bytes), point the
    alias back at it (if the cutover moved it), and with ``discard_target`` delete only the files the
    copy wrote (the target version is then marked retired). The old data is never touched.

    Refused after ``complete`` started, while an alias other than the cutover's points at the target (for
    ``discard_target``), and (CheckFailed, exit 1) when the old version no longer verifies, unless
    ``force``, which also breaks another process's lease. Running it again after a crash finishes it.

    >>> rollback_cutover("20261130T100000Z-3fa2c1", discard_target=True)  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    journal = find_cutover(reg, cutover_id)
    state = journal.state()
    if state.phase == "rolled_back":
        return report(reg, journal, storage_options, stopped="rolled back", notes=["already rolled back"])
    if not state.can_rollback:
        raise InputError(
            f"cutover {cutover_id} has reached complete ({state.dataset}@{state.source_version} is "
            "deprecated): "
            "rollback is no longer possible; move the alias by hand (`dsm alias`) if you must"
        )
    lease, broke = with_lease(reg, journal, force=force, lease_seconds=lease_seconds)
    ctx = StageContext(
        registry=reg,
        journal=journal,
        lease=lease,
        spec=CutoverSpec.from_dict(state.spec),
        storage_options=storage_options,
        workers=workers,
        progress=progress,
        state=state,
    )
    failed: str | None = None
    try:
        lease.start_heartbeat()
        journal.refresh()
        evidence: dict[str, Any] = {}
        try:
            # Checked before anything changes: a refused rollback leaves the cutover where it was.
            ok, check = old_version_check(ctx)
            evidence["old_verifies"] = check
            if not ok and not force:
                shown = "; ".join(f"shard {f['path']}: {f['status']}" for f in check["failures"][:5])
                raise StageCheckFailed(
                    f"{state.dataset}@{state.source_version} does not verify ({shown}): the alias was not "
                    "moved "
                    "back; restore its data, or pass --force to roll back anyway",
                    evidence,
                )
            current = reg.aliases(state.dataset).get(state.alias)
            if current not in (state.source_version, state.target_version):
                raise InputError(
                    f"{state.dataset}@{state.alias} points at {current}, neither the old version "
                    f"{state.source_version} nor this cutover's target {state.target_version}: someone moved "
                    "it; nothing was changed"
                )
            if state.phase != "rolling_back":
                journal.append(
                    "rollback_started", evidence={"discard_target": discard_target, "force": force}
                )
            evidence["alias"] = restore_alias(ctx, state)
            if discard_target:
                evidence["discarded"] = discard_target_files(ctx, state.target_version)
        except StageCheckFailed as exc:
            record_failure(journal, "rollback_failed", None, exc, evidence={**exc.evidence, **evidence})
            failed = str(exc)
        except BaseException as exc:
            record_failure(journal, "rollback_failed", None, exc, evidence=evidence)
            raise
        else:
            journal.append("rollback_finished", evidence=evidence)
    finally:
        lease.release()
    return report(
        reg,
        journal,
        storage_options,
        stopped="rollback failed" if failed else "rolled back",
        failed=failed,
        broke=broke,
        notes=ctx.notes,
    )


def cutover_status(
    cutover_id: str | None = None,
    *,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> CutoverReport:
    """The state of a cutover (the most recent one when ``cutover_id`` is None): stages with their evidence,
    the lease (who runs it, until when), the copy's progress, and the plan beside what was measured."""
    reg = open_registry(registry, storage_options)
    if cutover_id is None:
        found = [(cid, name) for name in reg.names() for cid in cutover_ids(reg, name)]
        if not found:
            raise DatasetNotFound(f"no cutover in registry {redact(reg.url)}; `dsm cutover start` makes one")
        cutover_id, name = max(found)
        journal = journal_of(reg, name, cutover_id)
    else:
        journal = find_cutover(reg, cutover_id)
    return report(reg, journal, storage_options)


def list_cutovers(
    *,
    name: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[CutoverReport]:
    """Every cutover in the registry (of dataset ``name`` only, when given), oldest first."""
    reg = open_registry(registry, storage_options)
    names = [name] if name is not None else reg.names()
    if name is not None:
        parse_reference(name)
    reports = []
    for dataset in names:
        for cid in cutover_ids(reg, dataset):
            reports.append(report(reg, journal_of(reg, dataset, cid), storage_options))
    return sorted(reports, key=lambda r: r.id)


def shadow_report(
    cutover_id: str,
    *,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> str | None:
    """The HTML report of the ``dsm bench --compare`` the cutover's shadow stage ran (old against new, with
    its gates), kept beside the journal; None when the shadow has not run (or ran before dsm kept it)."""
    reg = open_registry(registry, storage_options)
    journal = find_cutover(reg, cutover_id)
    if not journal.loc.exists(SHADOW_REPORT):
        return None
    return journal.loc.read_bytes(SHADOW_REPORT).decode("utf-8")
