"""The shadow stage's row-by-row comparison of a sample of the source and the target.

:func:`compare_sample` reads the same rows from the source and the target and compares them value by value.
Where a source row lands in the target is known exactly from the rewrite's parameters: at the same
global position without a shuffle, at ``Permutation(rows, seed)(i)`` with one. When the schema has a key,
rows are matched by key (a row found elsewhere is reported as missing), else by position.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dsm.contract import Contract
from dsm.errors import InputError
from dsm.hashing.permutation import Permutation
from dsm.rewrite.execute import source_format
from dsm.rewrite.plan import SourceRange
from dsm.rewrite.reading import iter_range
from dsm.storage import location

__all__ = [
    "RowMismatch",
    "SampleComparison",
    "compare_sample",
    "sample_runs",
]

_SAMPLE_SHARDS = 4
_RUNS = 4
_MAX_EXAMPLES = 10
_VALUE_CHARS = 80
_READ_BATCH_ROWS = 8192


@dataclass(frozen=True, kw_only=True)
class RowMismatch:
    """A sampled row that differs: the source row number, its key, the field, both values (shortened;
    hidden for fields with a classification such as ``pii``)."""

    row: int
    detail: str
    key: Mapping[str, Any] | None = None
    field: str | None = None
    source: str | None = None
    target: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "key": dict(self.key) if self.key is not None else None,
            "field": self.field,
            "source": self.source,
            "target": self.target,
            "detail": self.detail,
        }


@dataclass(frozen=True, kw_only=True)
class SampleComparison:
    """The outcome of :func:`compare_sample`: ``ok`` when every sampled row matched value for value."""

    method: str
    rows_compared: int
    mismatches: int
    examples: tuple[RowMismatch, ...] = field(default_factory=tuple)
    runs: tuple[tuple[int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "method": self.method,
            "rows_compared": self.rows_compared,
            "mismatches": self.mismatches,
            "examples": [m.to_dict() for m in self.examples],
            "runs": [list(r) for r in self.runs],
        }


def sample_runs(total: int, rows: int, runs: int = _RUNS) -> list[tuple[int, int]]:
    """``[start, stop)`` row ranges of the sample: ``rows`` rows in up to ``runs`` contiguous runs, each at
    the start of one of ``runs`` equal parts of ``total`` rows (contiguous runs read cheaply from every
    format; the runs never overlap).

    >>> sample_runs(1000, 100, 4)
    [(0, 25), (250, 275), (500, 525), (750, 775)]
    >>> sample_runs(10, 100)
    [(0, 10)]
    """
    rows = min(rows, total)
    if rows <= 0:
        return []
    if rows == total:
        return [(0, total)]
    count = max(1, min(runs, rows))
    out = []
    for k in range(count):
        start, end = k * total // count, (k + 1) * total // count
        length = min(end - start, rows // count + (1 if k < rows % count else 0))
        if length > 0:
            out.append((start, start + length))
    return out


def _offsets(contract: Contract) -> tuple[np.ndarray, list[str]]:
    starts, paths, offset = [], [], 0
    for shard in contract.shards:
        if shard.rows is None:
            raise InputError(f"shard {shard.path} of {contract.ref} has no row count; re-register it")
        starts.append(offset)
        paths.append(shard.path)
        offset += shard.rows
    return np.asarray(starts, dtype=np.int64), paths


def read_rows(
    contract: Contract,
    indices: Sequence[int] | np.ndarray,
    storage_options: Mapping[str, Any] | None = None,
    *,
    batch_rows: int = _READ_BATCH_ROWS,
) -> pa.Table:
    """The rows of ``contract`` at global positions ``indices``, in that order, under its schema.

    Each shard that holds a wanted row is streamed once, from its first wanted row to its last, keeping only
    the wanted rows: memory is one batch plus the rows kept, however far apart they are.
    """
    wanted = np.asarray(indices, dtype=np.int64)
    schema = contract.schema.to_arrow()
    if wanted.size == 0:
        return schema.empty_table()
    starts, paths = _offsets(contract)
    loc = location(contract.location, storage_options)
    fmt = source_format(contract)
    shard_of = np.searchsorted(starts, wanted, side="right") - 1
    pieces: list[pa.Table] = []
    placed: list[np.ndarray] = []
    for shard_index in np.unique(shard_of):
        where = np.flatnonzero(shard_of == shard_index)
        local = wanted[where] - starts[shard_index]
        order = np.argsort(local, kind="stable")
        ordered = local[order]
        lo, hi = int(ordered[0]), int(ordered[-1]) + 1
        shard = contract.shards[int(shard_index)]
        rng = SourceRange(
            shard=paths[int(shard_index)], start=lo, stop=hi, whole=lo == 0 and hi == shard.rows
        )
        kept: list[pa.RecordBatch] = []
        offset = lo
        for batch in iter_range(loc, fmt, schema, rng, batch_rows):
            a, b = np.searchsorted(ordered, [offset, offset + batch.num_rows], side="left")
            if b > a:
                kept.append(batch.take(pa.array(ordered[a:b] - offset)))
            offset += batch.num_rows
        pieces.append(pa.Table.from_batches(kept, schema=schema))
        placed.append(where[order])
    combined = pa.concat_tables(pieces)
    return combined.take(pa.array(np.argsort(np.concatenate(placed), kind="stable")))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and type(a) is type(b)


def _show(value: Any, hidden: bool) -> str:
    if hidden:
        return "<hidden: classified field>"
    text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."


def compare_sample(
    source: Contract,
    target: Contract,
    *,
    rows: int,
    shuffle_seed: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> SampleComparison:
    """Read ``rows`` sampled rows from ``source`` and where the rewrite put them in ``target``; compare
    every field of the source's schema value by value (NaN equals NaN, nested values recursively).

    ``shuffle_seed`` is the seed of a shuffled reshard (None: the target keeps the source's order).
    """
    total = source.total_rows or 0
    if target.total_rows != total:
        return SampleComparison(
            method="count",
            rows_compared=0,
            mismatches=1,
            examples=(
                RowMismatch(row=-1, detail=f"the target has {target.total_rows} rows, the source {total}"),
            ),
        )
    runs = sample_runs(total, rows)
    indices = (
        np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in runs]) if runs else np.array([], np.int64)
    )
    if shuffle_seed is None:
        positions = indices
    else:
        positions = Permutation(total, shuffle_seed)(indices.astype(np.uint64)).astype(np.int64)
    left = read_rows(source, indices, storage_options).to_pylist()
    right = read_rows(target, positions, storage_options).to_pylist()
    names = source.schema.names
    hidden = {f.name for f in source.schema.fields if f.classification}
    key = list(source.schema.key)
    method = f"key ({', '.join(key)})" if key else "position"
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    if key:
        for row in right:
            by_key[tuple(_hashable(row.get(k)) for k in key)] = row
    mismatches, examples = 0, list[RowMismatch]()
    for index, src_row, tgt_row in zip(indices.tolist(), left, right, strict=True):
        row_key = {k: src_row.get(k) for k in key} if key else None
        if key:
            found = by_key.get(tuple(_hashable(src_row.get(k)) for k in key))
            if found is None:
                mismatches += 1
                if len(examples) < _MAX_EXAMPLES:
                    examples.append(
                        RowMismatch(
                            row=index, key=row_key, detail="no row with this key where the rewrite put it"
                        )
                    )
                continue
            tgt_row = found
        for name in names:
            if not _same(src_row.get(name), tgt_row.get(name)):
                mismatches += 1
                if len(examples) < _MAX_EXAMPLES:
                    examples.append(
                        RowMismatch(
                            row=index,
                            key=row_key,
                            field=name,
                            source=_show(src_row.get(name), name in hidden),
                            target=_show(tgt_row.get(name), name in hidden),
                            detail=f"field {name} differs",
                        )
                    )
                break
    return SampleComparison(
        method=method,
        rows_compared=len(left),
        mismatches=mismatches,
        examples=tuple(examples),
        runs=tuple(runs),
    )


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value
