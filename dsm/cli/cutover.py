"""``dsm cutover ...``: parse options, make one library call (:mod:`dsm.commands.cutover`), render.

The library is imported inside each command, so loading the CLI stays light. The module is a little
over 600 lines because it holds seven subcommands (plan, start, run, resume, rollback, status, list), the
rewrite, gate and engine options they take, and the renderers of a plan (its destination's readiness
included) and of a cutover's stages and evidence, which they share.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsm.cli import checks_failed
from dsm.cli.options import (
    CompressionOpt,
    DestinationOpt,
    EngineOpt,
    FormatOptionOpt,
    JsonOpt,
    LevelOpt,
    NumShardsOpt,
    RayAddressOpt,
    RegistryOpt,
    RowGroupOpt,
    RowsPerShardOpt,
    SeedOpt,
    ShardSizeOpt,
    ShuffleOpt,
    StorageOpt,
    TargetFormatOpt,
    WorkersOpt,
    key_value_options,
    storage_options,
)
from dsm.cli.render import (
    SafeTable,
    console,
    duration,
    err_console,
    esc,
    human_bytes,
    money,
    print_json,
    progress_for,
    readiness_table,
    styled,
)

if TYPE_CHECKING:
    from dsm.commands.cutover import CutoverPlan, CutoverReport

__all__ = ["add_to", "cutover_app"]

_GROUP_EPILOG = """Examples:

  dsm cutover plan web-text@prod --to s3://new-bucket/web-text/ --format parquet

  dsm cutover start web-text@prod --to s3://new-bucket/web-text/ --format parquet --run --retain 7d

  dsm cutover status --json

  dsm cutover rollback 20261130T100000Z-3fa2c1 --discard-target

Stages: plan, copy, verify, shadow, switch, complete. Each leaves evidence in an append-only journal in \
the registry; a killed run is resumed with `dsm cutover resume ID`; until complete, \
`dsm cutover rollback ID` \
puts the alias back on the untouched old version. See docs/cutover.md.

