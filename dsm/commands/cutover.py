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

>>> report = start_cutover("web-text@prod", to="s3://new-bucket/web-text/", format="parquet",
...                        run=True, retain="7d")  # doctest: +SKIP
>>> report.state.phase, report.stopped  # doctest: +SKIP
('paused', 'waiting for the retain period: complete runs from 2026-12-07T10:00:00.000Z')
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dsm.commands._common import open_registry, tool_name
from dsm.commands._cutover_stages import (
    STAGE_FUNCTIONS,
    CutoverPlan,
    StageCheckFailed,
    StageContext,
    compute_plan,
    old_version_check,
    restore_alias,
)
from dsm.commands._cutover_stages import discard_target as discard_target_files
from dsm.commands.storage_check import resolve_checks
from dsm.contract import Contract
from dsm.cutover.journal import CutoverJournal
from dsm.cutover.lease import DEFAULT_LEASE_SECONDS, Lease, LeaseInfo
from dsm.cutover.prices import load_prices
from dsm.cutover.state import CutoverState, parse_duration, parse_time, stage_index
from dsm.engine import Progress
from dsm.errors import CheckFailed, DatasetNotFound, DsmError, InputError, StorageError
from dsm.registry import Registry, parse_reference
from dsm.storage import location, public_url, redact

__all__ = [
    "HOOK_ENV",
    "CutoverPlan",
    "CutoverReport",
    "PlanVsActual",
    "cutover_status",
    "list_cutovers",
    "plan_cutover",
    "resume_cutover",
    "rollback_cutover",
    "run_cutover",
    "start_cutover",
]

HOOK_ENV = ("DSM_CUTOVER_ID", "DSM_CUTOVER_STAGE", "DSM_CUTOVER_DATASET", "DSM_CUTOVER_ALIAS")
"""Environment variables an ``on_stage`` hook is given (and ``DSM_REGISTRY``)."""

_HOOK_OUTPUT_CHARS = 2000


# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class PlanVsActual:
    """A figure the plan estimated beside what the run measured (``None`` until the stage ran)."""

    item: str
    planned: float | None
    actual: float | None
    unit: str

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.item, "planned": self.planned, "actual": self.actual, "unit": self.unit}


@dataclass(frozen=True, kw_only=True)
class CutoverReport:
    """A cutover after a command: its journal-derived state, the lease, the copy's progress, and what
    this command did (``ran``: the stages it ran; ``stopped``: why it stopped; ``failed``: the check that
    did not hold, if one did not). ``ok`` is False when a stage or hook failed in this command."""

    id: str
    state: CutoverState
    lease: LeaseInfo | None = None
    lease_held: bool = False
    progress: Mapping[str, Any] | None = None
    ran: tuple[str, ...] = ()
    stopped: str = ""
    failed: str | None = None
    broke_lease: LeaseInfo | None = None
    next_command: str | None = None
    plan_vs_actual: tuple[PlanVsActual, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.failed is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ok": self.ok,
            "dataset": self.state.dataset,
            "alias": self.state.alias,
            "phase": self.state.phase,
            "next_stage": self.state.next_stage,
            "ran": list(self.ran),
            "stopped": self.stopped,
            "failed": self.failed,
            "next_command": self.next_command,
            "lease": self.lease.to_dict() if self.lease is not None else None,
            "lease_held": self.lease_held,
            "broke_lease": self.broke_lease.to_dict() if self.broke_lease is not None else None,
            "progress": dict(self.progress) if self.progress is not None else None,
            "plan_vs_actual": [p.to_dict() for p in self.plan_vs_actual],
            "notes": list(self.notes),
            "state": self.state.to_dict(),
        }


# ----------------------------------------------------------------------------------------------- spec


def _number(value: Any, what: str, *, minimum: float, inclusive: bool = True) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: {value!r} is not a number") from None
    if number < minimum or (not inclusive and number == minimum) or number != number:
        raise InputError(f"{what}: {value!r} must be {'at least' if inclusive else 'more than'} {minimum:g}")
    return number


