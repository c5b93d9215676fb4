"""What a store says about itself: the store-specific half of ``dsm storage check``.

``dsm.commands.storage_check`` runs the checks every store shares (permissions, conditional create,
consistency, throughput) through :class:`~dsm.storage.Location`; the questions only a store's own API can
answer are asked through its :class:`StoreProbe` (:func:`probe_for`), which lives in the store's own module
(:mod:`dsm.storage.local`, :mod:`~dsm.storage.memory`, :mod:`~dsm.storage.s3`, :mod:`~dsm.storage.azure`):

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from dsm.errors import ConflictError

if TYPE_CHECKING:
    from dsm.storage.location import Location

__all__ = ["STATUSES", "Finding", "GenericProbe", "StoreProbe", "StoredFile", "listing", "probe_for"]

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
        from dsm.storage.location import compare_and_swap

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
            for rel, info in listing(loc).items()
        }

    def storage_class(self, info: Mapping[str, Any]) -> str | None:
        """The storage class of one listed file (None: the store's default)."""
        return None


def listing(loc: Location) -> dict[str, Mapping[str, Any]]:
    """``fs.find`` below ``loc`` with details, by relative path; temporary files left out."""
    from dsm.storage.location import is_temporary, storage_errors

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


# Each store's probe lives in that store's module; named here so that nothing loads a backend it needs not.
_KNOWN = {
    "file": "dsm.storage.local:LocalProbe",
    "s3": "dsm.storage.s3:S3Probe",
    "s3a": "dsm.storage.s3:S3Probe",
    "az": "dsm.storage.azure:AzureProbe",
    "abfs": "dsm.storage.azure:AzureProbe",
    "abfss": "dsm.storage.azure:AzureProbe",
    "memory": "dsm.storage.memory:MemoryProbe",
}


def probe_for(loc: Location) -> StoreProbe:
    """The :class:`StoreProbe` of ``loc``'s store (local disk, memory, S3, Azure; else generic)."""
    target = _KNOWN["file"] if loc.is_local else _KNOWN.get(loc.protocol)
    if target is None:
        return GenericProbe()
    module, _, cls = target.partition(":")
    probe: StoreProbe = getattr(importlib.import_module(module), cls)()
    return probe
