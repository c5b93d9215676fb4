"""Lifecycle of versions: ``dsm deprecate``, ``dsm retire`` and ``dsm gc``.

A version is ``active`` when written; ``deprecate`` marks it as superseded (readers should move on, its
data stays), ``retire`` marks it as no longer to be read (refused while an alias points at it, and an
alias can never move to it afterwards), and ``gc`` deletes the data of retired versions, under every one
of these conditions:

- the version is retired, and was retired longer ago than the retain period (``--retain``, default 7d);
- no alias of its dataset points at it (re-read just before its files go);
- dsm wrote its files: it was made by ``convert-format`` or ``reshard`` (a cutover's copy is one), never
  registered from files someone else wrote;
- no other version, of any dataset in the registry, that is not being collected lists the file:
  locations compare as canonical values (:func:`dsm.storage.canonical_location`), so a symlinked or
  differently spelled location is still the same file;
- the file still has the size its contract records (else it is not the file dsm wrote);
- the data policy's retention of the version's classifications has passed since the version was created.

``gc`` is a dry run unless ``yes=True``. Every deletion is journaled in the registry before and after it
happens (``NAME/deletions/RUN/000001.json``, ...); a run killed halfway is finished by the next one. The
version then records ``retired`` with the reason ``data deleted by gc RUN``.

>>> report = gc(retain="30d", registry="memory://doc-registry")  # doctest: +SKIP
>>> [(f.url, f.action) for v in report.versions for f in v.files]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from dsm.commands.cutover.state import format_time, parse_time
from dsm.contract import Contract
from dsm.errors import ConflictError, ContractError, InputError
from dsm.policy import classified_fields, read_policy
from dsm.registry import Registry, VersionStatus, open_registry, parse_reference
from dsm.rewrite.journal import JOURNAL_FILE, Journal
from dsm.storage import Location, canonical_location, redact
from dsm.storage.lease import current_owner
from dsm.units import parse_duration

__all__ = [
    "DELETION_JOURNAL_FORMAT",
    "REWRITE_OPERATIONS",
    "GcFile",
    "GcReport",
    "GcVersion",
    "StatusChange",
    "deletion_records",
    "deprecate",
    "gc",
    "retire",
    "written_by_dsm",
]

DELETION_JOURNAL_FORMAT = "dsm-deletion-journal-v1"
REWRITE_OPERATIONS = ("convert-format", "reshard")
"""Operations whose output files dsm itself wrote (a cutover's copy is one of them)."""

_RECORD = re.compile(r"^(\d{6,})\.json$")


def _utcnow() -> datetime:
    """Now (one place, so that tests can move the clock past a retain period)."""
    return datetime.now(UTC)


def _by() -> str:
    owner = current_owner()
    return f"{owner.user}@{owner.host}"


# ----------------------------------------------------------------------------------- deprecate, retire


@dataclass(frozen=True, kw_only=True)
class StatusChange:
    """A version's status before and after a lifecycle command (``changed`` False: it already was)."""

    ref: str
    status: str
    previous: str
    reason: str
    at: str
    by: str | None
    changed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "status": self.status,
            "previous": self.previous,
            "reason": self.reason,
            "at": self.at,
            "by": self.by,
            "changed": self.changed,
        }


def _registered(reg: Registry, ref: str) -> Contract:
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        raise InputError(f"{ref!r}: a lifecycle status belongs to a registered version; give NAME@VERSION")
    parse_reference(ref)
    return reg.resolve(ref)


def _pointing(reg: Registry, name: str, version: int) -> list[str]:
    return sorted(a for a, v in reg.aliases(name).items() if v == version)


def _change(contract: Contract, entry: VersionStatus, previous: str, *, changed: bool = True) -> StatusChange:
    return StatusChange(
        ref=contract.ref,
        status=entry.status,
        previous=previous,
        reason=entry.reason,
        at=entry.at,
        by=entry.by,
        changed=changed,
    )