def _rewrite_arguments(
    *,
    operation: str,
    num_shards: int | None,
    shard_size: int | str | None,
    rows_per_shard: int | None,
    shuffle: bool,
    seed: int | None,
    compression: str | None,
    compression_level: int | None,
    row_group_size: int | None,
    format_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    from dsm.commands.rewrite import write_options
    from dsm.rewrite.plan import check_layout

    write_options(compression, compression_level, row_group_size, format_options)  # same refusals, now
    common = {
        "compression": compression,
        "compression_level": compression_level,
        "row_group_size": row_group_size,
        "format_options": dict(format_options) if format_options else None,
    }
    if operation == "convert-format":
        return common
    check_layout(
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        command="a resharding cutover",
    )
    return {
        "num_shards": num_shards,
        "shard_size": shard_size,
        "rows_per_shard": rows_per_shard,
        "shuffle": shuffle,
        "seed": (seed if seed is not None else 0) if shuffle else None,
        **common,
    }


def _overlap(a: str, b: str, storage_options: Mapping[str, Any] | None) -> bool:
    from dsm.commands.rewrite import locations_overlap

    return bool(locations_overlap(location(a, storage_options), location(b, storage_options)))


def _build_spec(
    reg: Registry,
    ref: str,
    *,
    to: str,
    format: str | None,
    num_shards: int | None,
    shard_size: int | str | None,
    rows_per_shard: int | None,
    shuffle: bool,
    seed: int | None,
    compression: str | None,
    compression_level: int | None,
    row_group_size: int | None,
    format_options: Mapping[str, Any] | None,
    alias: str | None,
    prices: str | None,
    retain: str | float,
    delete_old: bool,
    postpone_switch: bool,
    on_stage: Sequence[str],
    max_regression: float | None,
    max_p99: float | None,
    min_throughput: float | str | None,
    sample_rows: int,
    shadow_duration: float,
    shadow_workers: int | str | Sequence[int],
    allow_breaking: bool,
    measure_seconds: float,
    skip_readiness: Sequence[str],
    storage_options: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], Contract]:
    """Every option checked, the source resolved and the alias found: what the ``created`` record holds."""
    from dsm.commands.bench import parse_rate, parse_workers
    from dsm.formats import get_format

    if "/" in ref or ref.endswith((".yaml", ".yml")):
        raise InputError(
            f"{ref!r}: a cutover moves a registered dataset; give NAME@ALIAS (e.g. web-text@prod)"
        )
    name, selector = parse_reference(ref)
    source = reg.resolve(ref)
    if alias is None:
        if selector is None or selector.isdigit() or selector == "latest":
            raise InputError(
                f"{ref!r} names no alias: give the alias readers use, e.g. {name}@prod or --alias prod"
            )
        alias = selector
    aliases = reg.aliases(name)
    if alias not in aliases:
        raise InputError(
            f"{name} has no alias {alias!r} (aliases: {sorted(aliases) or 'none'}); a cutover moves the "
            "alias "
            f"readers use: `dsm alias {name} {alias} {source.version}` first"
        )
    if aliases[alias] != source.version:
        raise InputError(
            f"{name}@{alias} points at {aliases[alias]}, not at {source.ref}: a cutover moves an alias "
            "from the "
            f"version it points at; start from {name}@{alias}"
        )
    if source.status == "retired":
        raise InputError(f"{source.ref} is retired (its data was deleted); it cannot be moved")
    if source.fingerprint is None:
        raise InputError(f"{source.ref} has no row fingerprint to prove the copy against; re-register it")
    if public_url(to) != to or redact(to) != to:
        raise InputError(
            "--to holds a credential; give the destination without it and the credential through the "
            "environment or --storage-option (a journal never stores one)"
        )
    if _overlap(to, source.location, storage_options):
        raise InputError(
            f"the destination {to} overlaps the location of {source.ref}; choose a folder of its own"
        )
    if _overlap(to, reg.url, storage_options):
        raise InputError(f"the destination {to} overlaps the registry; choose a folder of its own")
    target_format = format or source.format
    get_format(target_format)  # an unknown name fails here, before anything is written
    resharding = (
        any(v is not None for v in (num_shards, shard_size, rows_per_shard)) or shuffle or seed is not None
    )
    operation = "reshard" if resharding else "convert-format"
    rewrite = _rewrite_arguments(
        operation=operation,
        num_shards=num_shards,
        shard_size=shard_size,
        rows_per_shard=rows_per_shard,
        shuffle=shuffle,
        seed=seed,
        compression=compression,
        compression_level=compression_level,
        row_group_size=row_group_size,
        format_options=format_options,
    )
    hooks = [str(c) for c in on_stage]
    for command in hooks:
        if redact(command) != command:
            raise InputError(
                "an --on-stage command holds a credential, which the journal would keep: read it from the "
                "environment inside the hook instead"
            )
        if not command.strip():
            raise InputError("an --on-stage command is empty")
    table = load_prices(prices, storage_options=storage_options)
    gates = {
        "max_regression": None
        if max_regression is None
        else _number(max_regression, "max_regression", minimum=0),
        "max_p99": None if max_p99 is None else _number(max_p99, "max_p99", minimum=0, inclusive=False),
        "min_throughput": None if min_throughput is None else parse_rate(min_throughput),
        "sample_rows": int(_number(sample_rows, "sample_rows", minimum=0)),
        "shadow_duration": _number(shadow_duration, "shadow_duration", minimum=0, inclusive=False),
        "shadow_workers": list(parse_workers(shadow_workers)),
    }
    spec = {
        "dataset": name,
        "alias": alias,
        "source_version": source.version,
        "source": source.ref,
        "requested": ref,
        "destination": to,
        "format": target_format,
        "operation": operation,
        "rewrite": rewrite,
        "retain": str(retain),
        "retain_seconds": parse_duration(retain),
        "delete_old": bool(delete_old),
        "postpone_switch": bool(postpone_switch),
        "on_stage": hooks,
        "gates": gates,
        "allow_breaking": bool(allow_breaking),
        "readiness": {"skip": list(resolve_checks(skip_readiness, what="--skip-readiness"))},
        "prices": table.to_dict(),
        "measure_seconds": _number(measure_seconds, "measure_seconds", minimum=0, inclusive=False),
        "tool": tool_name(),
    }
    return spec, source


