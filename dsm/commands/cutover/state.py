"""The state of a cutover, derived from its journal: a pure function from records to state.

Nothing about a cutover is stored except its journal (append-only records,
:mod:`dsm.commands.cutover.journal`) and its lease (who is running it, :mod:`dsm.commands.cutover.lease`).
Everything :func:`derive_state` returns (stage statuses, the next stage, the target version, when
``complete`` may run, whether rollback is possible) is computed from the records alone, so any process
reading the journal sees the same state.

>>> rec = [{"seq": 1, "cutover": "c1", "event": "created", "at": "2026-01-01T00:00:00.000Z",
...         "spec": {"dataset": "web", "alias": "prod", "source_version": 1}}]
>>> derive_state(rec).next_stage
'plan'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dsm.errors import ContractError, InputError
from dsm.units import format_time, parse_duration

__all__ = [
    "EVENTS",
    "PHASES",
    "STAGES",
    "CutoverState",
    "StageState",
    "derive_state",
    "format_time",
    "parse_duration",
    "parse_time",
    "stage_index",
]

STAGES = ("plan", "copy", "verify", "shadow", "switch", "complete")
"""The stages of a cutover, in the order they run."""

EVENTS = (
    "created",
    "run",
    "lease_broken",
    "stage_started",
    "stage_finished",
    "stage_failed",
    "hook_finished",
    "hook_failed",
    "rollback_started",
    "rollback_finished",
    "rollback_failed",
)
"""Every event a journal record can hold."""

PHASES = ("created", "running", "paused", "failed", "completed", "rolling_back", "rolled_back")
"""``created``: no stage has run; ``running``: a stage started and has not ended (it runs, or its process
died: the lease tells); ``paused``: between stages; ``failed``: the last stage (or its hook) failed;
``completed``, ``rolling_back``, ``rolled_back``."""


def parse_time(text: str) -> datetime:
    """The moment a journal timestamp names."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ContractError(f"{text!r} is not a journal timestamp (ISO 8601, UTC)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def stage_index(stage: str) -> int:
    """The position of ``stage`` in :data:`STAGES`; InputError naming the stages for an unknown name."""
    if stage not in STAGES:
        raise InputError(f"unknown stage {stage!r}; the stages are: {', '.join(STAGES)}")
    return STAGES.index(stage)


@dataclass(frozen=True, kw_only=True)
class StageState:
    """One stage as the journal tells it.

    ``status`` is ``pending``, ``running`` (started, not ended), ``done`` or ``failed``. ``evidence`` is
    the evidence of its last ``stage_finished`` (or ``stage_failed``) record; ``seconds`` the wall time
    its last run measured. ``hook`` is ``none`` (no hook configured or the stage is not done), ``pending``,
    ``ok`` or ``failed``.
    """

    name: str
    status: str = "pending"
    attempts: int = 0
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    hook: str = "none"
    hook_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "attempts": self.attempts,
            "started": self.started,
            "finished": self.finished,
            "seconds": self.seconds,
            "evidence": dict(self.evidence),
            "error": self.error,
            "error_kind": self.error_kind,
            "hook": self.hook,
            "hook_error": self.hook_error,
        }


@dataclass(frozen=True, kw_only=True)
class CutoverState:
    """A cutover as its journal tells it (see :func:`derive_state`)."""

    id: str
    dataset: str
    alias: str
    source_version: int
    spec: Mapping[str, Any]
    created: str
    stages: tuple[StageState, ...]
    phase: str
    next_stage: str | None
    target_version: int | None = None
    switched_at: str | None = None
    complete_after: str | None = None
    rollback: Mapping[str, Any] | None = None
    rollback_refused: Mapping[str, Any] | None = None
    last_run: Mapping[str, Any] | None = None
    records: int = 0
    last_event: str = "created"

    def stage(self, name: str) -> StageState:
        return self.stages[stage_index(name)]

    @property
    def switched(self) -> bool:
        """Whether the alias was moved to the target (and not moved back by a rollback)."""
        return self.stage("switch").status == "done" and self.phase not in ("rolling_back", "rolled_back")

    @property
    def terminal(self) -> bool:
        return self.phase in ("completed", "rolled_back")

    @property
    def can_rollback(self) -> bool:
        """Rollback is possible until ``complete`` has started (and not after a finished rollback)."""
        return self.stage("complete").status == "pending" and self.phase != "rolled_back"

    @property
    def failed_stage(self) -> StageState | None:
        return next((s for s in self.stages if s.status == "failed" or s.hook == "failed"), None)

    @property
    def hook_pending(self) -> str | None:
        """The done stage whose hook has not run successfully yet (it runs before the next stage)."""
        return next(
            (s.name for s in self.stages if s.status == "done" and s.hook in ("pending", "failed")), None
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dataset": self.dataset,
            "alias": self.alias,
            "source_version": self.source_version,
            "target_version": self.target_version,
            "phase": self.phase,
            "next_stage": self.next_stage,
            "switched": self.switched,
            "switched_at": self.switched_at,
            "complete_after": self.complete_after,
            "can_rollback": self.can_rollback,
            "created": self.created,
            "stages": [s.to_dict() for s in self.stages],
            "rollback": dict(self.rollback) if self.rollback is not None else None,
            "rollback_refused": dict(self.rollback_refused) if self.rollback_refused is not None else None,
            "last_run": dict(self.last_run) if self.last_run is not None else None,
            "records": self.records,
            "last_event": self.last_event,
            "spec": dict(self.spec),
        }


def _bad(record: Mapping[str, Any], why: str) -> ContractError:
    return ContractError(f"cutover journal record {record.get('seq')!r}: {why}; the journal is damaged")


