"""What a rewrite writes, checked before anything is read: :class:`RewriteSpec` (the operation, the target
format and its write options, and for a reshard the layout), and the decisions made from it and the source
contract alone (the target format instance, rows per file for a target size, whether two places overlap).

The cutover records a spec in its journal (``to_dict``) and rebuilds it from there (``from_dict``); the
command modules build one from their keywords.

>>> spec = RewriteSpec.reshard(num_shards=8, shuffle=True)
>>> spec.seed, spec.layout, spec.to_dict()["num_shards"]
(0, 'num_shards', 8)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dsm.contract import Contract
from dsm.errors import InputError
from dsm.formats import Format, get_format
from dsm.hashing.permutation import SHUFFLE_ALGORITHM
from dsm.rewrite.plan import SourceRange, check_layout, row_group_rows
from dsm.rewrite.reading import iter_range
from dsm.storage import Location, canonical_location, overlaps

__all__ = [
    "OPERATIONS",
    "RewriteSpec",
    "estimate_rows_per_shard",
    "locations_overlap",
    "target_format",
    "write_options",
]

OPERATIONS = ("convert-format", "reshard")
_LAYOUTS = ("num_shards", "shard_size", "rows_per_shard")
_SAMPLE_SHARDS = 4
_SAMPLE_BYTES_PER_SHARD = 4 << 20


@dataclass(frozen=True, kw_only=True)
class RewriteSpec:
    """A rewrite's operation, target format (None: the source's), write options and (``reshard``) layout:
    exactly one of ``num_shards``, ``shard_size`` and ``rows_per_shard``, and the seeded shuffle.

    Made by :meth:`convert` or :meth:`reshard`, which refuse a combination that is not one rewrite.
    """

    operation: str
    format: str | None = None
    num_shards: int | None = None
    shard_size: int | str | None = None
    rows_per_shard: int | None = None
    shuffle: bool = False
    seed: int | None = None
    compression: str | None = None
    compression_level: int | None = None
    row_group_size: int | None = None
    format_options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise InputError(f"{self.operation!r} is not a rewrite; one of {', '.join(OPERATIONS)}")
        self.write_options()  # a key given twice with different values is refused now

    @classmethod
    def convert(
        cls,
        *,
        format: str | None,
        compression: str | None = None,
        compression_level: int | None = None,
        row_group_size: int | None = None,
        format_options: Mapping[str, Any] | None = None,
    ) -> RewriteSpec:
        """A format conversion: one output file per source shard."""
        return cls(
            operation="convert-format",
            format=format,
            compression=compression,
            compression_level=compression_level,
            row_group_size=row_group_size,
            format_options=dict(format_options) if format_options else None,
        )

    @classmethod
    def reshard(
        cls,
        *,
        num_shards: int | None = None,
        shard_size: int | str | None = None,
        rows_per_shard: int | None = None,
        shuffle: bool = False,
        seed: int | None = None,
        format: str | None = None,
        compression: str | None = None,
        compression_level: int | None = None,
        row_group_size: int | None = None,
        format_options: Mapping[str, Any] | None = None,
        command: str = "reshard",
    ) -> RewriteSpec:
        """A reshard by exactly one layout; ``seed`` defaults to 0 with ``shuffle`` and needs it.
        ``command`` names the caller in refusals."""
        check_layout(
            num_shards=num_shards,
            shard_size=shard_size,
            rows_per_shard=rows_per_shard,
            shuffle=shuffle,
            seed=seed,
            command=command,
        )
        return cls(
            operation="reshard",
            format=format,
            num_shards=num_shards,
            shard_size=shard_size,
            rows_per_shard=rows_per_shard,
            shuffle=bool(shuffle),
            seed=(seed if seed is not None else 0) if shuffle else None,
            compression=compression,
            compression_level=compression_level,
            row_group_size=row_group_size,
            format_options=dict(format_options) if format_options else None,
        )

    @property
    def layout(self) -> str | None:
        """The name of the reshard's layout (``num_shards``, ``shard_size`` or ``rows_per_shard``)."""
        return next((name for name in _LAYOUTS if getattr(self, name) is not None), None)

    def write_options(self) -> dict[str, Any]:
        """The target format's options: the flags and ``format_options`` together."""
        return write_options(
            self.compression, self.compression_level, self.row_group_size, self.format_options
        )

    def target_format(self, source: Contract) -> Format:
        """The writer's format instance for ``source`` (see :func:`target_format`)."""
        return target_format(source, self.format or source.format, self.write_options())

    def lineage_parameters(self) -> dict[str, Any]:
        """The first lineage parameters of the version it publishes (the layout, the shuffle), in order."""
        if self.operation != "reshard" or self.layout is None:
            return {}
        parameters: dict[str, Any] = {self.layout: getattr(self, self.layout), "shuffle": self.shuffle}
        if self.shuffle:
            parameters["seed"] = self.seed
            parameters["shuffle_algorithm"] = SHUFFLE_ALGORITHM
        return parameters

    def to_dict(self) -> dict[str, Any]:
        """The rewrite as a cutover journal's ``created`` record keeps it (``spec.rewrite``; the format and
        the operation are recorded beside it)."""
        common = {
            "compression": self.compression,
            "compression_level": self.compression_level,
            "row_group_size": self.row_group_size,
            "format_options": dict(self.format_options) if self.format_options else None,
        }
        if self.operation == "convert-format":
            return common
        return {
            "num_shards": self.num_shards,
            "shard_size": self.shard_size,
            "rows_per_shard": self.rows_per_shard,
            "shuffle": self.shuffle,
            "seed": self.seed,
            **common,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, operation: str, format: str | None) -> RewriteSpec:
        """The spec :meth:`to_dict` recorded (as it was recorded: not checked again)."""
        known = {name: data.get(name) for name in (*_LAYOUTS, "seed", "compression", "compression_level")}
        return cls(
            operation=operation,
            format=format,
            shuffle=bool(data.get("shuffle")),
            row_group_size=data.get("row_group_size"),
            format_options=data.get("format_options"),
            **known,
        )