# ----------------------------------------------------------------------------------------------- finding


def _cutover_ids(reg: Registry, name: str) -> list[str]:
    ids = set()
    for info in reg.location.child(f"{name}/cutovers").list_files():
        parts = info.path.split("/")
        if len(parts) == 3 and parts[1] == "journal":
            ids.add(parts[0])
    return sorted(ids)


def _journal(reg: Registry, name: str, cutover_id: str) -> CutoverJournal:
    return CutoverJournal(reg.location.child(f"{name}/cutovers/{cutover_id}"), cutover_id)


def _find(reg: Registry, cutover_id: str) -> CutoverJournal:
    if not cutover_id or "/" in cutover_id or cutover_id.startswith("."):
        raise InputError(f"{cutover_id!r} is not a cutover id; `dsm cutover list` shows them")
    for name in reg.names():
        journal = _journal(reg, name, cutover_id)
        if journal.exists():
            return journal
    raise DatasetNotFound(
        f"no cutover {cutover_id!r} in registry {redact(reg.url)}; `dsm cutover list` shows the cutovers"
    )


def _utcnow() -> datetime:
    """Now (one place, so that tests can move the clock past a retain period)."""
    return datetime.now(UTC)


def _new_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


# ----------------------------------------------------------------------------------------------- reports


