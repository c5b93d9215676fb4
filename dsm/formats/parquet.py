"""Parquet: self-describing, columnar; read by row group batches, written with fixed-size row groups.

>>> from dsm.formats.parquet import ParquetFormat
>>> ParquetFormat(compression="zstd").options()["compression"]
'zstd'
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from dsm.errors import FormatError, InputError, SchemaError
from dsm.formats._common import (
    check_utf8,
    checked_ahead,
    conform_batch,
    describe_exception,
    project_schema,
)
from dsm.formats._parquet_writer import ParquetFileWriter
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter
from dsm.formats.index import ShardIndex

__all__ = ["ParquetFormat"]

_CODECS = ("none", "snappy", "gzip", "brotli", "zstd", "lz4")
_GROUPS_AHEAD = 2  # row groups decoded at once where the file is read by offset (``_groups``; 1: one by one)
_STREAM_BUFFER = 1 << 20
"""Bytes of each column's stream buffer when a file on local disk is decoded (:func:`_reader`)."""


def _runs(groups: Sequence[int], rows: Sequence[int], batch_rows: int) -> list[list[int]]:
    """``groups`` (with their ``rows``) cut into runs, in order: each run one group, or consecutive groups
    (``g, g + 1, ...``) that together hold at most ``batch_rows`` rows.

    >>> _runs([0, 1, 2, 3, 4, 7, 8], [10, 10, 10, 30, 10, 10, 10], 25)
    [[0, 1], [2], [3], [4], [7, 8]]
    """
    runs: list[list[int]] = []
    held = 0
    for group, count in zip(groups, rows, strict=True):
        if runs and group == runs[-1][-1] + 1 and held + count <= batch_rows:
            runs[-1].append(group)
            held += count
        else:
            runs.append([group])
            held = count
    return runs


def _flat(schema: pa.Schema) -> bool:
    """Whether every column is a flat, plain type: pyarrow decodes several row groups into one batch only
    then ("Nested data conversions not implemented for chunked array outputs" for a list or a struct; a
    dictionary column's groups may each have their own dictionary)."""
    for field in schema:
        kind = field.type.storage_type if isinstance(field.type, pa.ExtensionType) else field.type
        if pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
            return False
    return True


def _unreadable(shard: str, exc: BaseException) -> FormatError:
    return FormatError(f"shard {shard}: not a readable Parquet file ({describe_exception(exc)})")


def _written_type(kind: pa.DataType) -> pa.DataType:
    """The type dsm hands to pyarrow's Parquet writer for values of ``kind`` (converted exactly).

    Parquet has no seconds unit for times and timestamps and no 64-bit date; pyarrow keeps dictionaries
    only of string and binary values (large ones read back small), writes no null among a dictionary's
    values and no slice of a view. Nested types are converted field by field.
    """
    if pa.types.is_dictionary(kind):
        values = kind.value_type
        if pa.types.is_string(values) or pa.types.is_large_string(values):
            return pa.dictionary(kind.index_type, pa.string(), ordered=kind.ordered)
        if pa.types.is_binary(values) or pa.types.is_large_binary(values):
            return pa.dictionary(kind.index_type, pa.binary(), ordered=kind.ordered)
        return _written_type(values)
    if pa.types.is_date64(kind):
        return pa.date32()
    # pyarrow's writer fails on sliced view arrays (a row group is a slice): views are held as what they view.
    if pa.types.is_string_view(kind):
        return pa.large_string()
    if pa.types.is_binary_view(kind):
        return pa.large_binary()
    if pa.types.is_time32(kind) and kind.unit == "s":
        return pa.time32("ms")
    if pa.types.is_timestamp(kind) and kind.unit == "s":
        return pa.timestamp("ms", tz=kind.tz)
    if pa.types.is_struct(kind):
        # pyarrow cannot read back a non-nullable fixed-size list inside a struct that has nulls: such a
        # field is stored nullable (the same values; only the flag differs).
        fields = [_written_field(kind.field(i)) for i in range(kind.num_fields)]
        return pa.struct(
            [f.with_nullable(True) if pa.types.is_fixed_size_list(f.type) else f for f in fields]
        )
    if pa.types.is_map(kind):
        return pa.map_(_written_field(kind.key_field), _written_field(kind.item_field), kind.keys_sorted)
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(_written_field(kind.value_field), kind.list_size)
    for test, make in _LISTS:
        if test(kind):
            return make(_written_field(kind.value_field))
    return kind


def _written_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _written_type(field.type), nullable=field.nullable)


_LISTS = (
    (pa.types.is_list, pa.list_),
    (pa.types.is_large_list, pa.large_list),
    (pa.types.is_list_view, pa.list_),
    (pa.types.is_large_list_view, pa.large_list),
)


@lru_cache(maxsize=256)
def _read_back(kind: pa.DataType) -> pa.DataType | str:
    """The type pyarrow reads back for a Parquet column written as ``kind``, or why it cannot write it."""
    sink = pa.BufferOutputStream()
    try:
        pq.write_table(pa.table({"c": pa.array([], type=kind)}), sink)
        return pq.read_schema(pa.BufferReader(sink.getvalue())).field("c").type
    except (pa.ArrowException, ValueError, TypeError) as exc:
        return describe_exception(exc)


