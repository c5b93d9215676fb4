"""What a store says about itself: the store-specific half of ``dsm storage check``.

``dsm.commands.storage_check`` runs the checks every store shares (permissions, conditional create,
consistency, throughput) through :class:`~dsm.storage.Location`; the questions only a store's own API can
answer are asked through its :class:`StoreProbe` (:func:`probe_for`), one module per store:

- does the store itself refuse a write conditioned on a stale version token (S3 ``If-Match``, Azure
  ``IfNotModified``), so that an alias move is atomic there;
- which full-object checksums it returns for an object dsm wrote (what ``verify --fast`` can trust);
- whether deleted or overwritten objects can be recovered (versioning, soft delete);
- whether it encrypts at rest, and whether public access is blocked.

Each answer is a :class:`Finding`: ``pass``, ``warn``, ``fail``, or ``unknown`` where the store's API does
not tell (never a guess), with the evidence the answer rests on.
"""

from __future__ import annotations

import importlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from dsm.errors import ConflictError

if TYPE_CHECKING:
    from dsm.storage import Location

__all__ = [
    "STATUSES",
    "Finding",
    "GenericProbe",
    "LocalProbe",
    "MemoryProbe",
    "StoreProbe",
    "StoredFile",
    "probe_for",
]

STATUSES = ("pass", "warn", "fail", "unknown")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One answer: ``check`` (``encryption``), ``status`` (pass, warn, fail, unknown), what it means
    (``detail``) and what it rests on (``evidence``: the store's own fields, never a credential)."""

    check: str
    status: str
    detail: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"finding status {self.status!r} is not one of {STATUSES}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status,
            "detail": self.detail,
            "evidence": dict(self.evidence),
        }


@dataclass(frozen=True, kw_only=True)
class StoredFile:
    """A file as the store lists it: its size and storage class (None: the store's default class)."""

    size: int
    storage_class: str | None = None
    tier: str | None = None


class StoreProbe:
    """The questions of ``dsm storage check`` that only a store's API answers. This base answers
    ``unknown`` to each (a store dsm has no probe for), and tests compare-and-swap the generic way."""

    name: ClassVar[str] = "generic"

    def stale_write(self, loc: Location, rel: str) -> Finding:
        """``rel`` exists; a replacement conditioned on content it no longer has must be refused."""
        from dsm.storage import compare_and_swap

        current = loc.read_bytes(rel)
        try:
            compare_and_swap(loc, rel, current + b"-stale", b"must-not-be-written")
        except ConflictError:
            if loc.read_bytes(rel) != current:
                return Finding(
                    check="compare-and-swap", status="fail", detail="refused, but the object changed anyway"
                )
            atomic = loc.atomic_writes
            return Finding(
                check="compare-and-swap",
                status="pass" if atomic else "warn",
                detail=(
                    f"a swap on content the object no longer had was refused ({self.atomic_detail()})"
                    if atomic
                    else "a stale swap is refused by reading and comparing first: another writer could "
                    "slip between the read and the write (not atomic here)"
                ),
                evidence={"stale_swap": "refused", "atomic": atomic, "how": self.atomic_detail()},
            )
        return Finding(
            check="compare-and-swap",
            status="fail",
            detail="a swap that expected content the object no longer had was not refused",
            evidence={"stale_swap": "written"},
        )

    def atomic_detail(self) -> str:
        return "check, then write (no conditional writes in dsm for this store)"

    def checksums(self, loc: Location, rel: str) -> Finding:
        """Which full-object checksums the store keeps for ``rel`` (an object dsm wrote)."""
        return Finding(
            check="server-checksums",
            status="unknown",
            detail=f"dsm cannot ask {loc.protocol}:// for checksums; verify --fast reads every shard here",
        )

    def delete_protection(self, loc: Location, rel: str | None) -> Finding:
        """Whether deleted or overwritten objects can be recovered (versioning, soft delete)."""
        return Finding(
            check="delete-protection",
            status="unknown",
            detail=f"dsm cannot ask {loc.protocol}:// whether deleted objects can be recovered",
        )

    def encryption(self, loc: Location, rel: str | None) -> Finding:
        """Whether data is encrypted at rest (``rel``: an object dsm wrote, when there is one)."""
        return Finding(
            check="encryption",
            status="unknown",
            detail=f"dsm cannot ask {loc.protocol}:// whether it encrypts data at rest",
        )

    def public_access(self, loc: Location) -> Finding:
        """Whether the location is, or can be made, readable by anyone."""
        return Finding(
            check="public-access",
            status="unknown",
            detail=f"dsm cannot ask {loc.protocol}:// who may read it",
        )

    def purge(self, loc: Location, prefix: str) -> dict[str, Any]:
        """Remove what a delete leaves behind under ``prefix`` (old versions, delete markers); returns
        what was removed and what could not be."""
        return {}

    def inventory(self, loc: Location) -> dict[str, StoredFile]:
        """Every file below ``loc`` (one recursive listing) with its size and storage class, by path
        relative to it; ``{}`` when the location does not exist."""
        return {
            rel: StoredFile(size=int(info.get("size") or 0), storage_class=self.storage_class(info))
            for rel, info in _listing(loc).items()
        }

    def storage_class(self, info: Mapping[str, Any]) -> str | None:
        """The storage class of one listed file (None: the store's default)."""
        return None