Exit codes: 0 done (or waiting), 1 a stage or gate failed a check, 2 bad input (nothing was changed), \
3 storage failure or the cutover is locked by another run (safe to retry), 130 interrupted (resume it)."""

cutover_app = typer.Typer(
    name="cutover",
    help="Move a dataset and its alias to a new location or format in stages, with evidence and rollback.",
    epilog=_GROUP_EPILOG,
    no_args_is_help=True,
    rich_markup_mode="rich",
)

RefArg = Annotated[
    str, typer.Argument(help="The dataset as readers name it: NAME@ALIAS (e.g. web-text@prod).")
]
IdArg = Annotated[str, typer.Argument(help="Cutover id (`dsm cutover list` shows them).")]
AliasOpt = Annotated[
    str | None, typer.Option("--alias", help="The alias to move (default: the alias in REF, e.g. prod).")
]
PricesOpt = Annotated[
    str | None, typer.Option("--prices", help="Price table YAML (default: the one shipped with dsm).")
]
RetainOpt = Annotated[
    str, typer.Option("--retain", help="Grace period after the switch before complete (7d, 12h, 0).")
]
DeleteOldOpt = Annotated[
    bool, typer.Option("--delete-old", help="At complete, delete the files the old contract lists.")
]
SampleRowsOpt = Annotated[
    int, typer.Option("--sample-rows", min=0, help="Rows read from both versions and compared (0: none).")
]
ShadowDurationOpt = Annotated[
    float, typer.Option("--shadow-duration", help="Seconds the shadow benchmark reads each version.")
]
AllowBreakingOpt = Annotated[
    bool, typer.Option("--allow-breaking", help="Go on even if the target is not compatible for readers.")
]
SkipReadinessOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--skip-readiness",
        help="A readiness check of the destination that may fail without stopping the plan (repeatable).",
    ),
]
MeasureOpt = Annotated[
    float, typer.Option("--measure-seconds", help="Seconds of the plan's read measurement (dsm bench).")
]
ThroughOpt = Annotated[
    str | None,
    typer.Option(
        "--through", help="Run stages up to this one: plan, copy, verify, shadow, switch, complete."
    ),
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Break the lease of another run (for a holder that is dead).")
]
LeaseOpt = Annotated[
    float, typer.Option("--lease-seconds", help="Lease duration; renewed every third of it while running.")
]


# ----------------------------------------------------------------------------------------------- render


def _render_plan(plan: CutoverPlan) -> None:
    console.print(
        f"[bold]plan[/]: {esc(plan.source)} ({esc(plan.dataset)}@{esc(plan.alias)}) → "
        f"{esc(plan.destination)} as {esc(plan.format)} ({esc(plan.operation)})",
        highlight=False,
    )
    layout = plan.layout
    if layout:
        console.print(
            f"  target: {layout['files']} files ({esc(', '.join(layout['names']))}), "
            f"{layout['rows']:,} rows, about {human_bytes(layout['bytes_estimated'])}",
            highlight=False,
        )
    figures = plan.estimate
    if figures is not None:
        table = SafeTable("stage", "time", title="estimate", show_edge=False)
        for stage, seconds in figures.seconds.items():
            table.add_row(stage, duration(seconds))
        table.add_row(styled("total", "bold"), styled(duration(figures.total_seconds), "bold"))
        console.print(table)
        console.print(
            f"  bytes: {human_bytes(figures.bytes_read_source)} read from the source, "
            f"{human_bytes(figures.bytes_written)} written, "
            f"{human_bytes(figures.bytes_read_target)} read back; "
            f"requests: {figures.requests['source_get']:,} source GET, {figures.requests['target_get']:,} "
            f"target GET, {figures.requests['target_put']:,} target PUT"
        )
        cost = SafeTable(
            "item", "quantity", "unit price", "cost", title=f"cost ({plan.prices} prices)", show_edge=False
        )
        for line in figures.cost:
            cost.add_row(
                line.item,
                f"{line.quantity:,.4g} {line.unit}",
                f"{line.unit_price:g}",
                money(line.cost, figures.currency),
            )
        cost.add_row(
            styled("total", "bold"), "", "", styled(money(figures.total_cost, figures.currency), "bold")
        )
        console.print(cost)
        console.print(
            f"  peak extra storage: {human_bytes(figures.peak_extra_bytes)} while both copies exist; "
            f"storage per month {money(figures.storage_per_month_before, figures.currency)} now, "
            f"{money(figures.storage_per_month_after, figures.currency)} after"
        )
        for note in figures.notes:
            console.print(f"  {esc(note)}", highlight=False)
    if plan.readiness.get("checks"):
        title = f"destination readiness ({plan.readiness.get('store')})"
        console.print(
            readiness_table(plan.readiness["checks"], title=title, skipped=plan.readiness["skipped"])
        )
    compat = plan.compatibility
    verdict = "[bold green]OK[/]" if plan.ok else "[bold red]WILL STOP AT PLAN[/]"
    console.print(f"  compatibility: {verdict} (schema {esc(compat.get('verdict'))})")
    for problem in plan.problems:
        console.print(f"    - {esc(problem)}", highlight=False)
    for note in plan.notes:
        console.print(f"  {esc(note)}", highlight=False)


def _evidence_line(name: str, evidence: dict[str, Any], status: str = "done") -> str:
    if not evidence:
        return ""
    if name == "plan":
        est = evidence.get("estimate") or {}
        layout = evidence.get("layout") or {}
        cost = (est.get("cost") or {}).get("total")
        return (
            f"{layout.get('files', '?')} files, ~{human_bytes((est.get('bytes') or {}).get('target'))}, "
            f"est. {duration(est.get('total_seconds'))}"
            + (f", {cost:.2f} {(est.get('cost') or {}).get('currency')}" if cost is not None else "")
        )
    if name == "copy":
        return (
            f"{evidence.get('target')}: {evidence.get('shards')} files, "
            f"{human_bytes(evidence.get('bytes_copied'))}"
            f" ({evidence.get('units_written')} written, {evidence.get('units_resumed')} resumed)"
        )
    if name == "verify":
        summary = (evidence.get("verify") or {}).get("summary") or {}
        same = (evidence.get("fingerprint") or {}).get("same_rows")
        shards = ", ".join(f"{n} {status}" for status, n in summary.items())
        return f"shards: {shards}; same rows as the source: {'yes' if same else 'NO'}"
    if name == "shadow":
        bench = evidence.get("bench") or {}
        sample = evidence.get("sample") or {}
        text = f"gates {'passed' if bench.get('passed') else 'FAILED'}"
        if sample:
            text += f"; {sample.get('rows_compared')} rows compared by {sample.get('method')}, "
            text += f"{sample.get('mismatches')} differ"
        return text
    if name == "switch":
        if evidence.get("moved"):
            moved = "moved"
        elif status == "done":
            moved = "it already pointed there"
        else:
            moved = "not moved"  # a switch that failed moved nothing
        return f"{evidence.get('alias')} {evidence.get('from')} → {evidence.get('to')} ({moved})"
    if name == "complete":
        deleted = evidence.get("deleted")
        text = f"{evidence.get('deprecated')} deprecated"
        if deleted:
            text += f"; {deleted.get('files_removed')} old files deleted"
        return text
    return ""


def _render_report(report: CutoverReport) -> None:
    state = report.state
    target = f"{state.target_version}" if state.target_version is not None else "?"
    console.print(
        f"cutover [bold]{esc(report.id)}[/]: {esc(state.dataset)}@{esc(state.alias)} {state.source_version} "
        f"→ {target} ({esc(state.spec.get('destination'))}), phase [bold]{esc(state.phase)}[/]",
        highlight=False,
    )
    planned = {p.item: p for p in report.plan_vs_actual}
    table = SafeTable("stage", "status", "time", "planned", "evidence", show_edge=False)
    styles = {"done": "green", "failed": "bold red", "running": "yellow", "pending": "dim"}
    for stage in state.stages:
        status = stage.status + (f" (hook {stage.hook})" if stage.hook in ("pending", "failed") else "")
        row = planned.get(f"{stage.name} time")
        table.add_row(
            stage.name,
            styled(status, styles.get(stage.status, "")),
            duration(stage.seconds),
            duration(row.planned) if row is not None else "",
            _evidence_line(stage.name, dict(stage.evidence), stage.status) or (stage.error or ""),
        )
    console.print(table)
    if report.progress:
        console.print(
            f"  copy: {report.progress['files_done']} of {report.progress['files_total']} files written"
        )
    if report.lease is not None and report.lease_held:
        console.print(f"  lease: held by {esc(report.lease.describe())}", highlight=False)
    if state.rollback is not None:
        console.print(f"  rollback: {esc(state.rollback.get('status'))}", highlight=False)
    if report.stopped:
        console.print(f"  {esc(report.stopped)}", highlight=False)
    if report.failed:
        console.print(f"  [bold red]failed:[/] {esc(report.failed)}", highlight=False)
    for note in report.notes:
        console.print(f"  {esc(note)}", highlight=False)
    if report.next_command:
        console.print(f"  next: {esc(report.next_command)}", highlight=False)


def _finish(report: CutoverReport, json_output: bool) -> None:
    if report.broke_lease is not None:
        why = "expired" if report.broke_lease.expires <= _now() else "forced"
        err_console.print(f"broke the lease of {esc(report.broke_lease.describe())} ({why})", highlight=False)
    if json_output:
        print_json(report.to_dict())
    else:
        _render_report(report)
    if not report.ok:
        checks_failed()


def _now() -> float:
    import time

    return time.time()


# ----------------------------------------------------------------------------------------------- commands


@cutover_app.command(
    epilog="Examples:\n\n  dsm cutover plan web-text@prod --to s3://new-bucket/web-text/ --format parquet\n\n"
    "  dsm cutover plan web-text@prod --to data/web-text-64/ --num-shards 64 --prices prices.yaml --json\n\n"
    "Measures a short read of the source, writes one temporary sample file to the destination and runs "
    "dsm storage check there (both removed); starts nothing. A required readiness check that does not pass "
    "(permissions, consistency, and what the data policy requires) stops it unless --skip-readiness CHECK "
    "names it. Exit codes: 0 the cutover could go ahead, 1 it would stop at plan (problems listed), "
    "2 bad input, 3 storage failure."
)
def plan(
    ref: RefArg,
    to: DestinationOpt,
    format: TargetFormatOpt = None,
    num_shards: NumShardsOpt = None,
    shard_size: ShardSizeOpt = None,
    rows_per_shard: RowsPerShardOpt = None,
    shuffle: ShuffleOpt = False,
    seed: SeedOpt = None,
    compression: CompressionOpt = None,
    compression_level: LevelOpt = None,
    row_group_size: RowGroupOpt = None,
    format_option: FormatOptionOpt = None,
    alias: AliasOpt = None,
    prices: PricesOpt = None,
    retain: RetainOpt = "7d",
    delete_old: DeleteOldOpt = False,
    sample_rows: SampleRowsOpt = 1000,
    shadow_duration: ShadowDurationOpt = 2.0,
    allow_breaking: AllowBreakingOpt = False,
    measure_seconds: MeasureOpt = 1.0,
    skip_readiness: SkipReadinessOpt = None,
    workers: WorkersOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Print the plan of a cutover (layout, time, cost, peak storage, compatibility) without starting it."""
    from dsm.commands import cutover as lib

    result = lib.plan_cutover(
        ref,
        to=to,
        format=format,
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        compression=compression,
        compression_level=compression_level,
        row_group_size=row_group_size,
        format_options=key_value_options(format_option, "--format-option"),
        alias=alias,
        prices=prices,
        retain=retain,
        delete_old=delete_old,
        sample_rows=sample_rows,
        shadow_duration=shadow_duration,
        allow_breaking=allow_breaking,
        measure_seconds=measure_seconds,
        skip_readiness=skip_readiness or (),
        workers=workers,
        registry=registry,
        storage_options=storage_options(storage_option),
    )
    if json_output:
        print_json(result.to_dict())
    else:
        _render_plan(result)
    if not result.ok:
        checks_failed()


