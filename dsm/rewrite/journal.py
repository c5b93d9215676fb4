"""The journal of a rewrite at its destination: what plan is being written and which units are complete.

Layout under the destination (names start with ``_``: scans and ``dsm verify`` do not take them for data)::

    _dsm_rewrite.json                  {"plan": KEY, "operation", "source", "outputs", "published": null}
    _dsm_rewrite.lease                 the process writing the destination now (a lease, with a heartbeat)
    _dsm_rewrite/_unit-00012.json      a completed output file: its contract entry (bytes, checksum, rows..)
    _dsm_rewrite/_scatter-00003.json   a completed shuffle pass-1 file, and its bucket index
    _dsm_rewrite/_scatter-00003.arrow  that file (Arrow IPC)
                                       (``--spill-dir URL``: URL/dsm-spill-<plan>/_scatter-00003.arrow)

Every record is written atomically (temporary name, then rename) after the file it describes is complete
and checked, so a record never names a partial file. A resumed run keeps a file only if its size and
checksum still match its record. Once the new version is published all of it is deleted: the folder then
holds the data files alone, as readers that take a whole folder (Polars, Hugging Face ``datasets``,
Spark) expect.

One process at a time writes a destination: :class:`DestinationClaim` is a lease
(:mod:`dsm.storage.lease`) taken before anything there is written or removed; a second rewrite gets
"another rewrite is writing DEST" (ConflictError, exit 3). The claim of a process that died is stale once
it expires, or at once when that process ran on this host.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from typing import Any

from dsm.errors import ContractError
from dsm.storage import TEMP_MARKER, Location, redact, storage_errors
from dsm.storage.lease import DEFAULT_LEASE_SECONDS, Lease, LeaseInfo

__all__ = [
    "CLAIM_FILE",
    "JOURNAL_DIR",
    "JOURNAL_FILE",
    "DestinationClaim",
    "Journal",
    "is_journal_path",
    "remove_spill",
    "remove_temporaries",
]

JOURNAL_FILE = "_dsm_rewrite.json"
JOURNAL_DIR = "_dsm_rewrite"
CLAIM_FILE = "_dsm_rewrite.lease"


def is_journal_path(path: str) -> bool:
    """Whether ``path`` (relative to a destination) is one of the journal's files or the claim."""
    return path in (JOURNAL_FILE, CLAIM_FILE, CLAIM_FILE + ".lock") or path.startswith(JOURNAL_DIR + "/")