def _copy_progress(
    spec: Mapping[str, Any], storage_options: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Output files the rewrite has completed at the destination (from its own journal)."""
    from dsm.rewrite.journal import Journal

    try:
        dest = location(str(spec["destination"]), storage_options)
        header = Journal.read_header(dest)
        if header is None:
            return None
        total = len(header.get("outputs") or [])
        if header.get("published"):
            return {"files_done": total, "files_total": total, "published": header["published"]}
        done = len(Journal(dest, str(header["plan"])).records("unit"))
    except (DsmError, OSError, KeyError, TypeError):
        return None
    return {"files_done": done, "files_total": total, "published": None}


def _plan_vs_actual(state: CutoverState) -> tuple[PlanVsActual, ...]:
    plan = state.stage("plan").evidence
    estimate = plan.get("estimate") or {}
    planned_seconds = estimate.get("seconds") or {}
    rows = [
        PlanVsActual(
            item="target bytes",
            planned=(estimate.get("bytes") or {}).get("target"),
            actual=state.stage("copy").evidence.get("bytes_copied"),
            unit="bytes",
        )
    ]
    for stage in ("copy", "verify", "shadow", "switch"):
        done = state.stage(stage)
        rows.append(
            PlanVsActual(
                item=f"{stage} time",
                planned=planned_seconds.get(stage),
                actual=done.seconds if done.status == "done" else None,
                unit="s",
            )
        )
    return tuple(rows)


def _next_command(state: CutoverState, stopped: str) -> str | None:
    cid = state.id
    if state.phase == "rolling_back":
        return f"dsm cutover rollback {cid}"
    if state.terminal:
        return None
    if state.phase == "failed":
        return f"dsm cutover resume {cid}   (or: dsm cutover rollback {cid})"
    if state.phase == "running":
        return f"dsm cutover resume {cid}"
    if state.next_stage == "switch" and state.spec.get("postpone_switch"):
        return f"dsm cutover run {cid} --through switch"
    return f"dsm cutover run {cid}"


def _dead_here(lease: LeaseInfo) -> bool:
    """Whether the lease's holder is a process of this host that no longer exists."""
    if lease.owner.host != socket.gethostname() or lease.owner.pid <= 0:
        return False
    try:
        os.kill(lease.owner.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _report(
    reg: Registry,
    journal: CutoverJournal,
    storage_options: Mapping[str, Any] | None,
    *,
    ran: Sequence[str] = (),
    stopped: str = "",
    failed: str | None = None,
    broke: LeaseInfo | None = None,
    notes: Sequence[str] = (),
) -> CutoverReport:
    state = journal.state()
    lease, _ = Lease(journal.loc, cutover_id=journal.id).read()
    held = lease is not None and lease.held(time.time())
    notes = list(notes)
    if held and lease is not None and _dead_here(lease):
        notes.append(
            f"the lease holder ({lease.owner.describe()}) is not running on this host: "
            f"`dsm cutover resume {journal.id} --force` takes over"
        )
    progress = None
    if state.stage("copy").status in ("running", "failed") or (
        state.stage("copy").status == "pending" and state.stage("plan").status == "done"
    ):
        progress = _copy_progress(state.spec, storage_options)
    return CutoverReport(
        id=journal.id,
        state=state,
        lease=lease,
        lease_held=held,
        progress=progress,
        ran=tuple(ran),
        stopped=stopped,
        failed=failed,
        broke_lease=broke,
        next_command=_next_command(state, stopped),
        plan_vs_actual=_plan_vs_actual(state),
        notes=tuple(notes),
    )


# ----------------------------------------------------------------------------------------------- running


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, CheckFailed):
        return "check"
    if isinstance(exc, InputError):
        return "input"
    if isinstance(exc, StorageError):
        return "storage"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return "error"


def _record_failure(
    journal: CutoverJournal, event: str, stage: str | None, exc: BaseException, **extra: Any
) -> None:
    """Journal a failure if the journal can still be written (best effort: a lost lease cannot)."""
    message = "interrupted" if isinstance(exc, KeyboardInterrupt) else redact(str(exc)) or type(exc).__name__
    with contextlib.suppress(DsmError, OSError):
        journal.append(event, stage=stage, error=message, error_kind=_error_kind(exc), **extra)


def _run_hooks(ctx: StageContext, stage: str) -> str | None:
    """Run every ``on_stage`` command for the finished ``stage``; journal the outcome; the error or None."""
    env = {
        **os.environ,
        "DSM_CUTOVER_ID": ctx.journal.id,
        "DSM_CUTOVER_STAGE": stage,
        "DSM_CUTOVER_DATASET": ctx.name,
        "DSM_CUTOVER_ALIAS": ctx.alias,
        "DSM_REGISTRY": ctx.registry.url,
    }
    results = []
    for command in ctx.spec.get("on_stage") or []:
        ctx.lease.check()
        proc = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, check=False)
        output = redact((proc.stdout or "") + (proc.stderr or ""))[-_HOOK_OUTPUT_CHARS:]
        results.append({"command": command, "exit_code": proc.returncode, "output": output})
        if proc.returncode != 0:
            error = (
                f"hook {command!r} after stage {stage} exited with {proc.returncode}: the cutover stops "
                f"before the next stage; fix the cause and `dsm cutover resume {ctx.journal.id}` (the hook "
                "runs again)"
            )
            ctx.journal.append("hook_failed", stage=stage, error=error, evidence={"hooks": results})
            return error
    ctx.journal.append("hook_finished", stage=stage, evidence={"hooks": results})
    return None