def _listing(loc: Location) -> dict[str, Mapping[str, Any]]:
    """``fs.find`` below ``loc`` with details, by relative path; temporary files left out."""
    from dsm.storage import is_temporary, storage_errors

    with storage_errors(loc.url):
        if not loc.fs.exists(loc.root):
            return {}
        if not loc.fs.isdir(loc.root):
            info = loc.fs.info(loc.root)
            return {os.path.basename(loc.root): info}
        found = loc.fs.find(loc.root, detail=True, withdirs=False)
    head = loc.root.rstrip("/") + "/"
    out = {}
    for full, info in found.items():
        if info.get("type", "file") != "file":
            continue
        rel = full[len(head) :] if full.startswith(head) else os.path.basename(full)
        if not is_temporary(rel):
            out[rel] = info
    return out


class GenericProbe(StoreProbe):
    """A store dsm has no probe for (GCS, HTTP, SFTP, ...)."""


class MemoryProbe(StoreProbe):
    """``memory://``: one process's memory."""

    name = "memory"

    def atomic_detail(self) -> str:
        return "check and write under one lock in this process (memory:// is not shared between processes)"

    def checksums(self, loc: Location, rel: str) -> Finding:
        return Finding(
            check="server-checksums",
            status="warn",
            detail="memory:// keeps no checksum of its own; verify --fast reads every shard here",
        )

    def delete_protection(self, loc: Location, rel: str | None) -> Finding:
        return Finding(
            check="delete-protection",
            status="warn",
            detail="memory:// keeps nothing after a delete or an overwrite",
        )

    def encryption(self, loc: Location, rel: str | None) -> Finding:
        return Finding(
            check="encryption",
            status="unknown",
            detail="memory:// lives in this process's memory; nothing is stored at rest",
        )

    def public_access(self, loc: Location) -> Finding:
        return Finding(
            check="public-access",
            status="pass",
            detail="memory:// is reachable only from inside this process",
        )


