"""The journal of a cutover: append-only records in the registry, one file per record.

Layout (under the registry)::

    NAME/cutovers/ID/journal/000001.json   {"journal": "dsm-cutover-journal-v1", "seq": 1, ...}
    NAME/cutovers/ID/journal/000002.json   ...
    NAME/cutovers/ID/lease.json            who runs it now (dsm.commands.cutover.lease)

A record is created with :meth:`Location.create_exclusive` under the next sequence number, so it is written
whole or not at all and never overwrites another record: two writers cannot both append record ``n``. The
state of the cutover is derived from the records alone (:func:`dsm.commands.cutover.state.derive_state`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from dsm.commands.cutover.state import EVENTS, CutoverState, derive_state, now_text
from dsm.errors import ConflictError, ContractError, InputError
from dsm.storage import Location, redact
from dsm.storage.lease import Owner, current_owner

__all__ = ["JOURNAL_FORMAT", "CutoverJournal", "Owner", "current_owner"]

JOURNAL_FORMAT = "dsm-cutover-journal-v1"
_RECORD = re.compile(r"^(\d{6,})\.json$")


class CutoverJournal:
    """The records of cutover ``cutover_id`` in the folder ``loc`` (``NAME/cutovers/ID`` of a registry).

    Records are immutable once written, so the journal caches what it has read and lists the folder
    again only in :meth:`refresh`.
    """

    def __init__(self, loc: Location, cutover_id: str, *, owner: Owner | None = None) -> None:
        self.loc = loc
        self.id = cutover_id
        self.owner = owner or current_owner()
        self._records: dict[int, dict[str, Any]] = {}

    def exists(self) -> bool:
        return self.loc.exists("journal/000001.json")

    def refresh(self) -> list[dict[str, Any]]:
        """Every record, read from storage, in sequence order."""
        for info in self.loc.child("journal").list_files(recursive=False):
            match = _RECORD.match(info.path)
            if not match or int(match.group(1)) in self._records:
                continue
            rel = f"journal/{info.path}"
            try:
                data = json.loads(self.loc.read_bytes(rel))
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise ContractError(
                    f"{redact(self.loc.url_of(rel))} is not a cutover journal record (not JSON); "
                    "the journal is damaged: restore the file from a backup"
                ) from None
            if not isinstance(data, dict) or data.get("journal") != JOURNAL_FORMAT:
                raise ContractError(f"{redact(self.loc.url_of(rel))} is not a {JOURNAL_FORMAT} record")
            if data.get("seq") != int(match.group(1)):
                raise ContractError(f"{redact(self.loc.url_of(rel))}: its seq does not match its file name")
            self._records[int(match.group(1))] = data
        return self.records()

    def records(self) -> list[dict[str, Any]]:
        """The records read so far, in sequence order (call :meth:`refresh` to read new ones)."""
        return [self._records[k] for k in sorted(self._records)]

    def state(self) -> CutoverState:
        """The state derived from every record on storage."""
        records = self.refresh()
        if not records:
            raise InputError(f"cutover {self.id} has no journal at {redact(self.loc.url)}")
        return derive_state(records)

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        """Write the next record (atomically, never over another one) and return it.

        Raises :class:`~dsm.errors.ConflictError` when another process wrote that record first: the
        lease that should have kept it out was broken.
        """
        if event not in EVENTS:
            raise InputError(f"unknown cutover journal event {event!r}")
        seq = (max(self._records) if self._records else 0) + 1
        record: dict[str, Any] = {
            "journal": JOURNAL_FORMAT,
            "seq": seq,
            "cutover": self.id,
            "event": event,
            "at": now_text(),
            "by": self.owner.to_dict(),
        }
        record.update({k: v for k, v in fields.items() if v is not None})
        payload = json.dumps(record, indent=1, sort_keys=False, default=str).encode("utf-8")
        try:
            self.loc.create_exclusive(f"journal/{seq:06d}.json", payload)
        except ConflictError:
            raise ConflictError(
                f"record {seq} of cutover {self.id} was written by another process: its lease was broken "
                f"while this one ran; this run stops (see `dsm cutover status {self.id}`)"
            ) from None
        self._records[seq] = json.loads(payload)
        return self._records[seq]