def _execute(ctx: StageContext, *, through: str, explicit: bool) -> tuple[list[str], str, str | None]:
    """Run stages in order up to ``through``; returns (stages run, why it stopped, failure or None)."""
    ran: list[str] = []
    limit = stage_index(through)
    while True:
        ctx.lease.check()
        state = ctx.journal.state()
        ctx.state = state
        if state.phase in ("rolling_back", "rolled_back"):
            return ran, "the cutover was rolled back", None
        pending = state.hook_pending
        if pending is not None:  # before anything else: the hook of the last stage (complete's too) runs
            error = _run_hooks(ctx, pending)
            if error is not None:
                return ran, f"hook after {pending} failed", error
            continue
        if state.phase == "completed":
            return ran, "completed", None
        stage = state.next_stage
        if stage is None:
            return ran, "completed", None
        if stage_index(stage) > limit:
            return ran, f"stopped after {through} (--through {through})", None
        if (
            stage == "switch"
            and ctx.spec.get("postpone_switch")
            and not (explicit and limit >= stage_index("switch"))
        ):
            return ran, f"switch postponed: run `dsm cutover run {ctx.journal.id} --through switch`", None
        waiting = stage == "complete" and state.complete_after is not None
        if waiting and _utcnow() < parse_time(str(state.complete_after)):
            return ran, f"waiting for the retain period: complete runs from {state.complete_after}", None
        ctx.journal.append("stage_started", stage=stage)
        started = time.perf_counter()
        try:
            evidence = STAGE_FUNCTIONS[stage](ctx)
        except StageCheckFailed as exc:
            evidence = {**exc.evidence, "seconds": time.perf_counter() - started}
            _record_failure(ctx.journal, "stage_failed", stage, exc, evidence=evidence)
            return ran, f"{stage} failed a check", str(exc)
        except CheckFailed as exc:
            _record_failure(
                ctx.journal, "stage_failed", stage, exc, evidence={"seconds": time.perf_counter() - started}
            )
            return ran, f"{stage} failed a check", str(exc)
        except BaseException as exc:
            _record_failure(
                ctx.journal, "stage_failed", stage, exc, evidence={"seconds": time.perf_counter() - started}
            )
            raise
        evidence["seconds"] = time.perf_counter() - started
        ctx.journal.append("stage_finished", stage=stage, evidence=evidence)
        ran.append(stage)