def derive_state(records: Iterable[Mapping[str, Any]]) -> CutoverState:
    """The state of a cutover from its journal records (dicts as written), in sequence order.

    Pure: the same records always give the same state. Raises :class:`~dsm.errors.ContractError` for a
    journal that cannot be a cutover's (no ``created`` record first, a gap in the sequence, an unknown
    event or stage, a stage that finishes without having started).
    """
    ordered: Sequence[Mapping[str, Any]] = sorted(records, key=lambda r: int(r.get("seq", 0)))
    if not ordered:
        raise ContractError("a cutover journal has no records")
    first = ordered[0]
    if first.get("event") != "created" or first.get("seq") != 1:
        raise _bad(first, "the first record of a cutover journal is 'created' with seq 1")
    spec = dict(first.get("spec") or {})
    for key in ("dataset", "alias", "source_version"):
        if key not in spec:
            raise _bad(first, f"the 'created' record has no {key!r}")
    stages: dict[str, dict[str, Any]] = {name: {"name": name} for name in STAGES}
    hooks = bool(spec.get("on_stage"))
    rollback: dict[str, Any] | None = None
    refused: dict[str, Any] | None = None
    last_run: dict[str, Any] | None = None
    current: dict[str, Any] = {}
    last_stage_event: tuple[str, str] | None = None  # (event, stage)
    stage: str = ""
    for expected, record in enumerate(ordered, start=1):
        if record.get("seq") != expected:
            raise _bad(record, f"expected record {expected} here (a record is missing)")
        event = record.get("event")
        if event not in EVENTS:
            raise _bad(record, f"unknown event {event!r}")
        if expected > 1 and event == "created":
            raise _bad(record, "a second 'created' record")
        if event.startswith(("stage_", "hook_")):
            stage = str(record.get("stage"))
            if stage not in STAGES:
                raise _bad(record, f"unknown stage {stage!r}")
            current = stages[stage]
        if event == "run":
            last_run = {k: record.get(k) for k in ("through", "explicit", "at")}
            last_run["by"] = dict(record.get("by") or {})
        elif event == "stage_started":
            current.update(
                status="running",
                attempts=current.get("attempts", 0) + 1,
                started=record.get("at"),
                finished=None,
                seconds=None,
                error=None,
                error_kind=None,
                hook="none",
                hook_error=None,
            )
            last_stage_event = (event, stage)
        elif event in ("stage_finished", "stage_failed"):
            if current.get("status") != "running":
                raise _bad(record, f"stage {stage} ends without having started")
            evidence = dict(record.get("evidence") or {})
            current.update(
                status="done" if event == "stage_finished" else "failed",
                finished=record.get("at"),
                seconds=evidence.get("seconds"),
                evidence=evidence,
                error=record.get("error"),
                error_kind=record.get("error_kind"),
                hook="pending" if hooks and event == "stage_finished" else "none",
            )
            last_stage_event = (event, stage)
        elif event in ("hook_finished", "hook_failed"):
            if current.get("status") != "done":
                raise _bad(record, f"a hook of stage {stage}, which is not done")
            current.update(
                hook="ok" if event == "hook_finished" else "failed",
                hook_error=record.get("error") if event == "hook_failed" else None,
            )
            last_stage_event = (event, stage)
        elif event == "rollback_started":
            rollback = {"status": "running", "started": record.get("at"), "evidence": {}, "error": None}
        elif event == "rollback_failed" and rollback is None:
            # refused before it started (the old version did not verify, the alias was elsewhere):
            # nothing changed, the cutover stays where it was
            refused = {
                "at": record.get("at"),
                "error": record.get("error"),
                "evidence": record.get("evidence"),
            }
        elif event in ("rollback_finished", "rollback_failed"):
            if rollback is None:
                raise _bad(record, "a rollback ends without having started")
            rollback.update(
                status="done" if event == "rollback_finished" else "failed",
                finished=record.get("at"),
                evidence=dict(record.get("evidence") or {}),
                error=record.get("error"),
            )
    built = tuple(StageState(**stages[name]) for name in STAGES)
    by_name = {s.name: s for s in built}
    copy_evidence = by_name["copy"].evidence
    target = copy_evidence.get("target_version")
    switch = by_name["switch"]
    switched_at = switch.finished if switch.status == "done" else None
    complete_after = None
    if switched_at is not None:
        retain = float(spec.get("retain_seconds") or 0.0)
        complete_after = format_time(parse_time(switched_at) + timedelta(seconds=retain))
    next_stage = next((s.name for s in built if s.status != "done"), None)
    phase = _phase(built, rollback, last_stage_event)
    return CutoverState(
        id=str(first.get("cutover")),
        dataset=str(spec["dataset"]),
        alias=str(spec["alias"]),
        source_version=int(spec["source_version"]),
        spec=spec,
        created=str(first.get("at")),
        stages=built,
        phase=phase,
        next_stage=next_stage,
        target_version=int(target) if target is not None else None,
        switched_at=switched_at,
        complete_after=complete_after,
        rollback=rollback,
        rollback_refused=refused,
        last_run=last_run,
        records=len(ordered),
        last_event=str(ordered[-1].get("event")),
    )


def _phase(
    stages: Sequence[StageState], rollback: Mapping[str, Any] | None, last: tuple[str, str] | None
) -> str:
    if rollback is not None:
        return "rolled_back" if rollback["status"] == "done" else "rolling_back"
    if stages[-1].status == "done":
        return "completed"
    if any(s.status == "running" for s in stages):
        return "running"
    if any(s.status == "failed" or s.hook == "failed" for s in stages):
        return "failed"
    if last is None:
        return "created"
    return "paused"


def now_text(clock: datetime | None = None) -> str:
    """The journal timestamp of ``clock`` (default: now)."""
    return format_time(clock or datetime.now(UTC))
