"""Physical identity of a shard: it exists, has the registered size, and its bytes hash to the checksum."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dsm.contract import Shard
from dsm.errors import DatasetNotFound, DsmError, StorageError
from dsm.hashing.checksum import algorithm_of, file_checksum, known_algorithms
from dsm.hashing.checksum import short_checksum as _short
from dsm.storage import Location, redact
from dsm.storage.stores import server_checksum

__all__ = ["PhysicalCheck", "check_physical", "compare_checksum", "precheck", "read_failure"]


@dataclass(frozen=True, kw_only=True)
class PhysicalCheck:
    """Status is one of ok, missing, resized, corrupt, unreadable, unverified; detail says why."""

    path: str
    status: str
    detail: str = ""
    checksum: str | None = None
    verified_by: str = "bytes"
    """``bytes`` (dsm read and hashed them), ``server`` (the store's full-object checksum matched the
    recorded one; nothing was read) or ``listing`` (presence and size only)."""


def _server_check(loc: Location, shard: Shard) -> PhysicalCheck | None:
    """ok by the store's checksum when it equals the recorded one; None to fall back to the bytes."""
    if not shard.server_checksum:
        return None
    try:
        current = server_checksum(loc, shard.path)
    except (DsmError, OSError):
        return None
    if current is None or current.value != shard.server_checksum:
        # None: the store keeps no checksum now. A different value is confirmed from the bytes, since a
        # client-set value (Azure Content-MD5) can be wrong while the bytes are right.
        return None
    if current.size is not None and current.size != shard.bytes:
        return None
    return PhysicalCheck(
        path=shard.path,
        status="ok",
        detail=f"store checksum {current.algorithm} matches the contract",
        verified_by="server",
    )


def precheck(shard: Shard, *, actual_size: int | None) -> PhysicalCheck | None:
    """What the listing and the contract decide before any byte is read: missing, resized, or unverified
    (no checksum, or one of an unknown algorithm); None when the bytes must be read."""
    if actual_size is None:
        return PhysicalCheck(
            path=shard.path,
            status="missing",
            detail="not found at the location; restore it from a copy or re-register the dataset",
        )
    if actual_size != shard.bytes:
        kind = "truncated" if actual_size < shard.bytes else "grown"
        return PhysicalCheck(
            path=shard.path,
            status="resized",
            detail=f"{kind}: {actual_size} bytes, expected {shard.bytes}",
        )
    if not shard.checksum:
        return PhysicalCheck(
            path=shard.path, status="unverified", detail="the contract has no checksum for it"
        )
    algorithm = algorithm_of(shard.checksum)
    if algorithm not in known_algorithms():
        return PhysicalCheck(
            path=shard.path,
            status="unverified",
            detail=f"checksum algorithm {algorithm!r} is not known to this dsm",
        )
    return None


def compare_checksum(shard: Shard, actual: str) -> PhysicalCheck:
    """ok, or corrupt naming both checksums: ``actual`` (of the bytes read) against the contract's."""
    if actual != shard.checksum:
        return PhysicalCheck(
            path=shard.path,
            status="corrupt",
            detail=f"checksum {_short(actual)} expected {_short(shard.checksum or '')}: the bytes changed "
            "after registration; restore the shard or re-register",
            checksum=actual,
        )
    return PhysicalCheck(path=shard.path, status="ok", checksum=actual)


def read_failure(shard: Shard, exc: DsmError) -> PhysicalCheck:
    """missing (it vanished while being read) or unreadable, for a storage error during the read."""
    if isinstance(exc, DatasetNotFound):
        return PhysicalCheck(path=shard.path, status="missing", detail="vanished while being read")
    return PhysicalCheck(path=shard.path, status="unreadable", detail=redact(str(exc)))


def check_physical(
    loc: Location,
    shard: Shard,
    *,
    actual_size: int | None,
    on_bytes: Callable[[int], None] | None = None,
    fast: bool = False,
) -> PhysicalCheck:
    """Compare one shard on storage with its contract entry. ``actual_size`` None means not listed.

    With ``fast``, a shard whose contract records a ``server_checksum`` is checked against the store's
    current full-object checksum without reading it (``verified_by="server"``); every other shard, and
    any shard whose store checksum is absent or differs, is read and hashed.
    """
    if actual_size is not None and actual_size == shard.bytes and fast:
        by_server = _server_check(loc, shard)
        if by_server is not None:
            return by_server
    decided = precheck(shard, actual_size=actual_size)
    if decided is not None:
        return decided
    try:
        with loc.open(shard.path) as handle:
            actual = file_checksum(handle, algorithm_of(shard.checksum or ""), on_bytes=on_bytes)
    except (DatasetNotFound, StorageError) as exc:
        return read_failure(shard, exc)
    return compare_checksum(shard, actual)
