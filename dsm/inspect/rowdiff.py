"""Rows added, removed and changed between two versions of a dataset: by key, or by position.

**By key** (the contract's key, or the fields given): every cell is hashed by its typed value with the row
fingerprint's value hash (``dsm-rows-v1``, so a change of format, compression, sharding or dictionary encoding
is not a change), rows are partitioned by the hash of their key into files in a work folder, and each
partition of OLD is joined with the same partition of NEW (a full outer join on the key; see
:mod:`dsm.inspect.rowmatch`). Memory is bounded by one partition (``memory_limit`` sets how many there are),
whatever the size of the datasets. Keys must be unique and not null on both sides.

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

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from dsm.engine import NullProgress, Progress
from dsm.errors import InputError, SchemaError
from dsm.inspect.masking import MASK
from dsm.inspect.rowmatch import (
    CHANGED_COLUMNS,
    DIFF_KINDS,
    NEW_POSITION,
    OLD_POSITION,
    Results,
    match_by_key,
    match_by_position,
)
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

DEFAULT_MEMORY_LIMIT = 256 << 20
"""Bytes of hashed rows (both sides) one partition may hold while it is joined."""


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
        self._results = Results(folder / "results")
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

    def total(self, kind: str) -> int:
        """How many differences of ``kind`` (``changed``, ``added``, ``removed``) there are."""
        return self._results.total(kind)

    def page(self, kind: str, offset: int, count: int) -> DiffPage:
        """Differences ``offset`` up to ``offset + count`` of ``kind`` (``changed``, ``added``,
        ``removed``), in position order (OLD's for changed and removed, NEW's for added), with their
        values rendered and masked."""
        total = self.total(kind)
        if offset < 0 or count < 0:
            raise InputError(f"offset and count must be at least 0, got {offset} and {count}")
        return DiffPage(
            kind=kind,
            offset=offset,
            total=total,
            rows=self._render(kind, self._results.rows(kind, offset, count)),
        )

    def _render(self, kind: str, table: pa.Table | None) -> tuple[ChangedRow, ...]:
        if table is None or table.num_rows == 0:
            return ()
        old_pos = (
            column_values(table.column(OLD_POSITION))
            if OLD_POSITION in table.column_names
            else [None] * table.num_rows
        )
        new_pos = (
            column_values(table.column(NEW_POSITION))
            if NEW_POSITION in table.column_names
            else [None] * table.num_rows
        )
        changed = (
            column_values(table.column(CHANGED_COLUMNS)) if CHANGED_COLUMNS in table.column_names else None
        )
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
        progress = progress or NullProgress()
        if key:
            matched = match_by_key(
                old,
                new,
                key,
                compared,
                run._results,
                folder=base,
                memory_limit=memory_limit,
                workers=workers,
                use_fingerprints=use_fingerprints,
                progress=progress,
            )
        else:
            matched = match_by_position(
                old,
                new,
                compared,
                run._results,
                memory_limit=memory_limit,
                use_fingerprints=use_fingerprints,
                progress=progress,
            )
        summary = RowDiff(
            old=old.ref,
            new=new.ref,
            key=tuple(key),
            by_position=not key,
            old_rows=old.num_rows,
            new_rows=new.num_rows,
            added=matched.added,
            removed=matched.removed,
            changed=matched.changed,
            unchanged=matched.unchanged,
            changed_cells={name: int(matched.changed_cells.get(name, 0)) for name in compared},
            columns=tuple(compared),
            columns_only_old=tuple(n for n in old_names if n not in new_names),
            columns_only_new=tuple(n for n in new_names if n not in old_names),
            skipped_shards=matched.skipped_shards,
            skipped_rows=matched.skipped_rows,
            identical_by_fingerprint=matched.identical_by_fingerprint,
            read_rows_old=matched.read_rows_old,
            read_rows_new=matched.read_rows_new,
            partitions=matched.partitions,
            notes=tuple(notes) + ((matched.note,) if matched.note else ()),
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
