"""``memory://``: one process holds the whole store, so one lock makes check-and-write atomic."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from dsm.storage.stores import ObjectStore, conflict

if TYPE_CHECKING:
    from dsm.storage.location import Location

__all__ = ["MemoryStore"]


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
