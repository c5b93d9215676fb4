"""Rows added, removed and changed between two versions of a dataset: by key, or by position.

**By key** (the contract's key, or the fields given): every cell is hashed by its typed value with the row
fingerprint's value hash (``dsm-rows-v1``, so a change of format, compression, sharding or dictionary encoding
is not a change), rows are partitioned by the hash of their key into files in a work folder, and each
partition of OLD is joined with the same partition of NEW (a full outer join on the key). Memory is bounded by
one partition (``memory_limit`` sets how many there are), whatever the size of the datasets. Keys must be
unique and not null on both sides.

**By position** (no key): row ``i`` of OLD is compared with row ``i`` of NEW, both read in order; rows past
the end of the shorter side are added or removed.

Shards whose fingerprints are equal on both sides hold the same rows and are skipped without being read
(by key: any pair of shards with equal unordered fingerprints; by position: shards at the same rows with equal
ordered fingerprints); two versions whose dataset fingerprints are equal have no row that differs.

The differences are kept in the work folder in position order, so that they can be paged through
(:meth:`RowDiffRun.page`); values shown are rendered by role and masked like every output of this layer.

>>> with compare_rows(open_rows("web@1"), open_rows("web@2"), key=["id"]) as run:  # doctest: +SKIP
...     run.summary.changed, run.page("changed", 0, 10).rows[0].columns
(1000, ('text',))
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from dsm.engine import NullProgress, Progress, default_workers, map_units
from dsm.errors import InputError, SchemaError
from dsm.fingerprint import hash_values
from dsm.inspect.masking import MASK
from dsm.inspect.source import RowSource
from dsm.inspect.view import CellView, cell_view, column_values, plain

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "DIFF_KINDS",
    "ChangedRow",
    "DiffPage",
    "RowDiff",
    "RowDiffRun",
    "compare_rows",
]

DIFF_KINDS = ("changed", "added", "removed")
DEFAULT_MEMORY_LIMIT = 256 << 20
"""Bytes of hashed rows (both sides) one partition may hold while it is joined."""

_POS_OLD = "__dsm_old_position"
_POS_NEW = "__dsm_new_position"
_CHANGED = "__dsm_changed_columns"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True, kw_only=True)
class ChangedRow:
    """One row that differs: its key (masked where the key is classified), its positions on each side
    (None on the side it is missing from), the columns that changed, and old and new cells side by side."""

    kind: str
    key: Mapping[str, Any]
    old_position: int | None
    new_position: int | None
    columns: tuple[str, ...] = ()
    old: Mapping[str, CellView] = field(default_factory=dict)
    new: Mapping[str, CellView] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": dict(self.key),
            "old_position": self.old_position,
            "new_position": self.new_position,
            "columns": list(self.columns),
            "old": {k: v.to_dict() for k, v in self.old.items()},
            "new": {k: v.to_dict() for k, v in self.new.items()},
        }


@dataclass(frozen=True, kw_only=True)
class DiffPage:
    """Rows ``offset`` up to ``offset + len(rows)`` of the ``total`` differences of one kind."""

    kind: str
    offset: int
    total: int
    rows: tuple[ChangedRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "offset": self.offset,
            "total": self.total,
            "rows": [r.to_dict() for r in self.rows],
        }


@dataclass(frozen=True, kw_only=True)
class RowDiff:
    """What differs between the rows of two versions, with a sample of each kind of difference."""

    old: str
    new: str
    key: tuple[str, ...]
    by_position: bool
    old_rows: int
    new_rows: int
    added: int
    removed: int
    changed: int
    unchanged: int
    changed_cells: Mapping[str, int]
    columns: tuple[str, ...]
    columns_only_old: tuple[str, ...] = ()
    columns_only_new: tuple[str, ...] = ()
    skipped_shards: int = 0
    skipped_rows: int = 0
    identical_by_fingerprint: bool = False
    read_rows_old: int = 0
    read_rows_new: int = 0
    partitions: int = 0
    sample_changed: tuple[ChangedRow, ...] = ()
    sample_added: tuple[ChangedRow, ...] = ()
    sample_removed: tuple[ChangedRow, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        """True when any row was added, removed or changed (``--fail-on-change`` exits 1 then)."""
        return bool(self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "key": list(self.key),
            "by_position": self.by_position,
            "old_rows": self.old_rows,
            "new_rows": self.new_rows,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "differs": self.differs,
            "changed_cells": dict(self.changed_cells),
            "columns": list(self.columns),
            "columns_only_old": list(self.columns_only_old),
            "columns_only_new": list(self.columns_only_new),
            "skipped_shards": self.skipped_shards,
            "skipped_rows": self.skipped_rows,
            "identical_by_fingerprint": self.identical_by_fingerprint,
            "read_rows_old": self.read_rows_old,
            "read_rows_new": self.read_rows_new,
            "partitions": self.partitions,
            "sample_changed": [r.to_dict() for r in self.sample_changed],
            "sample_added": [r.to_dict() for r in self.sample_added],
            "sample_removed": [r.to_dict() for r in self.sample_removed],
            "notes": list(self.notes),
        }


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
    arrays[_POS_OLD if side == "old" else _POS_NEW] = pa.array(
        np.arange(first, first + batch.num_rows, dtype=np.int64)
    )
    for i, name in enumerate(compared):
        arrays[f"__dsm_{prefix}{i}"] = pa.array(hash_values(batch.column(name)), pa.uint64())
    return pa.table(arrays)


class _Spill:
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


# ------------------------------------------------------------------------------------------ the run


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


def _same_fingerprint(old: RowSource, new: RowSource, *, ordered: bool) -> bool:
    """Whether the contracts' dataset fingerprints say both hold the same rows (in order, if ``ordered``)."""
    a, b = old.contract.fingerprint, new.contract.fingerprint
    if not (a and b and a.algorithm == b.algorithm and a.rows == b.rows):
        return False
    return a.ordered == b.ordered if ordered else a.unordered == b.unordered