class DestinationClaim(Lease):
    """The lease of one destination folder: held by the rewrite writing it (``_dsm_rewrite.lease``)."""

    kind = "rewrite"

    def __init__(self, dest: Location, *, seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        super().__init__(dest, CLAIM_FILE, what=f"destination {redact(dest.url)}", seconds=seconds)

    def busy(self, holder: LeaseInfo) -> str:
        return (
            f"another rewrite is writing {redact(self.loc.url)} ({holder.describe()}): wait for it to "
            "finish, or choose another destination; if that process died, retry once its lease expires (at "
            "once on the host it ran on)"
        )

    def take(self) -> DestinationClaim:
        """Acquire the claim (a dead holder's is stale: see the module) and keep it alive."""
        self.acquire(take_dead=True)
        self.start_heartbeat()
        return self

    def __exit__(self, *exc: object) -> None:
        # Done or failed, the claim file goes with this process's work: a released lease there would only
        # be a file no reader wants (the journal says what a failed run completed).
        try:
            self.remove()
        finally:
            self.release()


class Journal:
    """Reads and writes the journal of one plan (``key``) at ``dest``."""

    def __init__(self, dest: Location, key: str) -> None:
        self.dest = dest
        self.key = key

    @staticmethod
    def read_header(dest: Location) -> dict[str, Any] | None:
        """The header at ``dest``, or None when there is none."""
        if not dest.exists(JOURNAL_FILE):
            return None
        raw = dest.read_bytes(JOURNAL_FILE)
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            raise ContractError(
                f"{redact(dest.url_of(JOURNAL_FILE))} is not a dsm rewrite journal (not JSON); "
                "remove it or choose another destination"
            ) from None
        if not isinstance(data, dict) or "plan" not in data:
            raise ContractError(f"{redact(dest.url_of(JOURNAL_FILE))} is not a dsm rewrite journal")
        return data

    def write_header(self, header: dict[str, Any]) -> None:
        self.dest.write_bytes_atomic(
            JOURNAL_FILE, json.dumps({**header, "plan": self.key}, indent=2).encode()
        )

    def _record_path(self, kind: str, index: int) -> str:
        return f"{JOURNAL_DIR}/_{kind}-{index:05d}.json"

    def record(self, kind: str, index: int, data: dict[str, Any]) -> None:
        """Mark unit ``index`` of ``kind`` complete with ``data`` (atomically)."""
        payload = json.dumps({"plan": self.key, "index": index, **data}).encode()
        self.dest.write_bytes_atomic(self._record_path(kind, index), payload)

    def records(self, kind: str) -> dict[int, dict[str, Any]]:
        """The completed units of ``kind`` recorded for this plan, by index."""
        found: dict[int, dict[str, Any]] = {}
        prefix = f"_{kind}-"
        for info in self.dest.child(JOURNAL_DIR).list_files(recursive=False):
            if not (info.path.startswith(prefix) and info.path.endswith(".json")):
                continue
            try:
                data = json.loads(self.dest.read_bytes(f"{JOURNAL_DIR}/{info.path}"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue  # an unreadable record is a unit to redo
            if isinstance(data, dict) and data.get("plan") == self.key and isinstance(data.get("index"), int):
                found[data["index"]] = data
        return found

    def remove(self) -> None:
        """Delete the whole journal (records, pass-1 files and the header): the rewrite is published."""
        self.clear_units()
        if self.dest.exists(JOURNAL_FILE):
            self.dest.remove(JOURNAL_FILE)

    def clear_units(self) -> None:
        """Remove every record and pass-1 file (all written by dsm), keeping the header."""
        for info in self.dest.child(JOURNAL_DIR).list_files():
            self.dest.remove(f"{JOURNAL_DIR}/{info.path}")
        with contextlib.suppress(OSError):  # an empty folder (local disk) goes too; object stores have none
            self.dest.fs.rmdir(self.dest.path(JOURNAL_DIR))


def remove_spill(spill: Location) -> int:
    """Delete a shuffle's pass-1 files in its ``--spill-dir`` folder (``dsm-spill-<plan>/``): only files
    named as dsm names them there, never anything else. Returns how many were removed."""
    removed = 0
    for info in spill.list_files(recursive=False):
        if info.path.startswith("_scatter-") and info.path.endswith(".arrow"):
            spill.remove(info.path)
            removed += 1
    with contextlib.suppress(OSError):  # the empty folder too (local disk); object stores have none
        spill.fs.rmdir(spill.root)
    return removed


def remove_temporaries(dest: Location, names: set[str]) -> int:
    """Delete temporary files a killed run left at ``dest`` for the files called ``names`` (or for journal
    files); other temporary files are not dsm's to judge and stay. Returns how many were removed."""
    with storage_errors(dest.url, dest):
        if not dest.fs.exists(dest.root):
            return 0
        found = dest.fs.find(dest.root, withdirs=False)
    removed = 0
    prefix = dest.root.rstrip("/") + "/"
    for full in found:
        base = posixpath.basename(full)
        if not base.startswith(TEMP_MARKER):
            continue
        rest = base[len(TEMP_MARKER) :]
        target = rest.split("-", 1)[1] if "-" in rest else ""
        rel = full[len(prefix) :] if full.startswith(prefix) else base
        folder = posixpath.dirname(rel)
        ours = (folder == "" and (target in names or target in (JOURNAL_FILE, CLAIM_FILE))) or (
            folder == JOURNAL_DIR and target.startswith("_")
        )
        if ours:
            with storage_errors(dest.url_of(rel), dest):
                dest.fs.rm(full)
            removed += 1
    return removed
