"""What a cutover may delete: the files of a version no other version of any dataset lists, and only while
each is still the file the contract lists (``--delete-old``, rollback's discard; docs/cutover.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dsm.contract import Contract, Shard
from dsm.hashing.checksum import algorithm_of, file_checksum, short_checksum
from dsm.registry import Registry
from dsm.storage import Location, canonical_location

__all__ = ["guarded_deletion"]


def guarded_deletion(
    registry: Registry,
    loc: Location,
    paths: Iterable[str],
    *,
    owner: Contract | None,
    storage_options: Any,
    content: bool = True,
) -> tuple[list[tuple[str, int]], list[dict[str, Any]], list[str]]:
    """Which of ``paths`` (under ``loc``) may be deleted: ``(deletable [(path, bytes)], kept [{path,
    reason}], the deletable ones compared by size alone)``. A file is kept when any version of any dataset
    other than ``owner`` lists it (canonical locations compared: a dataset registered from a parent folder
    or through a symlink lists the same file), or when it is no longer the file ``owner`` lists
    (:func:`_changed`; without ``content``, its size alone: a rollback discards the copy it wrote even
    where a byte of it was damaged); files already gone are neither."""
    catalog = registry.catalog(storage_options)
    exclude = {(owner.name, owner.version or 0)} if owner is not None else set()
    listed = catalog.listed_files(exclude=exclude)
    recorded = {s.path: s for s in owner.shards} if owner is not None else {}
    present = {f.path: f.size for f in loc.list_files()} if loc.exists() else {}
    deletable: list[tuple[str, int]] = []
    kept: list[dict[str, Any]] = []
    by_size: list[str] = []
    for path in sorted(set(paths)):
        if path not in present:
            continue
        others = listed.get(canonical_location(loc, path))
        if others:
            kept.append({"path": path, "reason": f"listed by {', '.join(sorted(set(others))[:5])}"})
            continue
        shard = recorded.get(path)
        changed, compared = _changed(loc, path, present[path], shard, content) if shard else (None, "")
        if changed is not None:
            kept.append({"path": path, "reason": changed})
            continue
        deletable.append((path, present[path]))
        if compared == "size":
            by_size.append(path)
    return deletable, kept, by_size


def _changed(loc: Location, path: str, size: int, shard: Shard, content: bool) -> tuple[str | None, str]:
    """Why the file at ``path`` is not the one ``shard`` lists (None when it is), and what was compared:
    its size, then the store's full-object checksum where the contract recorded one (no read), else the
    checksum of its bytes on local disk (read once). On an object store without a recorded store checksum
    the size is all that is compared: reading a copy only to delete it would cost its whole egress."""
    if size != shard.bytes:
        return f"size {size}, not the {shard.bytes} bytes listed", "size"
    if not content:
        return None, "size"
    if shard.server_checksum is not None and not loc.is_local:
        found = loc.server_checksum(path)
        if found is not None and algorithm_of(shard.server_checksum) == found.algorithm:
            if found.value != shard.server_checksum:
                return f"the store's checksum {found.value}, not the {shard.server_checksum} listed", "store"
            return None, "store"
    if loc.is_local and shard.checksum is not None:
        with loc.open(path) as handle:
            actual = file_checksum(handle, algorithm_of(shard.checksum))
        if actual != shard.checksum:
            return (
                f"checksum {short_checksum(actual)}, not the {short_checksum(shard.checksum)} listed",
                "bytes",
            )
        return None, "bytes"
    return None, "size"