class LocalProbe(StoreProbe):
    """Local disk (and what the operating system tells about it)."""

    name = "local"

    def atomic_detail(self) -> str:
        return "link() to create, a lock file and rename() to swap"

    def checksums(self, loc: Location, rel: str) -> Finding:
        return Finding(
            check="server-checksums",
            status="warn",
            detail="local disk keeps no checksum of a file; verify --fast reads every shard here",
        )

    def delete_protection(self, loc: Location, rel: str | None) -> Finding:
        return Finding(
            check="delete-protection",
            status="unknown",
            detail="local disk: file-system snapshots or backups, if any, are not visible to dsm",
        )

    def encryption(self, loc: Location, rel: str | None) -> Finding:
        device = _block_device(loc.root)
        chain = _dm_crypt_chain(device) if device else []
        if chain:
            return Finding(
                check="encryption",
                status="pass",
                detail=f"on a dm-crypt device ({' on '.join(chain)})",
                evidence={"device": device, "dm": chain},
            )
        return Finding(
            check="encryption",
            status="unknown",
            detail="not on a dm-crypt device dsm can see; file-system or hardware encryption is not visible",
            evidence={"device": device},
        )

    def public_access(self, loc: Location) -> Finding:
        path = _existing_parent(loc.root)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        evidence: dict[str, Any] = {"path": path, "mode": f"{mode:o}"}
        closed = _closed_ancestor(path)
        if closed is not None:  # other users cannot even reach the folder
            evidence["closed_by"] = {"path": closed[0], "mode": f"{closed[1]:o}"}
            return Finding(
                check="public-access",
                status="pass",
                detail=f"other users of this machine cannot reach it ({closed[0]} is mode {closed[1]:o})",
                evidence=evidence,
            )
        if mode & stat.S_IWOTH:
            return Finding(
                check="public-access",
                status="fail",
                detail=f"{path} is writable by every user of this machine (mode {mode:o})",
                evidence=evidence,
            )
        if mode & stat.S_IROTH:
            return Finding(
                check="public-access",
                status="warn",
                detail=f"{path} can be listed by every user of this machine (mode {mode:o})",
                evidence=evidence,
            )
        return Finding(
            check="public-access",
            status="pass",
            detail=f"{path} cannot be listed by other users (mode {mode:o})",
            evidence=evidence,
        )


def _closed_ancestor(path: str) -> tuple[str, int] | None:
    """The nearest folder at or above ``path`` that other users may not enter (no ``o+x``), if any."""
    while True:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if not mode & stat.S_IXOTH:
            return path, mode
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _existing_parent(path: str) -> str:
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _block_device(path: str) -> str | None:
    """``MAJOR:MINOR`` of the block device holding ``path`` (None for tmpfs, overlay and the like)."""
    dev = os.stat(_existing_parent(path)).st_dev
    name = f"{os.major(dev)}:{os.minor(dev)}"
    return name if os.path.exists(f"/sys/dev/block/{name}") else None


def _dm_crypt_chain(device: str, depth: int = 0) -> list[str]:
    """The device-mapper layers from ``device`` down to a dm-crypt one (LVM on LUKS...), else []."""
    base = f"/sys/dev/block/{device}"
    try:
        with open(f"{base}/dm/uuid") as handle:
            uuid = handle.read().strip()
        with open(f"{base}/dm/name") as handle:
            name = handle.read().strip()
    except OSError:
        return []
    if uuid.startswith("CRYPT-"):
        return [f"{name} ({uuid.split('-')[1]})"]
    if depth > 4:
        return []
    for slave in sorted(os.listdir(f"{base}/slaves")) if os.path.isdir(f"{base}/slaves") else []:
        try:
            with open(f"{base}/slaves/{slave}/dev") as handle:
                below = _dm_crypt_chain(handle.read().strip(), depth + 1)
        except OSError:
            continue
        if below:
            return [name, *below]
    return []


_KNOWN = {
    "s3": "dsm.readiness.s3:S3Probe",
    "s3a": "dsm.readiness.s3:S3Probe",
    "az": "dsm.readiness.azure:AzureProbe",
    "abfs": "dsm.readiness.azure:AzureProbe",
    "abfss": "dsm.readiness.azure:AzureProbe",
    "memory": "dsm.readiness:MemoryProbe",
}


def probe_for(loc: Location) -> StoreProbe:
    """The :class:`StoreProbe` of ``loc``'s store (local disk, memory, S3, Azure; else generic)."""
    if loc.is_local:
        return LocalProbe()
    target = _KNOWN.get(loc.protocol)
    if target is None:
        return GenericProbe()
    module, _, cls = target.partition(":")
    probe: StoreProbe = getattr(importlib.import_module(module), cls)()
    return probe