def _with_lease(
    reg: Registry,
    journal: CutoverJournal,
    *,
    force: bool,
    lease_seconds: float,
) -> tuple[Lease, LeaseInfo | None]:
    lease = Lease(journal.loc, cutover_id=journal.id, seconds=lease_seconds, owner=journal.owner)
    broke = lease.acquire(force=force)
    if broke is not None:
        try:
            journal.refresh()
            journal.append(
                "lease_broken",
                evidence={
                    "previous": broke.to_dict(),
                    "why": "forced" if broke.held(time.time()) else "expired",
                },
            )
        except BaseException:
            lease.release()
            raise
    return lease, broke


def _run(
    reg: Registry,
    journal: CutoverJournal,
    *,
    through: str,
    explicit: bool,
    force: bool,
    lease_seconds: float,
    workers: int | None,
    storage_options: Mapping[str, Any] | None,
    progress: Progress | None,
) -> CutoverReport:
    stage_index(through)
    state = journal.state()
    if state.phase == "rolled_back":
        raise InputError(f"cutover {journal.id} was rolled back; start a new cutover to move {state.dataset}")
    if state.phase == "rolling_back":
        raise InputError(
            f"the rollback of cutover {journal.id} did not finish; finish it with "
            f"`dsm cutover rollback {journal.id}`"
        )
    if state.phase == "completed":
        return _report(reg, journal, storage_options, stopped="completed", notes=["nothing to do: completed"])
    lease, broke = _with_lease(reg, journal, force=force, lease_seconds=lease_seconds)
    ctx = StageContext(
        registry=reg,
        journal=journal,
        lease=lease,
        spec=state.spec,
        storage_options=storage_options,
        workers=workers,
        progress=progress,
    )
    try:
        lease.start_heartbeat()
        journal.refresh()
        journal.append("run", through=through, explicit=explicit)
        ran, stopped, failed = _execute(ctx, through=through, explicit=explicit)
    finally:
        lease.release()
    return _report(
        reg, journal, storage_options, ran=ran, stopped=stopped, failed=failed, broke=broke, notes=ctx.notes
    )


