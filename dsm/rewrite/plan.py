"""Planning a rewrite: which output files, holding which rows, read from which source shards.

A plan depends only on the source contract and the parameters (never on the worker count, timing or
what is at the destination), so the same source and parameters always give the same files, names and bytes.

Without a shuffle, output file ``k`` holds the global rows ``[a_k, b_k)`` of the source in source order,
read from the source shards that overlap that range (row counts come from the contract). With a shuffle,
output file ``k`` holds the rows whose *position* under a seeded permutation of ``[0, rows)`` falls in
``[a_k, b_k)``, in position order (see :mod:`dsm.hashing.permutation` and :mod:`dsm.rewrite.execute`).

>>> layout(10, num_shards=3)
[(0, 3), (3, 3), (6, 4)]
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dsm.contract import Contract
from dsm.errors import InputError
from dsm.formats import STREAM_SUFFIXES, Format, contract_format
from dsm.hashing.fingerprint import ALGORITHM
from dsm.shards import batch_rows_for, decoded_bytes_per_row
from dsm.units import parse_size

__all__ = [
    "OutputUnit",
    "RewritePlan",
    "ScatterUnit",
    "SourceRange",
    "check_layout",
    "check_shard_count",
    "layout",
    "output_name",
    "parse_size",
    "plan_rewrite",
    "row_group_rows",
]

PLAN_VERSION = "dsm-rewrite-plan-v1"
BUCKET_BYTES = 32 << 20
"""Decoded bytes per shuffle bucket: pass 2 of a shuffle holds one bucket in memory at a time."""
ROW_GROUP_BYTES = 32 << 20
"""Decoded bytes per Parquet row group a rewrite writes unless ``row_group_size`` is given."""
SCATTER_UNIT_BYTES = 512 << 20
"""Stored bytes per shuffle pass-1 unit (Parquet shards larger than this are split by row ranges)."""


def check_layout(
    *,
    num_shards: int | None,
    shard_size: int | str | None,
    rows_per_shard: int | None,
    shuffle: bool,
    seed: int | None,
    command: str = "reshard",
) -> str:
    """Refuse a resharding request that is not exactly one valid layout; return the layout's name
    (``num_shards``, ``shard_size`` or ``rows_per_shard``). Shared by ``dsm reshard`` and ``dsm cutover``."""
    given = [
        name
        for name, value in (
            ("num_shards", num_shards),
            ("shard_size", shard_size),
            ("rows_per_shard", rows_per_shard),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise InputError(
            f"{command} takes exactly one of --num-shards, --shard-size and --rows-per-shard"
            + (f" (got {', '.join(given)})" if given else "")
        )
    for option, value in (("--num-shards", num_shards), ("--rows-per-shard", rows_per_shard)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"{option} must be a whole number of at least 1, got {value!r}")
    if shard_size is not None:
        parse_size(shard_size, what="--shard-size")
    if seed is not None and not shuffle:
        raise InputError("--seed only applies with --shuffle")
    return given[0]


def check_shard_count(num_shards: int, total_rows: int, *, what: str = "the dataset") -> None:
    """Refuse (InputError, before anything is allocated) more output files than rows: every file past
    the rows would be empty. An empty dataset is rewritten as one empty file."""
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise InputError(f"--num-shards must be a whole number of at least 1, got {num_shards!r}")
    most = max(1, total_rows)
    if num_shards > most:
        raise InputError(
            f"--num-shards {num_shards:,} is more than the {total_rows:,} row(s) of {what}: "
            f"{num_shards - most:,} of the files would be empty; ask for at most {most:,}"
        )


def layout(
    total_rows: int, *, num_shards: int | None = None, rows_per_shard: int | None = None
) -> list[tuple[int, int]]:
    """``(first row, rows)`` of each output file: ``num_shards`` balanced files (sizes differ by at most
    one row, never more files than rows: :func:`check_shard_count`), or files of ``rows_per_shard`` rows
    with a shorter last one. An empty dataset gets one empty file."""
    if num_shards is not None:
        check_shard_count(num_shards, total_rows)
        bounds = [k * total_rows // num_shards for k in range(num_shards + 1)]
        return [(bounds[k], bounds[k + 1] - bounds[k]) for k in range(num_shards)]
    if isinstance(rows_per_shard, bool) or not isinstance(rows_per_shard, int) or rows_per_shard < 1:
        raise InputError(f"--rows-per-shard must be a whole number of at least 1, got {rows_per_shard!r}")
    count = max(1, math.ceil(total_rows / rows_per_shard))
    return [(k * rows_per_shard, min(rows_per_shard, total_rows - k * rows_per_shard)) for k in range(count)]


def output_name(index: int, count: int, fmt: Format) -> str:
    """``part-00003-of-00064.parquet``: the deterministic name of output file ``index`` of ``count``.

    Text formats compressed as a whole file get the codec's suffix (``.jsonl.gz``), so that the format can
    be detected from the name as it is for registered data.
    """
    extension = fmt.extensions[0]
    compression = fmt.options().get("compression")
    if not fmt.self_describing and isinstance(compression, str) and compression in STREAM_SUFFIXES:
        extension += STREAM_SUFFIXES[compression]
    width = max(5, len(str(count)))
    return f"part-{index:0{width}d}-of-{count:0{width}d}{extension}"


@dataclass(frozen=True, kw_only=True)
class SourceRange:
    """Rows ``[start, stop)`` of one source shard (row numbers within that shard)."""

    shard: str
    start: int
    stop: int
    whole: bool

    def to_dict(self) -> dict[str, Any]:
        return {"shard": self.shard, "start": self.start, "stop": self.stop}


@dataclass(frozen=True, kw_only=True)
class OutputUnit:
    """One output file: its name, its rows ``[start, start + rows)`` in output order, and where they come
    from (source ranges without a shuffle; shuffle buckets ``[first_bucket, last_bucket)`` with one)."""

    index: int
    path: str
    start: int
    rows: int
    ranges: tuple[SourceRange, ...] = ()
    first_bucket: int = 0
    last_bucket: int = 0

    @property
    def source_shard(self) -> str | None:
        """The source shard this file copies whole and alone, if it does (its fingerprint must match)."""
        if len(self.ranges) == 1 and self.ranges[0].whole:
            return self.ranges[0].shard
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "path": self.path,
            "start": self.start,
            "rows": self.rows,
            "ranges": [r.to_dict() for r in self.ranges],
            "buckets": [self.first_bucket, self.last_bucket],
        }


@dataclass(frozen=True, kw_only=True)
class ScatterUnit:
    """Pass 1 of a shuffle: rows ``[start, stop)`` of one source shard, the first at global row ``offset``."""

    index: int
    shard: str
    start: int
    stop: int
    offset: int
    whole: bool

    @property
    def rows(self) -> int:
        return self.stop - self.start

    @property
    def ranges(self) -> tuple[SourceRange, ...]:
        return (SourceRange(shard=self.shard, start=self.start, stop=self.stop, whole=self.whole),)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "shard": self.shard,
            "start": self.start,
            "stop": self.stop,
            "offset": self.offset,
        }


@dataclass(frozen=True, kw_only=True)
class RewritePlan:
    """Everything that decides the output bytes. ``key`` is a digest of all of it (and of the source's
    identity): a resumed run continues only a journal with the same key."""

    operation: str
    format: str
    format_options: Mapping[str, Any]
    parameters: Mapping[str, Any]
    total_rows: int
    batch_rows: int
    units: tuple[OutputUnit, ...]
    shuffle: bool = False
    seed: int | None = None
    scatter: tuple[ScatterUnit, ...] = ()
    bucket_starts: tuple[int, ...] = ()
    key: str = ""

    @property
    def paths(self) -> list[str]:
        return [u.path for u in self.units]

    def describe(self, source: Contract) -> dict[str, Any]:
        """The plan as data (what ``key`` digests)."""
        return {
            "plan": PLAN_VERSION,
            "fingerprint_algorithm": ALGORITHM,
            "source": {
                "ref": source.ref,
                "format": source.format,
                "schema": source.schema.to_dict(),
                "shards": [[s.path, s.bytes, s.rows, s.checksum] for s in source.shards],
            },
            "operation": self.operation,
            "format": self.format,
            "format_options": dict(self.format_options),
            "parameters": dict(self.parameters),
            "batch_rows": self.batch_rows,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "units": [u.to_dict() for u in self.units],
            "scatter": [s.to_dict() for s in self.scatter],
            "bucket_starts": list(self.bucket_starts),
        }


@dataclass(frozen=True)
class _SourceShard:
    path: str
    offset: int
    rows: int
    bytes: int


def _source_shards(source: Contract) -> list[_SourceShard]:
    shards, offset = [], 0
    for shard in source.shards:
        if shard.rows is None:
            raise InputError(
                f"shard {shard.path} of {source.ref} has no row count in its contract; "
                "re-register the dataset so every shard records its rows"
            )
        shards.append(_SourceShard(path=shard.path, offset=offset, rows=shard.rows, bytes=shard.bytes))
        offset += shard.rows
    return shards


def _ranges(shards: Sequence[_SourceShard], start: int, stop: int) -> tuple[SourceRange, ...]:
    out = []
    for shard in shards:
        lo, hi = max(start, shard.offset), min(stop, shard.offset + shard.rows)
        if lo < hi:
            a, b = lo - shard.offset, hi - shard.offset
            out.append(SourceRange(shard=shard.path, start=a, stop=b, whole=(a == 0 and b == shard.rows)))
    return tuple(out)


def decoded_row_bytes(source: Contract) -> int:
    """An estimate of one row's decoded size from the contract alone (deterministic): its bytes, rows and
    format."""
    per_stored = contract_format(source).decoded_per_stored
    return decoded_bytes_per_row(source.total_bytes, source.total_rows or 0, per_stored)


def row_group_rows(source: Contract, default: int) -> int:
    """Rows per Parquet row group so that a group holds about ``ROW_GROUP_BYTES`` of decoded rows (at most
    the format's ``default``): a writer buffers one group, so memory stays flat for wide rows."""
    return max(1024, min(default, ROW_GROUP_BYTES // decoded_row_bytes(source)))


def plan_rewrite(
    source: Contract,
    fmt: Format,
    *,
    operation: str,
    parameters: Mapping[str, Any],
    num_shards: int | None = None,
    rows_per_shard: int | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    splittable_source: bool = False,
) -> RewritePlan:
    """The plan that rewrites ``source`` into ``fmt``.

    With neither ``num_shards`` nor ``rows_per_shard``, output file ``k`` holds exactly source shard ``k``
    (a format conversion). ``splittable_source`` says whether reading a row range of a source shard skips
    the rows before it cheaply (Parquet row groups); it only changes how a shuffle's pass 1 is cut.
    """
    shards = _source_shards(source)
    total = sum(s.rows for s in shards)
    row_bytes = decoded_row_bytes(source)
    batch_rows = batch_rows_for(row_bytes)
    if num_shards is None and rows_per_shard is None:
        spans = [(s.offset, s.rows) for s in shards]
    else:
        if num_shards is not None:
            check_shard_count(num_shards, total, what=source.ref)
        spans = layout(total, num_shards=num_shards, rows_per_shard=rows_per_shard)
    count = len(spans)
    if not shuffle:
        units = tuple(
            OutputUnit(
                index=k,
                path=output_name(k, count, fmt),
                start=start,
                rows=rows,
                ranges=_ranges(shards, start, start + rows),
            )
            for k, (start, rows) in enumerate(spans)
        )
        plan = RewritePlan(
            operation=operation,
            format=fmt.name,
            format_options=fmt.options(),
            parameters=dict(parameters),
            total_rows=total,
            batch_rows=batch_rows,
            units=units,
        )
    else:
        plan = _plan_shuffle(
            shards, fmt, operation, parameters, spans, batch_rows, row_bytes, seed, splittable_source
        )
    digest = hashlib.sha256(
        json.dumps(plan.describe(source), sort_keys=True, default=str).encode()
    ).hexdigest()
    return _with_key(plan, digest[:32])


def _with_key(plan: RewritePlan, key: str) -> RewritePlan:
    return replace(plan, key=key)


def _plan_shuffle(
    shards: Sequence[_SourceShard],
    fmt: Format,
    operation: str,
    parameters: Mapping[str, Any],
    spans: Sequence[tuple[int, int]],
    batch_rows: int,
    row_bytes: int,
    seed: int | None,
    splittable_source: bool,
) -> RewritePlan:
    bucket_rows = max(1, BUCKET_BYTES // row_bytes)
    bucket_starts: list[int] = []
    units = []
    for k, (start, rows) in enumerate(spans):
        parts = max(1, math.ceil(rows / bucket_rows))
        first = len(bucket_starts)
        bucket_starts.extend(start + j * rows // parts for j in range(parts))
        units.append(
            OutputUnit(
                index=k,
                path=output_name(k, len(spans), fmt),
                start=start,
                rows=rows,
                first_bucket=first,
                last_bucket=len(bucket_starts),
            )
        )
    scatter: list[ScatterUnit] = []
    for shard in shards:
        pieces = 1
        if splittable_source and shard.bytes > SCATTER_UNIT_BYTES:
            pieces = min(max(1, shard.rows), math.ceil(shard.bytes / SCATTER_UNIT_BYTES))
        for j in range(pieces):
            a, b = j * shard.rows // pieces, (j + 1) * shard.rows // pieces
            scatter.append(
                ScatterUnit(
                    index=len(scatter),
                    shard=shard.path,
                    start=a,
                    stop=b,
                    offset=shard.offset + a,
                    whole=pieces == 1,
                )
            )
    return RewritePlan(
        operation=operation,
        format=fmt.name,
        format_options=fmt.options(),
        parameters=dict(parameters),
        total_rows=sum(s.rows for s in shards),
        batch_rows=batch_rows,
        units=tuple(units),
        shuffle=True,
        seed=seed,
        scatter=tuple(scatter),
        bucket_starts=tuple(bucket_starts),
    )
