"""Matching the rows of two versions, the engine behind :mod:`dsm.inspect.rowdiff`: value hashes, hash
partitions spilled to a work folder and joined by key, or two streams compared by position.

Every cell is hashed by its typed value with the row fingerprint's value hash (``dsm-rows-v1``): a change of
format, compression, sharding or dictionary encoding is not a change. By key, each side's rows (key columns,
position, one hash per compared column) are cut into partitions by the hash of their key; partition ``p`` of
OLD is joined with partition ``p`` of NEW (Arrow's hash join, a full outer join), so memory holds one
partition whatever the datasets' sizes. The differences go to :class:`Results`, bucketed by position so that
any page of them reads one bucket.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from dsm.engine import Progress, default_workers, map_units
from dsm.errors import InputError
from dsm.hashing.fingerprint import hash_values
from dsm.inspect.masking import MASK
from dsm.inspect.source import RowSource
from dsm.inspect.view import plain

__all__ = [
    "CHANGED_COLUMNS",
    "DIFF_KINDS",
    "NEW_POSITION",
    "OLD_POSITION",
    "Matched",
    "Results",
    "match_by_key",
    "match_by_position",
    "partitions_for",
]

DIFF_KINDS = ("changed", "added", "removed")
OLD_POSITION = "__dsm_old_position"
NEW_POSITION = "__dsm_new_position"
CHANGED_COLUMNS = "__dsm_changed_columns"
"""Columns of a difference: its positions on each side, and (changed rows) the indexes of the compared
columns that differ."""
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True, kw_only=True)
class Matched:
    """What a comparison counted; ``note`` says why nothing was read when fingerprints proved it."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    unchanged: int = 0
    changed_cells: Mapping[str, int] = field(default_factory=dict)
    skipped_shards: int = 0
    skipped_rows: int = 0
    read_rows_old: int = 0
    read_rows_new: int = 0
    partitions: int = 0
    identical_by_fingerprint: bool = False
    note: str | None = None


# ------------------------------------------------------------------------------------------- hashing


