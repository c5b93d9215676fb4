"""``memory://``: one process holds the whole store, so one lock makes check-and-write atomic."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from dsm.storage.readiness import Finding, StoreProbe
from dsm.storage.stores import ObjectStore, conflict

if TYPE_CHECKING:
    from dsm.storage.location import Location

__all__ = ["MemoryProbe", "MemoryStore"]


class MemoryStore(ObjectStore):
    """``memory://``: one process holds the whole store, so one lock makes check-and-write atomic."""

    name = "memory"
    protocol = ("memory",)
    atomic = True
    _lock = threading.Lock()

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        path = loc.path(rel)
        with self._lock:
            if loc.fs.exists(path):
                raise conflict(loc, rel, "already exists; it was not overwritten")
            loc.fs.pipe_file(path, data)

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        path = loc.path(rel)
        with self._lock:
            current = loc.fs.cat_file(path) if loc.fs.exists(path) else None
            if current != expected:
                raise conflict(loc, rel, "was changed by another writer; retry")
            loc.fs.pipe_file(path, new)


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
