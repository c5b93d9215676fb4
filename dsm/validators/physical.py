"""Physical identity of a shard: it exists, has the registered size, and its bytes hash to the checksum."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dsm.checksum import algorithm_of, file_checksum, known_algorithms
from dsm.contract import Shard
from dsm.errors import DatasetNotFound, StorageError
from dsm.storage import Location, redact

__all__ = ["PhysicalCheck", "check_physical"]


@dataclass(frozen=True, kw_only=True)
class PhysicalCheck:
    """Status is one of ok, missing, resized, corrupt, unreadable, unverified; detail says why."""

    path: str
    status: str
    detail: str = ""
    checksum: str | None = None


def check_physical(
    loc: Location,
    shard: Shard,
    *,
    actual_size: int | None,
    on_bytes: Callable[[int], None] | None = None,
) -> PhysicalCheck:
    """Compare one shard on storage with its contract entry. ``actual_size`` None means not listed."""
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
        return PhysicalCheck(path=shard.path, status="unverified", detail="the contract has no checksum for it")
    algorithm = algorithm_of(shard.checksum)
    if algorithm not in known_algorithms():
        return PhysicalCheck(
            path=shard.path,
            status="unverified",
            detail=f"checksum algorithm {algorithm!r} is not known to this dsm",
        )
    try:
        with loc.open(shard.path) as handle:
            actual = file_checksum(handle, algorithm, on_bytes=on_bytes)
    except DatasetNotFound:
        return PhysicalCheck(path=shard.path, status="missing", detail="vanished while being read")
    except StorageError as exc:
        return PhysicalCheck(path=shard.path, status="unreadable", detail=redact(str(exc)))
    if actual != shard.checksum:
        return PhysicalCheck(
            path=shard.path,
            status="corrupt",
            detail=f"checksum {_short(actual)} expected {_short(shard.checksum)}: the bytes changed after "
            "registration; restore the shard or re-register",
            checksum=actual,
        )
    return PhysicalCheck(path=shard.path, status="ok", checksum=actual)


def _short(checksum: str) -> str:
    algorithm, _, digest = checksum.partition(":")
    return f"{algorithm}:{digest[:12]}.."