def deprecate(
    ref: str,
    *,
    reason: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> StatusChange:
    """Mark a version ``deprecated``: superseded, still readable, its data kept.

    A retired version stays retired (InputError). The status is recorded in ``NAME/status.yaml`` by
    compare-and-swap; the version file is never rewritten.

    >>> deprecate("web-text@2", reason="superseded by web-text@3")  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    contract = _registered(reg, ref)
    version = contract.version or 0
    current = reg.statuses(contract.name).get(version)
    if contract.status == "retired":
        raise InputError(f"{contract.ref} is retired; a retired version cannot be deprecated again")
    if current is not None and current.status == "deprecated":
        return _change(contract, current, "deprecated", changed=False)
    entry = reg.set_status(
        contract.name, version, "deprecated", reason=reason or "deprecated with dsm deprecate", by=_by()
    )
    return _change(contract, entry, contract.status)


def retire(
    ref: str,
    *,
    reason: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> StatusChange:
    """Mark a version ``retired``: not to be read any more; ``dsm gc`` may then delete the files dsm
    wrote for it. Refused (InputError) while an alias points at it; afterwards no alias can move to it.

    >>> retire("web-text@1", reason="replaced by web-text@3")  # doctest: +SKIP
    """
    reg = open_registry(registry, storage_options)
    contract = _registered(reg, ref)
    name, version = contract.name, contract.version or 0
    current = reg.statuses(name).get(version)
    if current is not None and current.status == "retired":
        return _change(contract, current, "retired", changed=False)
    pointing = _pointing(reg, name, version)
    if pointing:
        raise InputError(
            f"{contract.ref} is the version of alias(es) {', '.join(f'{name}@{a}' for a in pointing)}: "
            "it cannot be retired while an alias points at it; move the alias first (`dsm alias`)"
        )
    previous = contract.status
    entry = reg.set_status(name, version, "retired", reason=reason or "retired with dsm retire", by=_by())
    pointing = _pointing(reg, name, version)
    if pointing:  # an alias moved here between the check and the status: undo, and say so
        reg.set_status(
            name,
            version,
            previous if previous in ("active", "deprecated", "draft") else "deprecated",
            reason=f"retire refused: alias {pointing[0]} was moved to it meanwhile",
            by=_by(),
        )
        raise ConflictError(f"alias {name}@{pointing[0]} was moved to {contract.ref} meanwhile: not retired")
    return _change(contract, entry, previous)


# ------------------------------------------------------------------------------------------------- gc


def written_by_dsm(contract: Contract) -> bool:
    """Whether dsm wrote this version's files (a rewrite's output), so that gc may delete them."""
    return (
        contract.lineage is not None
        and contract.lineage.operation in REWRITE_OPERATIONS
        and "rewrite_plan" in contract.metadata
    )


@dataclass(frozen=True, kw_only=True)
class GcFile:
    """One file of a retired version and what gc does with it.

    ``action``: ``delete`` (a dry run would delete it), ``deleted``, ``missing`` (already gone), or
    ``kept`` (``reason`` says why: another version lists it, its size changed, ...)."""

    url: str
    canonical: str
    bytes: int
    action: str
    reason: str = ""
    kind: str = "shard"

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "canonical": self.canonical,
            "bytes": self.bytes,
            "action": self.action,
            "reason": self.reason,
            "kind": self.kind,
        }


@dataclass(frozen=True, kw_only=True)
class GcVersion:
    """A retired version: ``decision`` is ``collect`` (its files are deleted, or would be), ``kept`` (not
    yet or never: ``reason``), or ``refused`` (an alias points at it)."""

    ref: str
    decision: str
    reason: str
    retired_at: str | None
    location: str
    files: tuple[GcFile, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "decision": self.decision,
            "reason": self.reason,
            "retired_at": self.retired_at,
            "location": self.location,
            "files": [f.to_dict() for f in self.files],
        }


@dataclass(frozen=True, kw_only=True)
class GcReport:
    """What a gc run found and did. ``ok`` is False when a retired version was refused (an alias points
    at it: someone must look)."""

    run: str
    dry_run: bool
    retain: str
    versions: tuple[GcVersion, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(v.decision == "refused" for v in self.versions)

    def _files(self, actions: Iterable[str]) -> list[GcFile]:
        wanted = set(actions)
        return [f for v in self.versions for f in v.files if f.action in wanted]

    @property
    def files_deleted(self) -> list[GcFile]:
        """The files deleted (or, in a dry run, that would be)."""
        return self._files(("delete", "deleted"))

    @property
    def bytes_deleted(self) -> int:
        return sum(f.bytes for f in self.files_deleted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "ok": self.ok,
            "dry_run": self.dry_run,
            "retain": self.retain,
            "files": len(self.files_deleted),
            "bytes": self.bytes_deleted,
            "versions": [v.to_dict() for v in self.versions],
            "notes": list(self.notes),
        }


class _DeletionJournal:
    """Append-only records of one gc run for one dataset: ``NAME/deletions/RUN/000001.json``, each
    created exclusively (whole or not at all, never over another)."""

    def __init__(self, reg: Registry, name: str, run: str) -> None:
        self.loc = reg.location.child(f"{name}/deletions/{run}")
        self.run = run
        self.seq = 0

    def append(self, event: str, **fields: Any) -> None:
        self.seq += 1
        owner = current_owner()
        record = {
            "journal": DELETION_JOURNAL_FORMAT,
            "seq": self.seq,
            "run": self.run,
            "event": event,
            "at": format_time(_utcnow()),
            "by": owner.to_dict(),
            **fields,
        }
        self.loc.create_exclusive(f"{self.seq:06d}.json", json.dumps(record, indent=1).encode("utf-8"))


def deletion_records(
    name: str, *, registry: str | Registry | None = None, storage_options: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every record of every gc run of dataset ``name``, oldest run first, in sequence order."""
    reg = open_registry(registry, storage_options)
    folder = reg.location.child(f"{name}/deletions")
    found: list[tuple[str, int, dict[str, Any]]] = []
    for info in folder.list_files():
        run, _, base = info.path.partition("/")
        match = _RECORD.match(base)
        if not match:
            continue
        try:
            data = json.loads(folder.read_bytes(info.path))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ContractError(
                f"{redact(folder.url_of(info.path))} is not a deletion record (not JSON)"
            ) from None
        if not isinstance(data, dict) or data.get("journal") != DELETION_JOURNAL_FORMAT:
            raise ContractError(
                f"{redact(folder.url_of(info.path))} is not a {DELETION_JOURNAL_FORMAT} record"
            )
        found.append((run, int(match.group(1)), data))
    return [d for _, _, d in sorted(found, key=lambda t: (t[0], t[1]))]