def _declared_rows(metadata: Any, shard: str) -> int:
    """The rows the footer declares; its row groups must add up to them."""
    rows = int(metadata.num_rows)
    groups = sum(int(metadata.row_group(i).num_rows) for i in range(metadata.num_row_groups))
    if groups != rows:
        raise FormatError(
            f"shard {shard}: the Parquet footer declares {rows} rows but its row groups hold {groups}: "
            "the file is damaged"
        )
    return rows


class ParquetFormat(Format):
    """Parquet files through ``pyarrow.parquet``.

    Options: ``compression`` (none, snappy, gzip, brotli, zstd, lz4), ``compression_level``,
    ``row_group_size`` (rows per row group; a group is cut early once ~256 MiB are buffered),
    ``use_dictionary`` and ``write_statistics``. Pages are written with CRCs, which readers check.
    :meth:`stored_type` says what each Arrow type becomes (``timestamp[s]`` is stored as ``timestamp[ms]``).
    """

    name: ClassVar[str] = "parquet"
    extensions: ClassVar[tuple[str, ...]] = (".parquet", ".pq")
    self_describing: ClassVar[bool] = True
    rows_in_footer: ClassVar[bool] = True

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

    def stored_type(self, type_: pa.DataType) -> pa.DataType:
        """What pyarrow's Parquet writer and reader make of ``type_`` (see ``_written_type``), checked by
        writing an empty column and reading its schema back: a type that does not come back as dsm
        expects is refused rather than stored differently."""
        written = _written_type(type_)
        back = _read_back(written)
        if isinstance(back, str):
            raise SchemaError(f"type {type_} cannot be stored in Parquet ({back})")
        if not back.equals(written):
            raise SchemaError(f"type {type_} is read back from Parquet as {back}, not as {written}")
        return back

    def _open(self, file: IO[bytes], shard: str) -> pq.ParquetFile:
        try:
            return _reader(file)
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
        return _declared_rows(self._open(file, shard).metadata, shard)

    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Batches of at most ``batch_rows`` rows; with ``schema``, cast to it (SchemaError if impossible).
        Consecutive small row groups are decoded together, into batches that span them (see ``_groups``):
        a read from a row (:meth:`Format.iter_batches_from`) goes by :meth:`iter_fragments`, one group
        after another."""
        parquet_file = self._open(file, shard)
        yield from self._iter(file, parquet_file, shard, schema, columns, batch_rows, None, span=True)

    def fragment_count(self, file: IO[bytes], *, shard: str) -> int:
        """The file's row groups, from its footer."""
        return int(self._open(file, shard).metadata.num_row_groups)

    def fragment_rows(self, file: IO[bytes], *, shard: str) -> list[int]:
        """Rows of each row group, from the footer alone (nothing is decoded): the file's last 8 bytes, then
        the footer whose length they give, where pyarrow would read the last 64 KiB (on an object store,
        bytes that the read that decodes the file then downloads again)."""
        file.seek(0, 2)
        size = file.tell()
        file.seek(max(0, size - 8))
        tail = file.read(8)
        length = int.from_bytes(tail[:4], "little")
        if len(tail) < 8 or tail[4:] != b"PAR1" or length + 12 > size:
            raise FormatError(f"shard {shard}: not a readable Parquet file (no footer at its end)")
        file.seek(size - 8 - length)
        footer = file.read(length)
        try:
            metadata = pq.read_metadata(pa.BufferReader(b"PAR1" + footer + tail))
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(shard, exc) from None
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
        yield from self._iter(
            file, parquet_file, shard, schema, columns, batch_rows, list(fragments), span=False
        )

    def _iter(
        self,
        source: IO[bytes],
        parquet_file: pq.ParquetFile,
        shard: str,
        schema: pa.Schema | None,
        columns: Sequence[str] | None,
        batch_rows: int,
        row_groups: list[int] | None,
        *,
        span: bool,
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
        return checked_ahead(
            self._decoded(source, parquet_file, shard, target, batch_rows, row_groups, span=span),
            lambda item: conform_batch(check_utf8(item[0], item[1]), target, shard=shard),
        )

    def _decoded(
        self,
        source: IO[bytes],
        parquet_file: pq.ParquetFile,
        shard: str,
        target: pa.Schema,
        batch_rows: int,
        row_groups: list[int] | None,
        *,
        span: bool,
    ) -> Iterator[tuple[pa.RecordBatch, str]]:
        """The batches as pyarrow decodes them, each with where it is from (not yet checked); the rows of
        each row group and of the file counted against what the footer declares."""
        metadata = parquet_file.metadata
        whole = row_groups is None or row_groups == list(range(metadata.num_row_groups))
        if row_groups is None:
            # One row group at a time: pyarrow's reader over a whole file holds ~100 MB more of a 128 MB
            # shard than the same rows read group by group (and is slower).
            row_groups = list(range(metadata.num_row_groups))
        total = 0
        for run, batches, error in self._groups(
            parquet_file, source, target, batch_rows, row_groups, span=span
        ):
            where = f"shard {shard} row group {run[0]}"
            if len(run) > 1:
                where = f"shard {shard} row groups {run[0]}-{run[-1]}"
            rows = 0
            try:
                for batch in batches:
                    rows += batch.num_rows
                    yield batch, where
                if error is not None:
                    raise error
            except (pa.ArrowException, OSError) as exc:
                if isinstance(exc, OSError) and (type(exc) is not OSError or exc.errno is not None):
                    raise  # storage (pyarrow's own decoding failures are plain OSErrors without an errno)
                raise FormatError(f"{where}: not readable ({describe_exception(exc)})") from None
            declared = sum(int(metadata.row_group(group).num_rows) for group in run)
            if rows != declared and target.names:
                raise FormatError(
                    f"{where}: {rows} rows decoded, {'its' if len(run) == 1 else 'their'} footer declares "
                    f"{declared}: the file is damaged"
                )
            total += rows
        if whole and target.names and total != _declared_rows(metadata, shard):
            raise FormatError(f"shard {shard}: {total} rows decoded, the footer declares {metadata.num_rows}")

    @staticmethod
    def _groups(
        parquet_file: pq.ParquetFile,
        source: IO[bytes],
        target: pa.Schema,
        batch_rows: int,
        row_groups: list[int],
        *,
        span: bool,
    ) -> Iterator[tuple[list[int], Iterator[pa.RecordBatch], BaseException | None]]:
        """``(run of row groups, their batches, the error that ended them early)``, in order.

        Row groups of a file read by offset (pyarrow's own file, memory map or buffer: local disk, the
        cache) are decoded :data:`_GROUPS_AHEAD` runs at once on helper threads, each by its own reader of
        the same footer (one reader is not safe to share between threads), where a group holds at most two
        batches of rows: a row group's text column decodes on one core, so this is what puts a second core
        to work, and what it holds decoded stays within a few batches. A Python file object (an object
        store's one-read file, which hashes the bytes in file order as they pass) is decoded run by run as
        it is read.

        A run is one group; with ``span`` (a whole file, read to its end) and flat columns (:func:`_flat`),
        consecutive groups that together hold at most ``batch_rows`` rows (:func:`_runs`) make one run,
        decoded into batches that span them: a file of 1,024-row groups gave every step after the read
        (checks, fingerprint, shuffle buckets, the writer) batches of a quarter of the rows aimed at.
        """
        metadata = parquet_file.metadata
        columns = list(target.names)

        def batches_of(reader: pq.ParquetFile, run: list[int]) -> Iterator[pa.RecordBatch]:
            return reader.iter_batches(
                batch_size=batch_rows, row_groups=run, columns=columns, use_threads=True
            )

        readers: dict[int, pq.ParquetFile] = {}  # one per helper thread

        def collected(run: list[int]) -> tuple[list[int], list[pa.RecordBatch], BaseException | None]:
            batches: list[pa.RecordBatch] = []
            try:
                reader = readers.get(threading.get_ident())
                if reader is None:  # the source stays open: it is the caller's
                    reader = _reader(source, metadata)
                    readers[threading.get_ident()] = reader
                batches.extend(batches_of(reader, run))
            except Exception as exc:  # handed over with the batches before it, raised where it is met
                return run, batches, exc
            return run, batches, None

        sizes = [int(metadata.row_group(g).num_rows) for g in row_groups]
        runs = _runs(row_groups, sizes, batch_rows) if span and _flat(target) else [[g] for g in row_groups]
        small = all(rows <= 2 * batch_rows for rows in sizes)
        by_offset = isinstance(source, (pa.OSFile, pa.MemoryMappedFile, pa.BufferReader))  # not a PythonFile
        if _GROUPS_AHEAD > 1 and by_offset and small and len(runs) > 1:
            for run, batches, error in checked_ahead(iter(runs), collected, ahead=_GROUPS_AHEAD):
                yield run, iter(batches), error
            return
        for run in runs:
            yield run, batches_of(parquet_file, run), None

    def _open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        return ParquetFileWriter(file, schema, self.options())

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


def _reader(file: IO[bytes], metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    """pyarrow's reader of ``file``, checking page CRCs where the writer stored them (dsm's writer does).

    A file on local disk (pyarrow's own file) is read through a stream of :data:`_STREAM_BUFFER` bytes per
    column, page by page, not by pyarrow's default of each row group's column chunks read whole before the
    first page is decoded: a row group of 200,000 rows of text (140 MB stored, 0.5 GB decoded) made a
    reader 100-120 MB larger, and a rewrite holds one per worker, while on files of small or numeric row
    groups the two took the same time. Other files keep the default: on an object store the coalesced
    reads are what keeps the requests few.
    """
    if isinstance(file, pa.OSFile):
        return pq.ParquetFile(
            file,
            metadata=metadata,
            page_checksum_verification=True,
            pre_buffer=False,
            buffer_size=_STREAM_BUFFER,
        )
    return pq.ParquetFile(file, metadata=metadata, page_checksum_verification=True)