def write_options(
    compression: str | None,
    compression_level: int | None,
    row_group_size: int | None,
    format_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The writer options the CLI flags and ``--format-option`` pairs give together; a key given twice
    with different values is refused."""
    options = dict(format_options or {})
    for key, value in (
        ("compression", compression),
        ("compression_level", compression_level),
        ("row_group_size", row_group_size),
    ):
        if value is not None:
            if key in options and options[key] != value:
                raise InputError(
                    f"{key} is given twice with different values ({options[key]!r} and {value!r})"
                )
            options[key] = value
    return options


def target_format(source: Contract, to: str, options: Mapping[str, Any]) -> Format:
    """The writer's format: the source's options when the format stays, overlaid with the given ones.

    A format with row groups gets groups of about ``ROW_GROUP_BYTES`` decoded bytes unless the row group
    size is given (its own default of 131,072 rows would buffer ~400 MB of 3 KB text rows per writer).
    """
    base = dict(source.format_options) if to == source.format else {}
    chosen = {**base, **options}
    fmt = get_format(to, **chosen)
    default = fmt.options().get("row_group_size")
    if "row_group_size" not in chosen and isinstance(default, int):
        fmt = get_format(to, **chosen, row_group_size=row_group_rows(source, default))
    return fmt


def locations_overlap(a: Location, b: Location) -> bool:
    """Whether one location contains the other, compared as canonical locations (a symlink, ``s3a://`` for
    ``s3://``, ``./`` and ``//`` all name the same place): a rewrite must never write into its own source."""
    return overlaps(canonical_location(a), canonical_location(b))


class _CountingSink:
    """A write-only file that only counts bytes (to measure a sample's encoded size)."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self.size += n
        return n

    def flush(self) -> None:
        pass


def estimate_rows_per_shard(
    source: Contract, loc: Location, src_fmt: Format, out_fmt: Format, schema: pa.Schema, target: int
) -> int:
    """Rows per output file so that files come out near ``target`` bytes in the target format.

    The estimate encodes a deterministic sample (the first ~4 MiB of rows of up to 4 shards spread over the
    dataset) with the target format and options, so it depends only on the source and the parameters.
    """
    shards = [s for s in source.shards if s.rows]
    if not shards:
        return 1
    picks = sorted({k * (len(shards) - 1) // max(1, _SAMPLE_SHARDS - 1) for k in range(_SAMPLE_SHARDS)})
    sink = _CountingSink()
    sampled = 0
    writer = out_fmt.open_writer(sink, schema)  # type: ignore[arg-type]
    for pick in picks:
        shard = shards[pick]
        rows = shard.rows or 0
        take = max(1, min(rows, _SAMPLE_BYTES_PER_SHARD * rows // max(1, shard.bytes)))
        rng = SourceRange(shard=shard.path, start=0, stop=take, whole=take == rows)
        for batch in iter_range(loc, src_fmt, schema, rng, 4096):
            writer.write_batch(batch)
            sampled += batch.num_rows
    writer.close()
    per_row = sink.size / max(1, sampled)
    return max(1, int(target // max(per_row, 1e-9)))
