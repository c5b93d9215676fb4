"""Running a cutover: find it in the registry, take its lease, run its stages in order with their hooks,
journal every start, finish and failure, and report its state. The stages themselves are
:mod:`dsm.commands.cutover.stages`; the API functions are in :mod:`dsm.commands.cutover`.
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

from dsm.commands.cutover.journal import CutoverJournal
from dsm.commands.cutover.lease import Lease, LeaseInfo
from dsm.commands.cutover.spec import CutoverSpec
from dsm.commands.cutover.stages import STAGE_FUNCTIONS, StageContext
from dsm.commands.cutover.state import CutoverState, parse_time, stage_index
from dsm.engine import Executor, Progress, open_executor
from dsm.errors import CheckFailed, DatasetNotFound, DsmError, InputError, StageCheckFailed, StorageError
from dsm.registry import Registry
from dsm.storage import location, redact

__all__ = [
    "HOOK_ENV",
    "CutoverReport",
    "PlanVsActual",
    "cutover_ids",
    "find_cutover",
    "journal_of",
    "new_cutover_id",
    "record_failure",
    "report",
    "run_stages",
    "with_lease",
]

HOOK_ENV = ("DSM_CUTOVER_ID", "DSM_CUTOVER_STAGE", "DSM_CUTOVER_DATASET", "DSM_CUTOVER_ALIAS")
"""Environment variables an ``on_stage`` hook is given (and ``DSM_REGISTRY``)."""

_HOOK_OUTPUT_CHARS = 2000


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


# ----------------------------------------------------------------------------------------------- finding


def cutover_ids(reg: Registry, name: str) -> list[str]:
    ids = set()
    for info in reg.location.child(f"{name}/cutovers").list_files():
        parts = info.path.split("/")
        if len(parts) == 3 and parts[1] == "journal":
            ids.add(parts[0])
    return sorted(ids)


def journal_of(reg: Registry, name: str, cutover_id: str) -> CutoverJournal:
    return CutoverJournal(reg.location.child(f"{name}/cutovers/{cutover_id}"), cutover_id)


def find_cutover(reg: Registry, cutover_id: str) -> CutoverJournal:
    if not cutover_id or "/" in cutover_id or cutover_id.startswith("."):
        raise InputError(f"{cutover_id!r} is not a cutover id; `dsm cutover list` shows them")
    for name in reg.names():
        journal = journal_of(reg, name, cutover_id)
        if journal.exists():
            return journal
    raise DatasetNotFound(
        f"no cutover {cutover_id!r} in registry {redact(reg.url)}; `dsm cutover list` shows the cutovers"
    )


def _utcnow() -> datetime:
    """Now (one place, so that tests can move the clock past a retain period)."""
    return datetime.now(UTC)


def new_cutover_id() -> str:
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


def report(
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


def record_failure(
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
    for command in ctx.spec.on_stage:
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
            and ctx.spec.postpone_switch
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
            record_failure(ctx.journal, "stage_failed", stage, exc, evidence=evidence)
            return ran, f"{stage} failed a check", str(exc)
        except CheckFailed as exc:
            record_failure(
                ctx.journal, "stage_failed", stage, exc, evidence={"seconds": time.perf_counter() - started}
            )
            return ran, f"{stage} failed a check", str(exc)
        except BaseException as exc:
            record_failure(
                ctx.journal, "stage_failed", stage, exc, evidence={"seconds": time.perf_counter() - started}
            )
            if isinstance(exc, KeyboardInterrupt):  # what the CLI tells the person who pressed Ctrl-C
                exc.add_note(f"resume: `dsm cutover resume {ctx.journal.id}` goes on with {stage}")
            raise
        evidence["seconds"] = time.perf_counter() - started
        ctx.journal.append("stage_finished", stage=stage, evidence=evidence)
        ran.append(stage)


def with_lease(
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


def run_stages(
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
    engine: str | Executor | None = None,
    ray_address: str | None = None,
) -> CutoverReport:
    stage_index(through)
    executor = open_executor(engine, ray_address=ray_address, workers=workers)
    state = journal.state()
    if state.phase == "rolled_back":
        raise InputError(f"cutover {journal.id} was rolled back; start a new cutover to move {state.dataset}")
    if state.phase == "rolling_back":
        raise InputError(
            f"the rollback of cutover {journal.id} did not finish; finish it with "
            f"`dsm cutover rollback {journal.id}`"
        )
    if state.phase == "completed":
        return report(reg, journal, storage_options, stopped="completed", notes=["nothing to do: completed"])
    lease, broke = with_lease(reg, journal, force=force, lease_seconds=lease_seconds)
    ctx = StageContext(
        registry=reg,
        journal=journal,
        lease=lease,
        spec=CutoverSpec.from_dict(state.spec),
        storage_options=storage_options,
        workers=workers,
        progress=progress,
        engine=executor,
    )
    try:
        lease.start_heartbeat()
        journal.refresh()
        journal.append("run", through=through, explicit=explicit)
        ran, stopped, failed = _execute(ctx, through=through, explicit=explicit)
    finally:
        lease.release()
    return report(
        reg, journal, storage_options, ran=ran, stopped=stopped, failed=failed, broke=broke, notes=ctx.notes
    )