def _new_run() -> str:
    return _utcnow().strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _decide(
    contract: Contract,
    status: VersionStatus,
    aliases: Mapping[str, int],
    *,
    retain_seconds: float,
    now: datetime,
    policy: Any,
) -> tuple[str, str]:
    """(decision, reason) for one retired version."""
    version = contract.version or 0
    pointing = sorted(a for a, v in aliases.items() if v == version)
    if pointing:
        return "refused", (
            f"alias(es) {', '.join(f'{contract.name}@{a}' for a in pointing)} point at it: its data is never "
            "deleted while an alias points to it; move the alias, or fix the registry's aliases.yaml"
        )
    if not written_by_dsm(contract):
        operation = contract.lineage.operation if contract.lineage else "register"
        return "kept", (
            f"its files were not written by dsm ({operation}): gc deletes only what a dsm rewrite wrote"
        )
    try:
        retired_at = parse_time(status.at)
    except (ContractError, ValueError):
        return "kept", f"its retire time {status.at!r} cannot be read: kept"
    due = retired_at + timedelta(seconds=retain_seconds)
    if due > now:
        return "kept", f"retired at {status.at}; kept for the retain period until {format_time(due)}"
    if policy is not None:
        keep, rule = policy.retention_for(classified_fields(contract.schema))
        created = contract.created or (contract.lineage.created if contract.lineage else None)
        if keep and rule:
            if not created:
                return "kept", f"policy rule {rule} applies and the version has no creation time: kept"
            until = parse_time(created) + timedelta(seconds=keep)
            if until > now:
                return "kept", f"policy rule {rule} keeps its data until {format_time(until)}"
    return "collect", f"retired at {status.at}, past the retain period; dsm wrote its files"


