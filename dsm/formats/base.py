"""The one abstract base every format implements: streaming read and write over Arrow record batches."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar

import pyarrow as pa

from dsm.arrow_types import declares_non_nullable, masked_nulls_filled
from dsm.errors import InputError, SchemaError
from dsm.formats._common import PositionTrackingSink, check_batch_schema
from dsm.formats._decoding import guard
from dsm.formats._storage import Storage, convert_batch
from dsm.formats.index import ShardIndex

__all__ = [
    "COMPRESSED_DECODED_PER_STORED",
    "DEFAULT_BATCH_ROWS",
    "Format",
    "FormatWriter",
    "SeekPoint",
    "ShardIndex",
    "Storage",
    "slice_rows",
]

_READERS = (
    "read_schema",
    "iter_batches",
    "count_rows",
    "fragment_count",
    "iter_fragments",
    "fragment_rows",
    "iter_batches_from",
    "index_shard",
    "read_rows",
    "row_lines",
)
_ITERATING = frozenset({"iter_batches", "iter_fragments", "iter_batches_from", "read_rows"})

DEFAULT_BATCH_ROWS = 65_536
"""Rows per record batch that readers aim for; bounds memory for any shard size."""
COMPRESSED_DECODED_PER_STORED = 3
"""Assumed bytes of decoded (Arrow) rows per stored byte of an encoded or compressed file."""


@dataclass(frozen=True, kw_only=True)
class SeekPoint:
    """A place in one file where reading can start again without decoding what comes before it.

    Row ``row`` (0-based, in the file) starts at ``offset``: a byte offset of the (decompressed) file for line
    formats, on 1-based ``line``. Points are produced by :meth:`Format.iter_batches_from` and only mean
    something to the same format reading the same bytes.
    """

    row: int
    offset: int
    line: int | None = None

    def to_dict(self) -> dict[str, int]:
        out = {"row": self.row, "offset": self.offset}
        if self.line is not None:
            out["line"] = self.line
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeekPoint:
        line = data.get("line")
        return cls(row=int(data["row"]), offset=int(data["offset"]), line=None if line is None else int(line))


class FormatWriter(ABC):
    """Writes record batches of one schema into one open binary file. ``close`` finishes the file."""

    @abstractmethod
    def write_batch(self, batch: pa.RecordBatch) -> None: ...

    @abstractmethod
    def close(self) -> None:
        """Write any footer; does not close the underlying file object."""

    def write_stored(self, group: Any) -> None:
        """Write a piece of a source file as it is stored; only a Parquet writer takes one (a row group:
        :mod:`dsm.formats._stored_groups`)."""
        raise TypeError(f"a {type(self).__name__} writes batches only")

    def abort(self) -> None:
        """Give up on the file after a failure: write nothing more, not even a footer (the file is the
        caller's to discard), and leave nothing that would write later (a library's finaliser)."""
        sink = getattr(self, "_sink", None)
        if isinstance(sink, PositionTrackingSink):
            sink.abandon()

    def __enter__(self) -> FormatWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.abort()


class Format(ABC):
    """A file format over Arrow record batches.

    Subclasses set ``name`` (the registry key and the contract's ``format``), ``extensions`` (for
    detection, with the dot) and take their write options as keyword-only constructor arguments. They
    implement the readers below, :meth:`_open_writer`, and :meth:`stored_type` where their files do not
    hold every Arrow type as it is.

    Readers stream: at most about ``batch_rows`` rows (or one row group) are in memory at once. Every
    reading method of every subclass is wrapped (in ``__init_subclass__``) so that a decoding failure
    raises :class:`dsm.errors.FormatError` naming ``shard`` (and the line, row or field where the format
    knows it) and a failure of the underlying file raises :class:`dsm.errors.StorageError`: no reader
    leaks a library's exception.
    """

    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]]
    self_describing: ClassVar[bool] = True
    """True when files carry their own schema (Parquet, Arrow); text formats are parsed with a given one."""
    rows_in_footer: ClassVar[bool] = False
    """True when :meth:`count_rows` reads only a footer (Parquet); False when it reads every batch header or
    every row, so it is no cheap way to size the batches of a read."""
    index_by_scan: ClassVar[bool] = False
    """True when the format reads a file from its first byte to its last, in order (line and tar formats):
    :meth:`index_shard` reads the whole file, so callers keep the index, keyed by the file's checksum, and
    a one-read open hashes the bytes as the decoder reads them (:func:`dsm.shards.read_once`). False: it
    starts at a footer, which is cheap enough to read again."""
    plain_values: ClassVar[bool] = False
    """True when a file without a codec holds its values about as large as Arrow does (text lines, tar
    members, Arrow IPC); False where encodings shrink them (Parquet). See :attr:`decoded_per_stored`."""
    compression: str | None = None
    """The whole-file or buffer codec this instance reads and writes (None: none)."""

    @property
    def decoded_per_stored(self) -> int:
        """About how many bytes of decoded Arrow rows one stored byte of this format holds: how batches, row
        groups and shuffle buckets are sized from a contract's sizes alone. ``COMPRESSED_DECODED_PER_STORED``
        unless the format stores values plainly and without a codec, then 1 (a JSONL shard's text is
        about its decoded size: taken as compressed, it got Parquet row groups of a third of the bytes
        aimed at).
        """
        return 1 if self.plain_values and self.compression is None else COMPRESSED_DECODED_PER_STORED

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _READERS:
            if name in cls.__dict__:
                setattr(cls, name, guard(cls.__dict__[name], iterates=name in _ITERATING))

    def options(self) -> dict[str, Any]:
        """The write options this instance was made with (recorded in contracts as ``format_options``)."""
        return {}

    # ------------------------------------------------------------------------------- what files hold

    def stored_type(self, type_: pa.DataType) -> pa.DataType:
        """The type values of ``type_`` have once written in this format and read back (the default:
        ``type_`` itself); raises :class:`SchemaError` saying why when the format cannot hold it.

        This is the one place a format says what it does to a type. A stored type other than ``type_``
        must hold every value exactly (same row fingerprint): :meth:`storage` converts into it.
        """
        return type_

    def storage(self, schema: pa.Schema) -> Storage:
        """What this format makes of ``schema``: the schema its files hold, and what it cannot hold."""
        fields, changes, problems = [], [], []
        for field in schema:
            try:
                stored = self.stored_type(field.type)
            except SchemaError as exc:
                problems.append(f'field "{field.name}": {exc}')
                fields.append(field)
                continue
            if not stored.equals(field.type) or str(stored) != str(field.type):
                changes.append(f'field "{field.name}": {field.type} is stored as {stored}')
            fields.append(pa.field(field.name, stored, nullable=field.nullable, metadata=field.metadata))
        return Storage(
            format=self.name,
            source=schema,
            schema=pa.schema(fields, metadata=schema.metadata),
            changes=tuple(changes),
            problems=tuple(problems),
        )

    def unsupported(self, schema: pa.Schema) -> list[str]:
        """Why this format cannot hold ``schema`` (one message per field), or ``[]`` when it can."""
        return list(self.storage(schema).problems)

    @abstractmethod
    def read_schema(self, file: IO[bytes], *, shard: str) -> pa.Schema:
        """The schema of one file: stored (self-describing formats) or inferred from its first rows."""

    @abstractmethod
    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Stream the rows of one file as record batches.

        With ``schema``, the batches have exactly that schema (text formats are parsed with it; a value that
        does not fit raises FormatError naming the line and field). ``columns`` projects by name.
        """

    def count_rows(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> int:
        """Rows in one file; formats with metadata override this to avoid decoding."""
        return sum(b.num_rows for b in self.iter_batches(file, shard=shard, schema=schema))

    def open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        """A writer of batches of ``schema`` into ``file`` with this instance's options.

        The file holds :meth:`storage` ``(schema).schema``: batches are converted exactly into the stored
        types before they are written. A schema the format cannot hold is a SchemaError.
        """
        storage = self.storage(schema)
        storage.check()
        writer = self._open_writer(file, storage.schema)
        if not storage.converts and not declares_non_nullable(schema):
            return writer
        return _StoringWriter(writer, storage)

    @abstractmethod
    def _open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        """A writer of ``schema`` (a stored schema: :meth:`stored_type` of each field) into ``file``."""

    def fragment_count(self, file: IO[bytes], *, shard: str) -> int:
        """Pieces of one file that decode on their own, in any order (Parquet: row groups).

        A format that cannot start decoding in the middle of a file has one fragment: the whole file.
        """
        return 1

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
        """The batches of ``fragments`` (indexes below :meth:`fragment_count`), in the order given."""
        for index in fragments:
            if index != 0:
                raise InputError(
                    f"shard {shard}: format {self.name} has one fragment per file, not {index + 1}"
                )
            yield from self.iter_batches(
                file, shard=shard, schema=schema, columns=columns, batch_rows=batch_rows
            )

    def fragment_rows(self, file: IO[bytes], *, shard: str) -> list[int]:
        """Rows of each fragment (see :meth:`fragment_count`); formats with metadata override this."""
        count = self.fragment_count(file, shard=shard)
        if count == 1:
            file.seek(0)
            return [self.count_rows(file, shard=shard)]
        rows = []
        for index in range(count):
            file.seek(0)
            rows.append(sum(b.num_rows for b in self.iter_fragments(file, [index], shard=shard)))
        return rows

    def iter_batches_from(
        self,
        file: IO[bytes],
        *,
        shard: str,
        start_row: int,
        seek: SeekPoint | None = None,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[tuple[pa.RecordBatch, SeekPoint | None]]:
        """The rows of one file from 0-based ``start_row`` on, each batch with the seek point of the row after
        it (``None`` when the format has none to offer there).

        ``seek`` is a point from an earlier read of the same bytes with ``seek.row <= start_row``; a format
        that can jump there does. The default starts at the fragment holding ``start_row`` when the format has
        several (Parquet row groups), else decodes from the first row, and drops the rows before
        ``start_row``: the cost of a start is at most one fragment (or one file) of decoding. Fragments are
        read one by one from there, from the first row too, so that a reader that stops early (a rewrite's
        part of a shard) decodes at most the fragment it stops in.
        """
        if start_row < 0:
            raise InputError(f"shard {shard}: start_row must be at least 0, got {start_row}")
        first_row = index = 0
        batches: Iterator[pa.RecordBatch]
        count = self.fragment_count(file, shard=shard)
        if count > 1:
            if start_row:
                file.seek(0)
                rows = self.fragment_rows(file, shard=shard)
                while index < len(rows) and first_row + rows[index] <= start_row:
                    first_row += rows[index]
                    index += 1
            file.seek(0)
            batches = self.iter_fragments(
                file, range(index, count), shard=shard, schema=schema, columns=columns, batch_rows=batch_rows
            )
        else:
            batches = self.iter_batches(
                file, shard=shard, schema=schema, columns=columns, batch_rows=batch_rows
            )
        skip = start_row - first_row
        for batch in batches:
            if skip >= batch.num_rows:
                skip -= batch.num_rows
                continue
            yield (batch.slice(skip) if skip else batch), None
            skip = 0

    # ------------------------------------------------------------------------------ random access to rows

    def index_shard(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> ShardIndex:
        """The pieces of one file that decode on their own (see :class:`ShardIndex`).

        The default cuts the file into its fragments (:meth:`fragment_rows`), without byte offsets. Formats
        with ``index_by_scan`` read the file once from its first byte to its last, in order, so that a
        caller can checksum the bytes as they pass.
        """
        file.seek(0)
        rows = self.fragment_rows(file, shard=shard)
        return ShardIndex.of(format=self.name, kind="file" if len(rows) == 1 else "row_group", rows=rows)

    def read_rows(
        self,
        file: IO[bytes],
        index: ShardIndex,
        *,
        shard: str,
        start: int,
        stop: int,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Rows ``start`` up to ``stop`` of one file, decoding only the pieces of ``index`` that hold them.

        Batches have ``schema`` projected to ``columns``, as :meth:`iter_batches` gives them.
        """
        index.check_range(start, stop, shard=shard)
        if start == stop:
            return
        first, last = index.piece_of(start), index.piece_of(stop - 1)
        file.seek(0)
        if index.pieces > 1:
            batches = self.iter_fragments(
                file,
                range(first, last + 1),
                shard=shard,
                schema=schema,
                columns=columns,
                batch_rows=batch_rows,
            )
        else:
            batches = self.iter_batches(
                file, shard=shard, schema=schema, columns=columns, batch_rows=batch_rows
            )
        yield from slice_rows(batches, int(index.starts[first]), start, stop)

    def row_lines(
        self, file: IO[bytes], index: ShardIndex, *, shard: str, start: int, stop: int
    ) -> list[tuple[int, int]] | None:
        """``(1-based line, byte offset)`` where each row ``start`` up to ``stop`` begins, for formats whose
        rows are lines (offsets of the decompressed stream when compressed); None for others."""
        return None

    def value_range(self, index: ShardIndex, row: int, column: str) -> tuple[int, int] | None:
        """``(offset, length)`` of the bytes of ``column`` at ``row`` where the file stores them as they are
        (WebDataset members), so that they can be served straight from the file; None for other formats."""
        return None


def slice_rows(
    batches: Iterator[pa.RecordBatch], first_row: int, start: int, stop: int
) -> Iterator[pa.RecordBatch]:
    """The rows ``start`` up to ``stop`` of ``batches`` whose first row is ``first_row``; stops reading
    ``batches`` once ``stop`` is reached."""
    row = first_row
    for batch in batches:
        end = row + batch.num_rows
        if end > start:
            lo, hi = max(start - row, 0), min(stop, end) - row
            if hi > lo:
                yield batch.slice(lo, hi - lo) if (lo, hi) != (0, batch.num_rows) else batch
        row = end
        if row >= stop:
            return


class _StoringWriter(FormatWriter):
    """Hands the format's writer what it can store: every format's writer alike refuses a null that no
    parent hides in a field declared non-nullable and fills the slots a null parent hides
    (:func:`dsm.arrow_types.masked_nulls_filled`), then batches are converted into the stored schema."""

    def __init__(self, writer: FormatWriter, storage: Storage) -> None:
        self._writer = writer
        self._storage = storage

    def write_batch(self, batch: pa.RecordBatch) -> None:
        check_batch_schema(batch, self._storage.source, what=f"{self._storage.format} writer")
        batch = masked_nulls_filled(batch)
        self._writer.write_batch(
            convert_batch(batch, self._storage.schema) if self._storage.converts else batch
        )

    def write_stored(self, group: Any) -> None:
        self._writer.write_stored(group)

    def close(self) -> None:
        self._writer.close()

    def abort(self) -> None:
        self._writer.abort()


for _name in _READERS:
    _method = Format.__dict__[_name]
    if not getattr(_method, "__isabstractmethod__", False):
        setattr(Format, _name, guard(_method, iterates=_name in _ITERATING))