def _key_hash(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    combined = np.zeros(len(columns[0]) if columns else 0, dtype=np.uint64)
    for column in columns:
        with np.errstate(over="ignore"):
            combined = (combined * _GOLDEN) ^ hash_values(column)
    return combined


def _hash_table(
    batch: pa.RecordBatch, key: Sequence[str], compared: Sequence[str], first: int, side: str
) -> pa.Table:
    """Key columns, the position of each row and one value hash per compared column."""
    prefix = "o" if side == "old" else "n"
    arrays: dict[str, Any] = {name: batch.column(name) for name in key}
    arrays[OLD_POSITION if side == "old" else NEW_POSITION] = pa.array(
        np.arange(first, first + batch.num_rows, dtype=np.int64)
    )
    for i, name in enumerate(compared):
        arrays[f"__dsm_{prefix}{i}"] = pa.array(hash_values(batch.column(name)), pa.uint64())
    return pa.table(arrays)


class Spill:
    """Arrow IPC stream files in a work folder, one per name, appended to by several threads."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._writers: dict[str, Any] = {}
        self._sinks: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.rows: dict[str, int] = {}

    def write(self, name: str, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            writer = self._writers.get(name)
            if writer is None:
                sink = pa.OSFile(str(self.folder / f"{name}.arrow"), "wb")
                self._sinks[name] = sink
                writer = self._writers[name] = ipc.new_stream(sink, table.schema)
            writer.write_table(table)
            self.rows[name] = self.rows.get(name, 0) + table.num_rows

    def close(self) -> None:
        for name, writer in list(self._writers.items()):
            writer.close()
            self._sinks[name].close()
        self._writers.clear()
        self._sinks.clear()

    def read(self, name: str) -> pa.Table | None:
        path = self.folder / f"{name}.arrow"
        if not path.exists():
            return None
        with pa.OSFile(str(path), "rb") as source:
            return ipc.open_stream(source).read_all()


class Results:
    """The differences of one comparison, by kind, in files bucketed by position (bucket ``b`` of
    ``buckets`` holds the ``b``-th slice of the side's positions): any page reads one or two buckets."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._spill = Spill(folder)
        self.buckets = 1

    def emit(self, kind: str, table: pa.Table, rows: int) -> None:
        """Differences of ``kind`` (their positions on a side of ``rows`` rows) into their buckets."""
        if table.num_rows == 0:
            return
        column = NEW_POSITION if kind == "added" else OLD_POSITION
        positions = table.column(column).to_numpy()
        bucket = (positions * self.buckets // max(rows, 1)).clip(0, self.buckets - 1)
        order = np.argsort(bucket, kind="stable")
        counts = np.bincount(bucket, minlength=self.buckets)
        table = table.take(pa.array(order))
        start = 0
        for b, count in enumerate(counts.tolist()):
            if count:
                self._spill.write(f"{kind}-{b:05d}", table.slice(start, count))
            start += count

    def total(self, kind: str) -> int:
        if kind not in DIFF_KINDS:
            raise InputError(f"{kind!r} is not a kind of difference; one of {', '.join(DIFF_KINDS)}")
        return sum(n for name, n in self._spill.rows.items() if name.startswith(f"{kind}-"))

    def rows(self, kind: str, offset: int, count: int) -> pa.Table | None:
        """Differences ``offset`` up to ``offset + count`` of ``kind``, in position order."""
        self._spill.close()
        column = NEW_POSITION if kind == "added" else OLD_POSITION
        parts: list[pa.Table] = []
        seen, wanted_end = 0, offset + count
        for b in range(self.buckets):
            size = self._spill.rows.get(f"{kind}-{b:05d}", 0)
            if size and seen + size > offset and seen < wanted_end:
                table = self._spill.read(f"{kind}-{b:05d}")
                if table is not None:
                    lo = max(offset - seen, 0)
                    parts.append(table.sort_by(column).slice(lo, min(size, wanted_end - seen) - lo))
            seen += size
            if seen >= wanted_end:
                break
        return pa.concat_tables(parts) if parts else None

    def close(self) -> None:
        self._spill.close()


# ------------------------------------------------------------------------------------------- by key


def _pair_shards(old: RowSource, new: RowSource, ordered: bool) -> tuple[set[int], set[int]]:
    """Shards of OLD and NEW that hold the same rows by their fingerprints (skipped unread)."""
    skip_old: set[int] = set()
    skip_new: set[int] = set()
    if ordered:
        starts_new = {new.shard_start(j): j for j in range(len(new.shards))}
        for i, shard in enumerate(old.shards):
            j = starts_new.get(old.shard_start(i))
            if j is None:
                continue
            other = new.shards[j]
            if (
                shard.rows == other.rows
                and shard.ordered_fingerprint
                and (shard.ordered_fingerprint == other.ordered_fingerprint)
                and shard.fingerprint == other.fingerprint
            ):
                skip_old.add(i)
                skip_new.add(j)
        return skip_old, skip_new
    waiting: dict[tuple[str, int], list[int]] = {}
    for j, shard in enumerate(new.shards):
        if shard.fingerprint:
            waiting.setdefault((shard.fingerprint, int(shard.rows or 0)), []).append(j)
    for i, shard in enumerate(old.shards):
        matches = waiting.get((shard.fingerprint or "", int(shard.rows or 0)))
        if shard.fingerprint and matches:
            skip_old.add(i)
            skip_new.add(matches.pop(0))
    return skip_old, skip_new


def same_fingerprint(old: RowSource, new: RowSource, *, ordered: bool) -> bool:
    """Whether the contracts' dataset fingerprints say both hold the same rows (in order, if ``ordered``)."""
    a, b = old.contract.fingerprint, new.contract.fingerprint
    if not (a and b and a.algorithm == b.algorithm and a.rows == b.rows):
        return False
    return a.ordered == b.ordered if ordered else a.unordered == b.unordered


def _identical(old: RowSource, new: RowSource, note: str) -> Matched:
    """Two versions whose fingerprints prove their rows equal: nothing is read."""
    return Matched(
        unchanged=old.num_rows,
        identical_by_fingerprint=True,
        skipped_shards=len(old.shards) + len(new.shards),
        skipped_rows=old.num_rows + new.num_rows,
        note=note,
    )


def partitions_for(rows: int, key: Sequence[str], compared: Sequence[str], memory_limit: int) -> int:
    # A hashed row: 8 bytes per compared column, its position, and its key (strings count 32 bytes).
    row_bytes = 8 * (len(compared) + 1) + 16 * len(key)
    return max(1, math.ceil(3 * rows * row_bytes / memory_limit))


def match_by_key(
    old: RowSource,
    new: RowSource,
    key: Sequence[str],
    compared: Sequence[str],
    results: Results,
    *,
    folder: Path,
    memory_limit: int,
    workers: int | None,
    use_fingerprints: bool,
    progress: Progress,
) -> Matched:
    """Rows of ``old`` and ``new`` matched by ``key``; differences go to ``results``."""
    if use_fingerprints and same_fingerprint(old, new, ordered=False):
        return _identical(old, new, "the dataset fingerprints are equal: the same rows; nothing was read")
    skip_old, skip_new = _pair_shards(old, new, ordered=False) if use_fingerprints else (set(), set())
    units = [("old", i) for i in range(len(old.shards)) if i not in skip_old]
    units += [("new", j) for j in range(len(new.shards)) if j not in skip_new]
    read_old = sum(int(old.shards[i].rows or 0) for side, i in units if side == "old")
    read_new = sum(int(new.shards[j].rows or 0) for side, j in units if side == "new")
    parts = partitions_for(read_old + read_new, key, compared, memory_limit)
    results.buckets = parts
    spill = Spill(folder)
    key_types = {name: old.schema.field(name).type for name in key}
    total_bytes = sum((old if s == "old" else new).shards[i].bytes for s, i in units)
    progress.start(total_bytes=total_bytes, total_units=len(units), description="diff rows")

    def unit(item: tuple[str, int]) -> None:
        side, index = item
        source = old if side == "old" else new
        shard = source.shards[index]
        position = source.shard_start(index)
        per_row = shard.bytes / max(int(shard.rows or 1), 1)
        columns = [*key, *compared]
        for batch in source._scan_shard(index, columns):
            for name in key:
                if batch.column(name).null_count:
                    at = position + int(
                        np.flatnonzero(batch.column(name).is_null().to_numpy(zero_copy_only=False))[0]
                    )
                    raise InputError(
                        f"{source.ref}: row {at:,} ({shard.path}) has a null key {name!r}; rows cannot be "
                        "matched by it: pass --key with fields that are never null"
                    )
                if not batch.column(name).type.equals(key_types[name]):
                    batch = batch.set_column(
                        batch.schema.get_field_index(name), name, batch.column(name).cast(key_types[name])
                    )
            hashed = _hash_table(batch, key, compared, position, side)
            part = (_key_hash([batch.column(name) for name in key]) % np.uint64(parts)).astype(np.int64)
            order = np.argsort(part, kind="stable")
            counts = np.bincount(part, minlength=parts)
            hashed = hashed.take(pa.array(order))
            start = 0
            for p, count in enumerate(counts.tolist()):
                if count:
                    spill.write(f"{side}-{p:05d}", hashed.slice(start, count))
                start += count
            position += batch.num_rows
            progress.advance(int(per_row * batch.num_rows))

    try:
        map_units(unit, units, workers=workers or old.location.io_workers or default_workers())
    finally:
        spill.close()
        progress.finish()
    counts = {"added": 0, "removed": 0, "changed": 0, "matched": 0}
    cells = np.zeros(len(compared), dtype=np.int64)
    for p in range(parts):
        _join_partition(old, new, results, spill, p, key, compared, counts, cells)
    skipped_rows = sum(int(old.shards[i].rows or 0) for i in skip_old) + sum(
        int(new.shards[j].rows or 0) for j in skip_new
    )
    unchanged_skipped = sum(int(old.shards[i].rows or 0) for i in skip_old)
    return Matched(
        added=counts["added"],
        removed=counts["removed"],
        changed=counts["changed"],
        unchanged=counts["matched"] - counts["changed"] + unchanged_skipped,
        changed_cells={name: int(cells[i]) for i, name in enumerate(compared)},
        skipped_shards=len(skip_old) + len(skip_new),
        skipped_rows=skipped_rows,
        read_rows_old=read_old,
        read_rows_new=read_new,
        partitions=parts,
    )


def _duplicates(table: pa.Table, key: Sequence[str]) -> pa.Table | None:
    """The key values that repeat in ``table`` with their counts, or None when every key is unique."""
    if len(key) == 1 and len(pc.unique(table.column(key[0]))) == table.num_rows:
        return None  # the common case, checked with one hash pass and no aggregation
    counts = table.group_by(list(key)).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    return repeated if repeated.num_rows else None


def _join_partition(
    old: RowSource,
    new: RowSource,
    results: Results,
    spill: Spill,
    p: int,
    key: Sequence[str],
    compared: Sequence[str],
    counts: dict[str, int],
    cells: np.ndarray,
) -> None:
    old_part = spill.read(f"old-{p:05d}")
    new_part = spill.read(f"new-{p:05d}")
    for side, part, source in (("OLD", old_part, old), ("NEW", new_part, new)):
        if part is not None and part.num_rows:
            dupes = _duplicates(part, key)
            if dupes is not None:
                example = {
                    n: MASK if source.policy.is_masked(n) else plain(dupes.column(n)[0].as_py()) for n in key
                }
                raise InputError(
                    f"{side} ({source.ref}): the key {list(key)} is not unique: {dupes.num_rows:,} key "
                    f"value(s) repeat (e.g. {example}); pass --key with fields that identify a row"
                )
    if old_part is None and new_part is None:
        return
    if old_part is None or new_part is None:
        only: pa.Table = new_part if old_part is None else old_part  # type: ignore[assignment]
        kind = "added" if old_part is None else "removed"
        counts[kind] += only.num_rows
        keep = [*key, NEW_POSITION if kind == "added" else OLD_POSITION]
        results.emit(kind, only.select(keep), new.num_rows if kind == "added" else old.num_rows)
        return
    joined = old_part.join(new_part, keys=list(key), join_type="full outer")
    old_missing = joined.column(OLD_POSITION).is_null()
    new_missing = joined.column(NEW_POSITION).is_null()
    added = joined.filter(old_missing).select([*key, NEW_POSITION])
    removed = joined.filter(new_missing).select([*key, OLD_POSITION])
    matched = joined.filter(pc.invert(pc.or_(old_missing, new_missing)))
    counts["added"] += added.num_rows
    counts["removed"] += removed.num_rows
    counts["matched"] += matched.num_rows
    results.emit("added", added, new.num_rows)
    results.emit("removed", removed, old.num_rows)
    if not matched.num_rows or not compared:
        return
    differs = np.column_stack(
        [
            matched.column(f"__dsm_o{i}").to_numpy() != matched.column(f"__dsm_n{i}").to_numpy()
            for i in range(len(compared))
        ]
    )
    cells += differs.sum(axis=0)
    changed_rows = np.flatnonzero(differs.any(axis=1))
    counts["changed"] += len(changed_rows)
    if len(changed_rows):
        changed = matched.take(pa.array(changed_rows)).select([*key, OLD_POSITION, NEW_POSITION])
        changed = changed.append_column(CHANGED_COLUMNS, _column_lists(differs[changed_rows]))
        results.emit("changed", changed, old.num_rows)


def _column_lists(differs: np.ndarray) -> pa.Array:
    """Per row, the indexes of the columns that differ, as ``list<int32>``."""
    rows, columns = np.nonzero(differs)
    offsets = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=len(differs))))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(columns.astype(np.int32)))