def gc(
    names: Sequence[str] = (),
    *,
    retain: str | float = "7d",
    dry_run: bool | None = None,
    yes: bool = False,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> GcReport:
    """Find (and with ``yes=True`` delete) the files of retired versions that nothing else needs.

    ``names`` limits the run to those datasets (every version of every dataset is still consulted
    before a file is deleted). A dry run (the default) changes nothing; ``yes`` deletes and journals.
    The conditions a file must meet are in the module's docstring.

    >>> report = gc(["web-text"], retain="0", yes=True)  # doctest: +SKIP
    >>> report.bytes_deleted  # doctest: +SKIP
    """
    if dry_run and yes:
        raise InputError("--dry-run and --yes exclude each other: gc either only lists or deletes")
    retain_seconds = parse_duration(retain, what="retain")
    reg = open_registry(registry, storage_options)
    reg.select(names, command="gc")
    policy = read_policy(reg.location)
    catalog = reg.catalog(storage_options)
    now = _utcnow()
    run = _new_run()
    decisions: dict[tuple[str, int], tuple[str, str]] = {}
    for (name, version), contract in sorted(catalog.contracts.items()):
        if names and name not in names:
            continue
        status = catalog.statuses[name].get(version)
        if status is None or status.status != "retired":
            continue
        decisions[(name, version)] = _decide(
            contract, status, catalog.aliases[name], retain_seconds=retain_seconds, now=now, policy=policy
        )
    collected = {key for key, (decision, _) in decisions.items() if decision == "collect"}
    # Every file any version outside the collected set lists: never deleted.
    listed_by = catalog.listed_files(exclude=collected)
    journals: dict[str, _DeletionJournal] = {}
    reports = []
    for key in sorted(decisions):
        contract = catalog.contracts[key]
        decision, reason = decisions[key]
        status = catalog.statuses[key[0]][key[1]]
        files: tuple[GcFile, ...] = ()
        if decision == "collect":
            journal = journals.setdefault(key[0], _DeletionJournal(reg, key[0], run))
            files, refused = _collect(
                reg, contract, catalog.location_of(contract), listed_by, journal=journal, act=yes
            )
            if refused is not None:
                decision, reason = "refused", refused
        reports.append(
            GcVersion(
                ref=contract.ref,
                decision=decision,
                reason=reason,
                retired_at=status.at,
                location=redact(contract.location),
                files=files,
            )
        )
    notes = []
    if not decisions:
        notes.append("no retired version" + (f" of {', '.join(names)}" if names else " in the registry"))
    if not yes and any(f.action == "delete" for r in reports for f in r.files):
        notes.append("dry run: nothing was deleted; run again with --yes to delete these files")
    return GcReport(run=run, dry_run=not yes, retain=str(retain), versions=tuple(reports), notes=tuple(notes))


def _collect(
    reg: Registry,
    contract: Contract,
    loc: Location,
    listed_by: Mapping[str, list[str]],
    *,
    journal: _DeletionJournal,
    act: bool,
) -> tuple[tuple[GcFile, ...], str | None]:
    """The files of one collected version with what happens to each, deleted when ``act``; and why
    nothing was deleted when an alias was found pointing at the version just before."""
    present = {f.path: f.size for f in loc.list_files()} if loc.exists() else {}
    planned: list[GcFile] = []
    for shard in contract.shards:
        url = redact(loc.url_of(shard.path))
        canonical = canonical_location(loc, shard.path)
        others = listed_by.get(canonical)
        if others:
            shown = ", ".join(sorted(set(others))[:5])
            planned.append(
                GcFile(
                    url=url,
                    canonical=canonical,
                    bytes=shard.bytes,
                    action="kept",
                    reason=f"listed by {shown}",
                )
            )
        elif shard.path not in present:
            planned.append(GcFile(url=url, canonical=canonical, bytes=shard.bytes, action="missing"))
        elif present[shard.path] != shard.bytes:
            planned.append(
                GcFile(
                    url=url,
                    canonical=canonical,
                    bytes=present[shard.path],
                    action="kept",
                    reason=f"size {present[shard.path]}, not the {shard.bytes} dsm wrote: it changed since",
                )
            )
        else:
            planned.append(GcFile(url=url, canonical=canonical, bytes=shard.bytes, action="delete"))
    header = _rewrite_header(loc)
    if header is not None and header.get("published") == contract.ref:
        canonical = canonical_location(loc, JOURNAL_FILE)
        planned.append(
            GcFile(
                url=redact(loc.url_of(JOURNAL_FILE)),
                canonical=canonical,
                bytes=present.get(JOURNAL_FILE, 0),
                action="kept" if canonical in listed_by else "delete",
                reason="listed by another version" if canonical in listed_by else "",
                kind="rewrite-journal",
            )
        )
    doomed = [f for f in planned if f.action == "delete"]
    if not act or not doomed:
        return tuple(planned), None
    name, version = contract.name, contract.version or 0
    pointing = _pointing(reg, name, version)
    if pointing:  # re-read just before deleting
        why = f"alias {name}@{pointing[0]} points at it now: nothing was deleted"
        return tuple(GcFile(**{**f.to_dict(), "action": "kept", "reason": why}) for f in planned), why
    journal.append(
        "deleting",
        version=version,
        ref=contract.ref,
        location=redact(contract.location),
        files=[{"path": f.url, "canonical": f.canonical, "bytes": f.bytes, "kind": f.kind} for f in doomed],
    )
    done: list[GcFile] = []
    rel_of = {canonical_location(loc, s.path): s.path for s in contract.shards}
    rel_of[canonical_location(loc, JOURNAL_FILE)] = JOURNAL_FILE
    for f in planned:
        if f.action != "delete":
            done.append(f)
            continue
        rel = rel_of[f.canonical]
        if loc.exists(rel):
            loc.remove(rel)
            done.append(GcFile(**{**f.to_dict(), "action": "deleted"}))
        else:
            done.append(GcFile(**{**f.to_dict(), "action": "missing"}))
    journal.append(
        "deleted",
        version=version,
        ref=contract.ref,
        deleted=[f.url for f in done if f.action == "deleted"],
        missing=[f.url for f in done if f.action == "missing"],
        bytes=sum(f.bytes for f in done if f.action == "deleted"),
    )
    reg.set_status(
        name, version, "retired", reason=f"data deleted by gc {journal.run}", by=f"gc {journal.run}"
    )
    return tuple(done), None


def _rewrite_header(loc: Location) -> dict[str, Any] | None:
    try:
        return Journal.read_header(loc)
    except ContractError:
        return None  # not a header dsm can read: not dsm's to delete