# ----------------------------------------------------------------------------------------------- API


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
    readiness check not ``skip_readiness``-ed that did not pass, a data policy rule broken).

    >>> plan = plan_cutover("web-text@prod", to="s3://new/web-text/", format="parquet")  # doctest: +SKIP
    >>> plan.estimate.total_seconds, plan.estimate.total_cost  # doctest: +SKIP
    (5400.0, 212.5)
    """
    reg = open_registry(registry, storage_options)
    spec, source = _build_spec(
        reg,
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
        format_options=format_options,
        alias=alias,
        prices=prices,
        retain=retain,
        delete_old=delete_old,
        postpone_switch=False,
        on_stage=(),
        max_regression=None,
        max_p99=None,
        min_throughput=None,
        sample_rows=sample_rows,
        shadow_duration=shadow_duration,
        shadow_workers=1,
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

    Raises InputError before anything is created for bad options, a reference that is not ``NAME@ALIAS``,
    an alias not on the source, a destination overlapping the source, or another cutover of the same
    alias still open.

    >>> start_cutover("web-text@prod", to="data/web-text-jsonl/", format="jsonl", run=True)  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    spec, source = _build_spec(
        reg,
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
        format_options=format_options,
        alias=alias,
        prices=prices,
        retain=retain,
        delete_old=delete_old,
        postpone_switch=postpone_switch,
        on_stage=on_stage,
        max_regression=max_regression,
        max_p99=max_p99,
        min_throughput=min_throughput,
        sample_rows=sample_rows,
        shadow_duration=shadow_duration,
        shadow_workers=shadow_workers,
        allow_breaking=allow_breaking,
        measure_seconds=measure_seconds,
        skip_readiness=skip_readiness,
        storage_options=storage_options,
    )
    if through is not None:
        stage_index(through)
    if lease_seconds <= 0:
        raise InputError(f"lease_seconds must be more than 0, got {lease_seconds}")
    for other in _cutover_ids(reg, source.name):
        state = _journal(reg, source.name, other).state()
        if not state.terminal and state.alias == spec["alias"]:
            raise InputError(
                f"cutover {other} is already moving {source.name}@{state.alias} (phase {state.phase}); "
                "finish it "
                f"or roll it back (`dsm cutover rollback {other}`) first"
            )
    cutover_id = _new_id()
    journal = _journal(reg, source.name, cutover_id)
    journal.append("created", spec=spec)
    return _run(
        reg,
        journal,
        through=through or ("complete" if run else "plan"),
        explicit=through is not None,
        force=False,
        lease_seconds=lease_seconds,
        workers=workers,
        storage_options=storage_options,
        progress=progress,
    )


def run_cutover(
    cutover_id: str,
    *,
    through: str | None = None,
    force: bool = False,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    workers: int | None = None,
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
    return _run(
        reg,
        _find(reg, cutover_id),
        through=through or "complete",
        explicit=through is not None,
        force=force,
        lease_seconds=lease_seconds,
        workers=workers,
        storage_options=storage_options,
        progress=progress,
    )


def resume_cutover(
    cutover_id: str,
    *,
    force: bool = False,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    workers: int | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> CutoverReport:
    """Finish what the last run of the cutover was doing (after a crash, a failure, or Ctrl-C): the same
    stages, up to the same ``through``, each continuing where it stopped or finding its work done.

    >>> resume_cutover("20261130T100000Z-3fa2c1", force=True)  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    journal = _find(reg, cutover_id)
    last = journal.state().last_run or {}
    return _run(
        reg,
        journal,
        through=str(last.get("through") or "complete"),
        explicit=bool(last.get("explicit")),
        force=force,
        lease_seconds=lease_seconds,
        workers=workers,
        storage_options=storage_options,
        progress=progress,
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
    journal = _find(reg, cutover_id)
    state = journal.state()
    if state.phase == "rolled_back":
        return _report(reg, journal, storage_options, stopped="rolled back", notes=["already rolled back"])
    if not state.can_rollback:
        raise InputError(
            f"cutover {cutover_id} has reached complete ({state.dataset}@{state.source_version} is "
            "deprecated): "
            "rollback is no longer possible; move the alias by hand (`dsm alias`) if you must"
        )
    lease, broke = _with_lease(reg, journal, force=force, lease_seconds=lease_seconds)
    ctx = StageContext(
        registry=reg,
        journal=journal,
        lease=lease,
        spec=state.spec,
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
            _record_failure(journal, "rollback_failed", None, exc, evidence={**exc.evidence, **evidence})
            failed = str(exc)
        except BaseException as exc:
            _record_failure(journal, "rollback_failed", None, exc, evidence=evidence)
            raise
        else:
            journal.append("rollback_finished", evidence=evidence)
    finally:
        lease.release()
    return _report(
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
        found = [(cid, name) for name in reg.names() for cid in _cutover_ids(reg, name)]
        if not found:
            raise DatasetNotFound(f"no cutover in registry {redact(reg.url)}; `dsm cutover start` makes one")
        cutover_id, name = max(found)
        journal = _journal(reg, name, cutover_id)
    else:
        journal = _find(reg, cutover_id)
    return _report(reg, journal, storage_options)


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
        for cid in _cutover_ids(reg, dataset):
            reports.append(_report(reg, _journal(reg, dataset, cid), storage_options))
    return sorted(reports, key=lambda r: r.id)
