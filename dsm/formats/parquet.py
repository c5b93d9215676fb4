"""Parquet: self-describing, columnar; read by row group batches, written with fixed-size row groups.

>>> from dsm.formats.parquet import ParquetFormat
>>> ParquetFormat(compression="zstd").options()["compression"]
'zstd'
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from dsm.errors import FormatError, InputError, SchemaError
from dsm.formats._common import (
    PositionTrackingSink,
    check_batch_schema,
    conform_batch,
    describe_exception,
    project_schema,
)
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter
from dsm.formats.index import ShardIndex

__all__ = ["ParquetFormat"]

_CODECS = ("none", "snappy", "gzip", "brotli", "zstd", "lz4")
_MAX_BUFFERED_BYTES = 256 * 1024 * 1024  # a row group is cut early rather than hold more than this


def _unreadable(shard: str, exc: BaseException) -> FormatError:
    return FormatError(f"shard {shard}: not a readable Parquet file ({describe_exception(exc)})")


class ParquetFormat(Format):
    """Parquet files through ``pyarrow.parquet``.

    Options: ``compression`` (none, snappy, gzip, brotli, zstd, lz4), ``compression_level``,
    ``row_group_size`` (rows per row group; a group is cut early once ~256 MiB are buffered),
    ``use_dictionary`` and ``write_statistics``. Every Arrow type Parquet stores is supported.
    """

    name: ClassVar[str] = "parquet"
    extensions: ClassVar[tuple[str, ...]] = (".parquet", ".pq")
    self_describing: ClassVar[bool] = True

    def __init__(
        self,
        *,
        compression: str | None = "zstd",
        compression_level: int | None = None,
        row_group_size: int = 128 * 1024,
        use_dictionary: bool = True,
        write_statistics: bool = True,
    ) -> None:
        codec = "none" if compression is None else str(compression).lower()
        if codec not in _CODECS:
            raise InputError(f"parquet compression {compression!r} is not one of: {', '.join(_CODECS)}")
        if row_group_size < 1:
            raise InputError(f"parquet row_group_size must be at least 1, got {row_group_size}")
        self.compression = codec
        self.compression_level = compression_level
        self.row_group_size = int(row_group_size)
        self.use_dictionary = bool(use_dictionary)
        self.write_statistics = bool(write_statistics)

    def options(self) -> dict[str, Any]:
        return {
            "compression": self.compression,
            "compression_level": self.compression_level,
            "row_group_size": self.row_group_size,
            "use_dictionary": self.use_dictionary,
            "write_statistics": self.write_statistics,
        }

    def unsupported(self, schema: pa.Schema) -> list[str]:
        """Fields whose type pyarrow cannot write to Parquet (found by writing an empty column)."""
        reasons = []
        for field in schema:
            try:
                pq.write_table(pa.table({field.name: pa.array([], type=field.type)}), pa.BufferOutputStream())
            except (pa.ArrowException, ValueError, TypeError) as exc:
                reasons.append(
                    f'field "{field.name}": type {field.type} cannot be stored in Parquet '
                    f"({describe_exception(exc)})"
                )
        return reasons

    def _open(self, file: IO[bytes], shard: str) -> pq.ParquetFile:
        try:
            return pq.ParquetFile(file)
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None
        except OSError as exc:
            # A damaged footer surfaces as a plain OSError ("Couldn't deserialize thrift"): bad bytes.
            if "thrift" in str(exc).lower() or "parquet" in str(exc).lower():
                raise _unreadable(shard, exc) from None
            raise

    def read_schema(self, file: IO[bytes], *, shard: str) -> pa.Schema:
        """The Arrow schema stored in the file's footer."""
        try:
            return self._open(file, shard).schema_arrow
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None

    def count_rows(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> int:
        """Rows from the footer metadata, without decoding any page."""
        return int(self._open(file, shard).metadata.num_rows)

    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Batches of at most ``batch_rows`` rows; with ``schema``, cast to it (SchemaError if impossible)."""
        yield from self._iter(self._open(file, shard), shard, schema, columns, batch_rows, None)

    def fragment_count(self, file: IO[bytes], *, shard: str) -> int:
        """The file's row groups, from its footer."""
        return int(self._open(file, shard).metadata.num_row_groups)

    def fragment_rows(self, file: IO[bytes], *, shard: str) -> list[int]:
        """Rows of each row group, from the footer (nothing is decoded)."""
        metadata = self._open(file, shard).metadata
        return [int(metadata.row_group(i).num_rows) for i in range(metadata.num_row_groups)]

    def iter_fragments(
        self,
        file: IO[bytes],
        fragments: Sequence[int],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of the given row groups, in the order given; no batch spans two row groups."""
        parquet_file = self._open(file, shard)
        count = parquet_file.metadata.num_row_groups
        bad = [i for i in fragments if not 0 <= i < count]
        if bad:
            raise InputError(f"shard {shard}: no row group {bad[0]} (the file has {count})")
        for index in fragments:
            yield from self._iter(parquet_file, shard, schema, columns, batch_rows, [index])

    def _iter(
        self,
        parquet_file: pq.ParquetFile,
        shard: str,
        schema: pa.Schema | None,
        columns: Sequence[str] | None,
        batch_rows: int,
        row_groups: list[int] | None,
    ) -> Iterator[pa.RecordBatch]:
        try:
            stored = parquet_file.schema_arrow
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None
        target = project_schema(schema if schema is not None else stored, columns, shard=shard)
        absent = [name for name in target.names if stored.get_field_index(name) < 0]
        if absent:
            names = ", ".join(f'"{name}"' for name in absent)
            raise SchemaError(
                f"shard {shard}: field {names} is not in the file (it has: {', '.join(stored.names)})"
            )
        if row_groups is None:
            # One row group at a time: pyarrow's reader over a whole file holds ~100 MB more of a 128 MB
            # shard than the same rows read group by group (and is slower).
            row_groups = list(range(parquet_file.metadata.num_row_groups))
        for group in row_groups:
            batches = parquet_file.iter_batches(
                batch_size=batch_rows, row_groups=[group], columns=list(target.names), use_threads=True
            )
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except pa.ArrowException as exc:
                    raise _unreadable(shard, exc) from None
                yield conform_batch(batch, target, shard=shard)

    def open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        return _ParquetWriter(file, schema, self)

    def index_shard(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> ShardIndex:
        """Row groups from the footer: the rows of each and the byte offset of its first page."""
        metadata = self._open(file, shard).metadata
        rows, offsets = [], []
        end = 4  # after the leading magic
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            rows.append(int(group.num_rows))
            starts = []
            for column in range(group.num_columns):
                chunk = group.column(column)
                first = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
                starts.append(int(first))
                end = max(end, int(first) + int(chunk.total_compressed_size))
            offsets.append(min(starts) if starts else end)
        return ShardIndex.of(format=self.name, kind="row_group", rows=rows, offsets=[*offsets, end])


class _ParquetWriter(FormatWriter):
    """Buffers batches into row groups of exactly ``row_group_size`` rows (the last one may be shorter)."""

    def __init__(self, file: IO[bytes], schema: pa.Schema, fmt: ParquetFormat) -> None:
        self._schema = schema
        self._row_group_size = fmt.row_group_size
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._closed = False
        self._writer = pq.ParquetWriter(
            PositionTrackingSink(file),
            schema,
            compression=fmt.compression,
            compression_level=fmt.compression_level,
            use_dictionary=fmt.use_dictionary,
            write_statistics=fmt.write_statistics,
        )

    def write_batch(self, batch: pa.RecordBatch) -> None:
        check_batch_schema(batch, self._schema, what="parquet writer")
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= self._row_group_size:
            self._flush(everything=False)
        elif self._pending_bytes >= _MAX_BUFFERED_BYTES:
            self._flush(everything=True)

    def _flush(self, *, everything: bool) -> None:
        table = pa.Table.from_batches(self._pending, schema=self._schema)
        size = self._row_group_size
        while table.num_rows >= size or (everything and table.num_rows):
            self._writer.write_table(table.slice(0, size), row_group_size=size)
            table = table.slice(size)
        self._pending = table.to_batches()
        self._pending_rows = table.num_rows
        self._pending_bytes = table.nbytes

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pending_rows:
            self._flush(everything=True)
        self._writer.close()