@cutover_app.command(
    epilog="Examples:\n\n"
    "  dsm cutover start web-text@prod --to s3://new-bucket/web-text/ --format parquet\n\n"
    "  dsm cutover start web-text@prod --to data/web-text-64/ --num-shards 64 --run --retain 0\n\n"
    "  dsm cutover start web-text@prod --to az://c/web-text/ --run --postpone-switch "
    "--max-regression 10 --on-stage 'notify.sh'\n\n"
    "Creates the cutover and runs its plan stage (--run: every stage; --through STAGE: up to STAGE). "
    "Hooks get DSM_CUTOVER_ID, DSM_CUTOVER_STAGE, DSM_CUTOVER_DATASET, DSM_CUTOVER_ALIAS and DSM_REGISTRY; "
    "a hook that fails stops the cutover before the next stage.\n\n"
    "Exit codes: 0 done or waiting, 1 a stage or gate failed (see the journal), 2 bad input (nothing was "
    "created), 3 storage failure or locked.",
)
def start(
    ref: RefArg,
    to: DestinationOpt,
    format: TargetFormatOpt = None,
    num_shards: NumShardsOpt = None,
    shard_size: ShardSizeOpt = None,
    rows_per_shard: RowsPerShardOpt = None,
    shuffle: ShuffleOpt = False,
    seed: SeedOpt = None,
    compression: CompressionOpt = None,
    compression_level: LevelOpt = None,
    row_group_size: RowGroupOpt = None,
    format_option: FormatOptionOpt = None,
    alias: AliasOpt = None,
    prices: PricesOpt = None,
    retain: RetainOpt = "7d",
    delete_old: DeleteOldOpt = False,
    postpone_switch: Annotated[
        bool,
        typer.Option("--postpone-switch", help="Wait before the switch until `run ID --through switch`."),
    ] = False,
    on_stage: Annotated[
        list[str] | None, typer.Option("--on-stage", help="Shell command run after each stage (repeatable).")
    ] = None,
    max_regression: Annotated[
        float | None, typer.Option("--max-regression", help="Shadow gate: % the new version may read slower.")
    ] = None,
    max_p99: Annotated[
        float | None, typer.Option("--max-p99", help="Shadow gate: seconds of the new version's request p99.")
    ] = None,
    min_throughput: Annotated[
        str | None, typer.Option("--min-throughput", help="Shadow gate: bytes/s the new version must read.")
    ] = None,
    sample_rows: SampleRowsOpt = 1000,
    shadow_duration: ShadowDurationOpt = 2.0,
    shadow_workers: Annotated[
        str, typer.Option("--shadow-workers", help="Reader threads of the shadow benchmark (e.g. 4 or 1,4).")
    ] = "1",
    allow_breaking: AllowBreakingOpt = False,
    measure_seconds: MeasureOpt = 1.0,
    skip_readiness: SkipReadinessOpt = None,
    run: Annotated[bool, typer.Option("--run", help="Run every stage now (not only the plan).")] = False,
    through: ThroughOpt = None,
    lease_seconds: LeaseOpt = 60.0,
    workers: WorkersOpt = None,
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Create a cutover (id and journal in the registry) and run its plan, or every stage with --run."""
    from dsm.commands import cutover as lib

    report = lib.start_cutover(
        ref,
        to=to,
        format=format,
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        compression=compression,
        compression_level=compression_level,
        row_group_size=row_group_size,
        format_options=key_value_options(format_option, "--format-option"),
        alias=alias,
        prices=prices,
        retain=retain,
        delete_old=delete_old,
        postpone_switch=postpone_switch,
        on_stage=on_stage or (),
        max_regression=max_regression,
        max_p99=max_p99,
        min_throughput=min_throughput,
        sample_rows=sample_rows,
        shadow_duration=shadow_duration,
        shadow_workers=shadow_workers,
        allow_breaking=allow_breaking,
        measure_seconds=measure_seconds,
        skip_readiness=skip_readiness or (),
        run=run,
        through=through,
        lease_seconds=lease_seconds,
        workers=workers,
        engine=engine,
        ray_address=ray_address,
        registry=registry,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    _finish(report, json_output)


@cutover_app.command(
    epilog="Examples:\n\n  dsm cutover run 20261130T100000Z-3fa2c1\n\n"
    "  dsm cutover run 20261130T100000Z-3fa2c1 --through copy --json\n\n"
    "  dsm cutover run 20261130T100000Z-3fa2c1 --through switch   (releases a postponed switch)\n\n"
    "A second run while one holds the lease exits 3 naming the holder "
    "(`locked by user@host pid N until T`).\n\n"
    "Exit codes: 0 done or waiting, 1 a stage or gate failed, 2 bad input, 3 storage failure or locked."
)
def run(
    cutover_id: IdArg,
    through: ThroughOpt = None,
    force: ForceOpt = False,
    lease_seconds: LeaseOpt = 60.0,
    workers: WorkersOpt = None,
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Run the next stages of a cutover, up to --through (default: all; complete waits for --retain)."""
    from dsm.commands import cutover as lib

    report = lib.run_cutover(
        cutover_id,
        through=through,
        force=force,
        lease_seconds=lease_seconds,
        workers=workers,
        engine=engine,
        ray_address=ray_address,
        registry=registry,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    _finish(report, json_output)


@cutover_app.command(
    epilog="Examples:\n\n  dsm cutover resume 20261130T100000Z-3fa2c1\n\n"
    "  dsm cutover resume 20261130T100000Z-3fa2c1 --force   "
    "(the previous run was killed: break its lease)\n\n"
    "Exit codes: 0 done or waiting, 1 a stage or gate failed, 2 bad input, 3 storage failure or locked."
)
def resume(
    cutover_id: IdArg,
    force: ForceOpt = False,
    lease_seconds: LeaseOpt = 60.0,
    workers: WorkersOpt = None,
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Finish what the last run of a cutover was doing, after a crash, a failure or Ctrl-C."""
    from dsm.commands import cutover as lib

    report = lib.resume_cutover(
        cutover_id,
        force=force,
        lease_seconds=lease_seconds,
        workers=workers,
        engine=engine,
        ray_address=ray_address,
        registry=registry,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    _finish(report, json_output)


@cutover_app.command(
    epilog="Examples:\n\n  dsm cutover rollback 20261130T100000Z-3fa2c1\n\n"
    "  dsm cutover rollback 20261130T100000Z-3fa2c1 --discard-target --json\n\n"
    "Possible until complete starts. The old version is verified (bytes) first; the alias moves back only "
    "from this cutover's target. --discard-target deletes only the files the copy wrote "
    "(never the folder).\n\n"
    "Exit codes: 0 rolled back, 1 the old version does not verify (nothing changed), 2 not possible or bad "
    "input, 3 storage failure or locked."
)
def rollback(
    cutover_id: IdArg,
    discard_target: Annotated[
        bool, typer.Option("--discard-target", help="Also delete the files the copy wrote (not the folder).")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Roll back even if the old version fails verify; break another's lease."
        ),
    ] = False,
    lease_seconds: LeaseOpt = 60.0,
    workers: WorkersOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Put the alias back on the old version (untouched) and end the cutover."""
    from dsm.commands import cutover as lib

    report = lib.rollback_cutover(
        cutover_id,
        discard_target=discard_target,
        force=force,
        lease_seconds=lease_seconds,
        workers=workers,
        registry=registry,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    _finish(report, json_output)


@cutover_app.command(
    epilog="Examples:\n\n  dsm cutover status\n\n  dsm cutover status 20261130T100000Z-3fa2c1 --json\n\n"
    "Without an id: the most recent cutover. Always exits 0 when the cutover exists (read `phase`)."
)
def status(
    cutover_id: Annotated[str | None, typer.Argument(help="Cutover id (default: the most recent).")] = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Stage, progress, evidence and lease holder of a cutover, with the plan beside what was measured."""
    from dsm.commands import cutover as lib

    report = lib.cutover_status(
        cutover_id, registry=registry, storage_options=storage_options(storage_option)
    )
    if json_output:
        print_json(report.to_dict())
        return
    _render_report(report)
    rows = [p for p in report.plan_vs_actual if p.planned is not None or p.actual is not None]
    if rows:
        table = SafeTable("item", "planned", "measured", title="planned and measured", show_edge=False)
        for row in rows:
            show = human_bytes if row.unit == "bytes" else duration
            table.add_row(row.item, show(row.planned), show(row.actual))
        console.print(table)


@cutover_app.command(
    name="list", epilog="Examples:\n\n  dsm cutover list\n\n  dsm cutover list --name web-text --json"
)
def list_(
    name: Annotated[str | None, typer.Option("--name", help="Only the cutovers of this dataset.")] = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """List the cutovers in the registry with their phase."""
    from dsm.commands import cutover as lib

    reports = lib.list_cutovers(name=name, registry=registry, storage_options=storage_options(storage_option))
    if json_output:
        print_json([r.to_dict() for r in reports])
        return
    table = SafeTable(
        "id", "dataset", "from", "to", "phase", "next stage", "destination", "lease", title="cutovers"
    )
    for r in reports:
        s = r.state
        table.add_row(
            r.id,
            f"{s.dataset}@{s.alias}",
            str(s.source_version),
            str(s.target_version or "-"),
            s.phase,
            s.next_stage or "-",
            str(s.spec.get("destination")),
            r.lease.owner.describe() if r.lease is not None and r.lease_held else "",
        )
    console.print(table)
    if not reports:
        print("no cutovers", file=sys.stderr)


def add_to(app: typer.Typer) -> None:
    app.add_typer(cutover_app, name="cutover")