class RowDiffRun:
    """A finished comparison: its :attr:`summary` and its differences, pageable in position order, until
    :meth:`close` removes the work folder. Made by :func:`compare_rows`."""

    def __init__(
        self,
        old: RowSource,
        new: RowSource,
        *,
        key: Sequence[str],
        compared: Sequence[str],
        folder: Path,
        owns_folder: bool,
    ) -> None:
        self.old = old
        self.new = new
        self.key = tuple(key)
        self.compared = tuple(compared)
        self._folder = folder
        self._owns_folder = owns_folder
        self._results = _Spill(folder / "results")
        self._results.folder.mkdir(parents=True, exist_ok=True)
        self._buckets = 1
        self._summary: RowDiff | None = None

    @property
    def summary(self) -> RowDiff:
        """The counts, changed cells per column and samples (set before :func:`compare_rows` returns)."""
        if self._summary is None:
            raise InputError("this comparison has not finished")
        return self._summary

    def __enter__(self) -> RowDiffRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the work folder (pages can no longer be read)."""
        self._results.close()
        if self._owns_folder:
            shutil.rmtree(self._folder, ignore_errors=True)

    # --------------------------------------------------------------------------------------- results

    def _emit(self, kind: str, table: pa.Table, sides: int) -> None:
        """Differences of one kind into position buckets (each bucket holds a range of positions)."""
        if table.num_rows == 0:
            return
        column = _POS_NEW if kind == "added" else _POS_OLD
        positions = table.column(column).to_numpy()
        bucket = (positions * self._buckets // max(sides, 1)).clip(0, self._buckets - 1)
        order = np.argsort(bucket, kind="stable")
        counts = np.bincount(bucket, minlength=self._buckets)
        table = table.take(pa.array(order))
        start = 0
        for b, count in enumerate(counts.tolist()):
            if count:
                self._results.write(f"{kind}-{b:05d}", table.slice(start, count))
            start += count

    def total(self, kind: str) -> int:
        if kind not in DIFF_KINDS:
            raise InputError(f"{kind!r} is not a kind of difference; one of {', '.join(DIFF_KINDS)}")
        return sum(n for name, n in self._results.rows.items() if name.startswith(f"{kind}-"))

    def page(self, kind: str, offset: int, count: int) -> DiffPage:
        """Differences ``offset`` up to ``offset + count`` of ``kind`` (``changed``, ``added``,
        ``removed``), in position order (OLD's for changed and removed, NEW's for added), with their
        values rendered and masked."""
        total = self.total(kind)
        if offset < 0 or count < 0:
            raise InputError(f"offset and count must be at least 0, got {offset} and {count}")
        self._results.close()
        column = _POS_NEW if kind == "added" else _POS_OLD
        rows: list[pa.Table] = []
        seen, wanted_end = 0, offset + count
        for b in range(self._buckets):
            size = self._results.rows.get(f"{kind}-{b:05d}", 0)
            if size and seen + size > offset and seen < wanted_end:
                table = self._results.read(f"{kind}-{b:05d}")
                if table is not None:
                    table = table.sort_by(column)
                    lo = max(offset - seen, 0)
                    rows.append(table.slice(lo, min(size, wanted_end - seen) - lo))
            seen += size
            if seen >= wanted_end:
                break
        picked = pa.concat_tables(rows) if rows else None
        return DiffPage(kind=kind, offset=offset, total=total, rows=self._render(kind, picked))

    def _render(self, kind: str, table: pa.Table | None) -> tuple[ChangedRow, ...]:
        if table is None or table.num_rows == 0:
            return ()
        old_pos = (
            column_values(table.column(_POS_OLD))
            if _POS_OLD in table.column_names
            else [None] * table.num_rows
        )
        new_pos = (
            column_values(table.column(_POS_NEW))
            if _POS_NEW in table.column_names
            else [None] * table.num_rows
        )
        changed = column_values(table.column(_CHANGED)) if _CHANGED in table.column_names else None
        keys = {name: column_values(table.column(name)) for name in self.key if name in table.column_names}
        if kind == "changed" and changed is not None:
            columns_of = [tuple(self.compared[i] for i in row or []) for row in changed]
        else:
            columns_of = [() for _ in range(table.num_rows)]
        wanted = sorted({c for row in columns_of for c in row})
        shown = wanted or [c for c in self.compared][:8]
        old_cells = self._cells(self.old, [p for p in old_pos if p is not None], shown)
        new_cells = self._cells(self.new, [p for p in new_pos if p is not None], shown)
        out = []
        for i in range(table.num_rows):
            columns = columns_of[i]
            names = columns or tuple(shown)
            key = {
                name: MASK if self.old.policy.is_masked(name) else plain(values[i])
                for name, values in keys.items()
            }
            if not keys:
                key = {"position": old_pos[i] if old_pos[i] is not None else new_pos[i]}
            at_old, at_new = old_pos[i], new_pos[i]
            old_row = old_cells.get(at_old, {}) if at_old is not None else {}
            new_row = new_cells.get(at_new, {}) if at_new is not None else {}
            out.append(
                ChangedRow(
                    kind=kind,
                    key=key,
                    old_position=old_pos[i],
                    new_position=new_pos[i],
                    columns=columns,
                    old={n: old_row[n] for n in names if n in old_row},
                    new={n: new_row[n] for n in names if n in new_row},
                )
            )
        return tuple(out)

    @staticmethod
    def _cells(
        source: RowSource, positions: list[int], columns: Sequence[str]
    ) -> dict[int, dict[str, CellView]]:
        present = [c for c in columns if source.schema.get_field_index(c) >= 0]
        if not positions or not present:
            return {}
        table, _ = source._take(positions, present)
        fields = {f.name: f for f in source.fields}
        values = {name: column_values(table.column(name)) for name in present}
        return {
            position: {name: cell_view(fields[name], values[name][i]) for name in present}
            for i, position in enumerate(positions)
        }


def compare_rows(
    old: RowSource,
    new: RowSource,
    *,
    key: Sequence[str] | None = None,
    sample: int = 10,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    workers: int | None = None,
    workdir: str | None = None,
    use_fingerprints: bool = True,
    progress: Progress | None = None,
) -> RowDiffRun:
    """Compare the rows of ``old`` and ``new`` (see the module docstring); returns the finished run.

    ``key`` defaults to OLD's contract key; with neither, rows are compared by position. ``sample`` rows of
    each kind are rendered into the summary. ``use_fingerprints=False`` reads every shard even where the
    contracts' fingerprints say the rows are equal.
    """
    if sample < 0:
        raise InputError(f"sample must be at least 0, got {sample}")
    if memory_limit < 1 << 20:
        raise InputError(f"memory_limit must be at least 1 MiB, got {memory_limit}")
    key = tuple(key) if key else tuple(old.contract.schema.key)
    old_names, new_names = list(old.schema.names), list(new.schema.names)
    for name in key:
        for side, names in (("OLD", old_names), ("NEW", new_names)):
            if name not in names:
                raise SchemaError(f"key field {name!r} is not a field of {side} ({', '.join(names)})")
    compared = [n for n in old_names if n in new_names and n not in key]
    notes: list[str] = []
    if not key:
        notes.append("no key (none given, none in the contract): rows are compared by position")
    if key and new.contract.schema.key and tuple(new.contract.schema.key) != key:
        notes.append(
            f"NEW's contract key is {list(new.contract.schema.key)}; rows are matched by {list(key)}"
        )
    base = Path(tempfile.mkdtemp(prefix="dsm-rowdiff-", dir=workdir))
    run = RowDiffRun(old, new, key=key, compared=compared, folder=base, owns_folder=True)
    try:
        if key:
            summary = _by_key(run, memory_limit, workers, use_fingerprints, progress or NullProgress())
        else:
            summary = _by_position(run, memory_limit, use_fingerprints, progress or NullProgress())
        summary = replace(
            summary,
            columns=tuple(compared),
            columns_only_old=tuple(n for n in old_names if n not in new_names),
            columns_only_new=tuple(n for n in new_names if n not in old_names),
            notes=tuple(notes) + summary.notes,
        )
        run._summary = replace(
            summary,
            sample_changed=run.page("changed", 0, sample).rows if sample else (),
            sample_added=run.page("added", 0, sample).rows if sample else (),
            sample_removed=run.page("removed", 0, sample).rows if sample else (),
        )
    except BaseException:
        run.close()
        raise
    return run


def _empty_summary(run: RowDiffRun, **values: Any) -> RowDiff:
    defaults: dict[str, Any] = {
        "old": run.old.ref,
        "new": run.new.ref,
        "key": run.key,
        "by_position": not run.key,
        "old_rows": run.old.num_rows,
        "new_rows": run.new.num_rows,
        "added": 0,
        "removed": 0,
        "changed": 0,
        "unchanged": 0,
        "changed_cells": {name: 0 for name in run.compared},
        "columns": run.compared,
    }
    return RowDiff(**(defaults | values))


def _identical(run: RowDiffRun, note: str) -> RowDiff:
    """The summary of two versions whose fingerprints prove their rows equal: nothing was read."""
    return _empty_summary(
        run,
        unchanged=run.old.num_rows,
        identical_by_fingerprint=True,
        skipped_shards=len(run.old.shards) + len(run.new.shards),
        skipped_rows=run.old.num_rows + run.new.num_rows,
        notes=(note,),
    )


def _partitions(rows: int, key: Sequence[str], compared: Sequence[str], memory_limit: int) -> int:
    # A hashed row: 8 bytes per compared column, its position, and its key (strings count 32 bytes).
    row_bytes = 8 * (len(compared) + 1) + 16 * len(key)
    return max(1, math.ceil(3 * rows * row_bytes / memory_limit))


def _by_key(
    run: RowDiffRun, memory_limit: int, workers: int | None, use_fingerprints: bool, progress: Progress
) -> RowDiff:
    old, new, key, compared = run.old, run.new, run.key, run.compared
    if use_fingerprints and _same_fingerprint(old, new, ordered=False):
        return _identical(run, "the dataset fingerprints are equal: the same rows; nothing was read")
    skip_old, skip_new = _pair_shards(old, new, ordered=False) if use_fingerprints else (set(), set())
    units = [("old", i) for i in range(len(old.shards)) if i not in skip_old]
    units += [("new", j) for j in range(len(new.shards)) if j not in skip_new]
    read_old = sum(int(old.shards[i].rows or 0) for side, i in units if side == "old")
    read_new = sum(int(new.shards[j].rows or 0) for side, j in units if side == "new")
    parts = _partitions(read_old + read_new, key, compared, memory_limit)
    run._buckets = parts
    spill = _Spill(run._folder)
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
        _join_partition(run, spill, p, key, compared, counts, cells)
    skipped_rows = sum(int(old.shards[i].rows or 0) for i in skip_old) + sum(
        int(new.shards[j].rows or 0) for j in skip_new
    )
    unchanged_skipped = sum(int(old.shards[i].rows or 0) for i in skip_old)
    return _empty_summary(
        run,
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
    run: RowDiffRun,
    spill: _Spill,
    p: int,
    key: Sequence[str],
    compared: Sequence[str],
    counts: dict[str, int],
    cells: np.ndarray,
) -> None:
    old_part = spill.read(f"old-{p:05d}")
    new_part = spill.read(f"new-{p:05d}")
    for side, part, source in (("OLD", old_part, run.old), ("NEW", new_part, run.new)):
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
        keep = [*key, _POS_NEW if kind == "added" else _POS_OLD]
        run._emit(kind, only.select(keep), run.new.num_rows if kind == "added" else run.old.num_rows)
        return
    joined = old_part.join(new_part, keys=list(key), join_type="full outer")
    old_missing = joined.column(_POS_OLD).is_null()
    new_missing = joined.column(_POS_NEW).is_null()
    added = joined.filter(old_missing).select([*key, _POS_NEW])
    removed = joined.filter(new_missing).select([*key, _POS_OLD])
    matched = joined.filter(pc.invert(pc.or_(old_missing, new_missing)))
    counts["added"] += added.num_rows
    counts["removed"] += removed.num_rows
    counts["matched"] += matched.num_rows
    run._emit("added", added, run.new.num_rows)
    run._emit("removed", removed, run.old.num_rows)
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
        changed = matched.take(pa.array(changed_rows)).select([*key, _POS_OLD, _POS_NEW])
        run._emit(
            "changed", changed.append_column(_CHANGED, _column_lists(differs[changed_rows])), run.old.num_rows
        )


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


def _by_position(run: RowDiffRun, memory_limit: int, use_fingerprints: bool, progress: Progress) -> RowDiff:
    old, new, compared = run.old, run.new, run.compared
    if use_fingerprints and _same_fingerprint(old, new, ordered=True):
        return _identical(
            run, "the ordered dataset fingerprints are equal: the same rows in order; nothing read"
        )
    skip_old, skip_new = _pair_shards(old, new, ordered=True) if use_fingerprints else (set(), set())
    common = min(old.num_rows, new.num_rows)
    run._buckets = _partitions(old.num_rows + new.num_rows, (), compared, memory_limit)
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
                        {_POS_OLD: positions, _POS_NEW: positions, _CHANGED: _column_lists(differs[rows])}
                    )
                    run._emit("changed", table, old.num_rows)
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
        run._emit(
            "removed",
            pa.table({_POS_OLD: pa.array(np.arange(common, old.num_rows, dtype=np.int64))}),
            old.num_rows,
        )
    if new.num_rows > common:
        run._emit(
            "added",
            pa.table({_POS_NEW: pa.array(np.arange(common, new.num_rows, dtype=np.int64))}),
            new.num_rows,
        )
    skipped_rows = sum(int(old.shards[i].rows or 0) for i in skip_old)
    return _empty_summary(
        run,
        added=max(new.num_rows - common, 0),
        removed=max(old.num_rows - common, 0),
        changed=changed_total,
        unchanged=compared_rows - changed_total + skipped_rows,
        changed_cells={name: int(cells[i]) for i, name in enumerate(compared)},
        skipped_shards=len(skip_old) + len(skip_new),
        skipped_rows=2 * skipped_rows,
        read_rows_old=old.num_rows - skipped_rows,
        read_rows_new=new.num_rows - skipped_rows,
        partitions=run._buckets,
    )