# --------------------------------------------------------------------------------------- by position


def _stream(
    source: RowSource, skip: set[int], columns: Sequence[str]
) -> Iterator[tuple[int, pa.RecordBatch]]:
    for index in range(len(source.shards)):
        if index in skip:
            continue
        position = source.shard_start(index)
        for batch in source._scan_shard(index, columns):
            yield position, batch
            position += batch.num_rows


def match_by_position(
    old: RowSource,
    new: RowSource,
    compared: Sequence[str],
    results: Results,
    *,
    memory_limit: int,
    use_fingerprints: bool,
    progress: Progress,
) -> Matched:
    """Row ``i`` of ``old`` against row ``i`` of ``new``; differences go to ``results``."""
    if use_fingerprints and same_fingerprint(old, new, ordered=True):
        return _identical(old, new, "the ordered dataset fingerprints are equal: the same rows in order")
    skip_old, skip_new = _pair_shards(old, new, ordered=True) if use_fingerprints else (set(), set())
    common = min(old.num_rows, new.num_rows)
    results.buckets = partitions_for(old.num_rows + new.num_rows, (), compared, memory_limit)
    cells = np.zeros(len(compared), dtype=np.int64)
    changed_total = compared_rows = 0
    total_bytes = sum(s.bytes for i, s in enumerate(old.shards) if i not in skip_old) + sum(
        s.bytes for j, s in enumerate(new.shards) if j not in skip_new
    )
    progress.start(
        total_bytes=total_bytes, total_units=len(old.shards) + len(new.shards), description="diff rows"
    )
    per_row_old = old.contract.total_bytes / max(old.num_rows, 1)
    per_row_new = new.contract.total_bytes / max(new.num_rows, 1)
    streams = (_stream(old, skip_old, compared), _stream(new, skip_new, compared))
    pending: list[tuple[int, pa.RecordBatch] | None] = [None, None]
    try:
        while True:
            for side in (0, 1):
                if pending[side] is None:
                    pending[side] = next(streams[side], None)
            if pending[0] is None or pending[1] is None:
                break
            (pos_a, batch_a), (pos_b, batch_b) = pending[0], pending[1]  # type: ignore[misc]
            if pos_a != pos_b:  # a skipped shard on one side only cannot happen; be exact anyway
                raise InputError(
                    "internal: positions of OLD and NEW went out of step; retry without fingerprints"
                )
            size = min(batch_a.num_rows, batch_b.num_rows, common - pos_a)
            if size <= 0:
                break
            left, right = batch_a.slice(0, size), batch_b.slice(0, size)
            if compared:
                differs = np.column_stack(
                    [hash_values(left.column(n)) != hash_values(right.column(n)) for n in compared]
                )
                cells += differs.sum(axis=0)
                rows = np.flatnonzero(differs.any(axis=1))
                changed_total += len(rows)
                if len(rows):
                    positions = pa.array(rows.astype(np.int64) + pos_a)
                    table = pa.table(
                        {
                            OLD_POSITION: positions,
                            NEW_POSITION: positions,
                            CHANGED_COLUMNS: _column_lists(differs[rows]),
                        }
                    )
                    results.emit("changed", table, old.num_rows)
            compared_rows += size
            progress.advance(int(size * (per_row_old + per_row_new)))
            pending[0] = (pos_a + size, batch_a.slice(size)) if size < batch_a.num_rows else None
            pending[1] = (pos_b + size, batch_b.slice(size)) if size < batch_b.num_rows else None
    finally:
        progress.finish()
        for stream in streams:
            with contextlib.suppress(Exception):
                stream.close()  # type: ignore[attr-defined]
    if old.num_rows > common:
        results.emit(
            "removed",
            pa.table({OLD_POSITION: pa.array(np.arange(common, old.num_rows, dtype=np.int64))}),
            old.num_rows,
        )
    if new.num_rows > common:
        results.emit(
            "added",
            pa.table({NEW_POSITION: pa.array(np.arange(common, new.num_rows, dtype=np.int64))}),
            new.num_rows,
        )
    skipped_rows = sum(int(old.shards[i].rows or 0) for i in skip_old)
    return Matched(
        added=max(new.num_rows - common, 0),
        removed=max(old.num_rows - common, 0),
        changed=changed_total,
        unchanged=compared_rows - changed_total + skipped_rows,
        changed_cells={name: int(cells[i]) for i, name in enumerate(compared)},
        skipped_shards=len(skip_old) + len(skip_new),
        skipped_rows=2 * skipped_rows,
        read_rows_old=old.num_rows - skipped_rows,
        read_rows_new=new.num_rows - skipped_rows,
        partitions=results.buckets,
    )
