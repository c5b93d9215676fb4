"""Arrow IPC file format (Feather v2): self-describing, record batch by record batch.

>>> from dsm.formats.arrow import ArrowFormat
>>> ArrowFormat(compression="lz4").options()
{'compression': 'lz4'}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from dsm.errors import FormatError, InputError, SchemaError
from dsm.formats._common import (
    PositionTrackingSink,
    check_batch_schema,
    check_valid,
    checked_ahead,
    conform_batch,
    describe_exception,
    native_sink,
    project_schema,
    slice_batches,
)
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter, slice_rows
from dsm.formats.index import ShardIndex

__all__ = ["ArrowFormat"]

_CODECS = (None, "zstd", "lz4")
_BODY_START = 8  # "ARROW1" and two bytes of padding: after them, the file holds an IPC stream


def _unreadable(shard: str, exc: BaseException) -> FormatError:
    return FormatError(f"shard {shard}: not a readable Arrow IPC file ({describe_exception(exc)})")


def _target(
    stored: pa.Schema, schema: pa.Schema | None, columns: Sequence[str] | None, shard: str
) -> pa.Schema:
    """The schema batches are read as: ``schema`` (else the stored one) projected to ``columns``; every
    field of it must be stored."""
    target = project_schema(schema if schema is not None else stored, columns, shard=shard)
    for name in target.names:
        if stored.get_field_index(name) < 0:
            raise SchemaError(
                f'shard {shard}: field "{name}" is not in the file (it has: {", ".join(stored.names)})'
            )
    return target


class ArrowFormat(Format):
    """Arrow IPC *file* format (random-access, with a footer), optionally with zstd or lz4 buffers.

    Written batches are cut to at most ``DEFAULT_BATCH_ROWS`` rows; read batches keep the stored batch
    boundaries, cut to ``batch_rows``. Every Arrow type is held as it is (a dictionary nested inside another
    type as its values); a top-level dictionary column gets one dictionary for the whole file.
    """

    name: ClassVar[str] = "arrow"
    extensions: ClassVar[tuple[str, ...]] = (".arrow", ".feather", ".ipc")
    self_describing: ClassVar[bool] = True
    plain_values: ClassVar[bool] = True

    def __init__(self, *, compression: str | None = None) -> None:
        codec = None if compression in (None, "none") else str(compression).lower()
        if codec not in _CODECS:
            raise InputError(f"arrow compression {compression!r} is not one of: none, zstd, lz4")
        self.compression = codec

    def options(self) -> dict[str, Any]:
        return {"compression": self.compression}

    def stored_type(self, type_: pa.DataType) -> pa.DataType:
        """Every type as it is, except a dictionary nested inside another type: held as its values."""
        return _stored_type(type_, 0)

    def _open(self, file: IO[bytes], shard: str, options: ipc.IpcReadOptions | None = None) -> Any:
        try:
            return ipc.open_file(file, options=options)
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None

    def read_schema(self, file: IO[bytes], *, shard: str) -> pa.Schema:
        """The schema stored in the file."""
        return self._open(file, shard).schema

    def count_rows(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> int:
        """Rows from the batch headers (``RecordBatchFileReader.count_rows``), without decoding bodies."""
        reader = self._open(file, shard)
        try:
            return int(reader.count_rows())
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None

    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """The stored batches (cut to ``batch_rows``); with ``schema``, cast to it (SchemaError if not).

        A whole read streams the file's body message by message and checks it against the footer: the
        same schema, record batches and rows, so a footer that lists fewer batches than the file holds (or
        more) is a FormatError, never a short read. A projection reads only the selected columns' buffers
        of the batches the footer lists.
        """
        if columns is None:
            footer = self._open(file, shard)
            target = _target(footer.schema, schema, None, shard)
            yield from self._stream(file, footer, target, shard, batch_rows)
            return
        reader, target = self._projected(file, shard, schema, columns)
        for index in range(reader.num_record_batches):
            yield from slice_batches(self._batch(reader, index, target, shard), batch_rows)

    def _projected(
        self, file: IO[bytes], shard: str, schema: pa.Schema | None, columns: Sequence[str] | None
    ) -> tuple[Any, pa.Schema]:
        """A reader of only the stored fields that ``schema`` projected to ``columns`` needs."""
        stored = self._open(file, shard).schema
        target = _target(stored, schema, columns, shard)
        indices = sorted({stored.get_field_index(name) for name in target.names})
        file.seek(0)
        return self._open(file, shard, ipc.IpcReadOptions(included_fields=indices)), target

    @staticmethod
    def _batch(reader: Any, index: int, target: pa.Schema, shard: str) -> pa.RecordBatch:
        try:
            batch = reader.get_batch(index)
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None
        check_valid(batch, f"shard {shard} record batch {index}")
        return conform_batch(batch, target, shard=shard)

    def index_shard(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> ShardIndex:
        """Record batches from the footer (their offsets) and their message headers (their rows): no
        batch body is read."""
        try:
            blocks = _record_batch_blocks(file)
            rows = [_batch_length(file, offset, meta) for offset, meta, _ in blocks]
        except (ValueError, IndexError) as exc:
            raise FormatError(f"shard {shard}: not a readable Arrow IPC file ({exc})") from None
        end = blocks[-1][0] + blocks[-1][1] + blocks[-1][2] if blocks else 0
        return ShardIndex.of(
            format=self.name, kind="record_batch", rows=rows, offsets=[b[0] for b in blocks] + [end]
        )

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
        """Only the record batches holding rows ``start`` up to ``stop`` are read, and of those only the
        buffers of the projected fields."""
        index.check_range(start, stop, shard=shard)
        if start == stop:
            return
        first, last = index.piece_of(start), index.piece_of(stop - 1)
        reader, target = self._projected(file, shard, schema, columns)
        if reader.num_record_batches != index.pieces:
            raise FormatError(f"shard {shard}: the row index does not match the file; it changed, rebuild it")
        batches = (self._batch(reader, i, target, shard) for i in range(first, last + 1))
        for batch in slice_rows(batches, int(index.starts[first]), start, stop):
            yield from slice_batches(batch, batch_rows)

    def _stream(
        self, file: IO[bytes], footer: Any, target: pa.Schema, shard: str, batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """The body's record batches (:meth:`_body`), each fully validated and conformed to ``target`` on a
        helper thread while the next one is read (:func:`checked_ahead`: both release the GIL); nothing is
        yielded before its check passed, and a failure is raised after the batches before it."""

        def checked(item: tuple[int, pa.RecordBatch]) -> pa.RecordBatch:
            index, batch = item
            check_valid(batch, f"shard {shard} record batch {index}")
            return conform_batch(batch, target, shard=shard)

        for batch in checked_ahead(self._body(file, footer, shard), checked):
            yield from slice_batches(batch, batch_rows)

    def _body(self, file: IO[bytes], footer: Any, shard: str) -> Iterator[tuple[int, pa.RecordBatch]]:
        """The body's messages in file order, each record batch (with its index) checked against the
        footer's block for it: it ends where the block says and holds the rows the block's header declares.
        The header is read just before its batch (pyarrow's ``count_rows`` would read every header first,
        ahead of the body, and a one-pass read would fetch those blocks twice)."""
        try:
            blocks = _record_batch_blocks(file)
        except (ValueError, IndexError) as exc:
            raise FormatError(f"shard {shard}: not a readable Arrow IPC file ({exc})") from None
        file.seek(_BODY_START)
        try:
            reader = ipc.open_stream(file)
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None
        if not reader.schema.equals(footer.schema):
            raise FormatError(
                f"shard {shard}: the Arrow file's body has the schema ({reader.schema.to_string()}) but its "
                f"footer says ({footer.schema.to_string()}): the file is damaged"
            )
        batches = rows = 0
        while True:
            declared = self._declared_rows(file, blocks, batches, shard)
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowException as exc:
                raise FormatError(
                    f"shard {shard} record batch {batches}: not readable ({describe_exception(exc)})"
                ) from None
            if declared is None:
                raise FormatError(
                    f"shard {shard}: the Arrow file's footer lists {len(blocks)} record batches but its body "
                    "holds more: the file is damaged"
                )
            offset, meta, body = blocks[batches]
            if file.tell() != offset + meta + body or batch.num_rows != declared:
                raise FormatError(
                    f"shard {shard} record batch {batches}: the footer places it at bytes {offset}-"
                    f"{offset + meta + body} with {declared} rows, but the body's batch ends at byte "
                    f"{file.tell()} with {batch.num_rows} rows: the file is damaged"
                )
            yield batches, batch
            batches += 1
            rows += batch.num_rows
        if batches != len(blocks):
            raise FormatError(
                f"shard {shard}: the Arrow file's footer lists {len(blocks)} record batches but its body "
                f"holds {batches} ({rows} rows): the file is damaged"
            )

    @staticmethod
    def _declared_rows(
        file: IO[bytes], blocks: list[tuple[int, int, int]], index: int, shard: str
    ) -> int | None:
        """The rows the header of the footer's block ``index`` declares (None past the last block); the
        file is left where it was."""
        if index >= len(blocks):
            return None
        here = file.tell()
        offset, meta, _ = blocks[index]
        try:
            return _batch_length(file, offset, meta)
        except (ValueError, IndexError) as exc:
            raise FormatError(
                f"shard {shard}: the Arrow file's footer lists record batch {index} at byte {offset}, where "
                f"there is none ({exc}): the file is damaged"
            ) from None
        finally:
            file.seek(here)

    def _open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        return _ArrowWriter(file, schema, self.compression)


def _stored_type(kind: pa.DataType, depth: int) -> pa.DataType:
    """Arrow IPC holds every type; a dictionary inside a nested type is held as its values (the writer
    unifies the dictionaries of top-level columns only)."""
    if pa.types.is_dictionary(kind):
        return _stored_type(kind.value_type, depth) if depth else kind
    if not kind.num_fields or pa.types.is_union(kind) or pa.types.is_run_end_encoded(kind):
        return kind
    if pa.types.is_struct(kind):
        return pa.struct([_stored_field(kind.field(i), depth) for i in range(kind.num_fields)])
    if pa.types.is_map(kind):
        key, item = _stored_field(kind.key_field, depth), _stored_field(kind.item_field, depth)
        return pa.map_(key, item, kind.keys_sorted)
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(_stored_field(kind.value_field, depth), kind.list_size)
    for test, make in _LISTS:
        if test(kind):
            return make(_stored_field(kind.value_field, depth))
    return kind


def _stored_field(field: pa.Field, depth: int) -> pa.Field:
    return pa.field(field.name, _stored_type(field.type, depth + 1), nullable=field.nullable)


_LISTS = (
    (pa.types.is_list, pa.list_),
    (pa.types.is_large_list, pa.large_list),
    (pa.types.is_list_view, pa.list_view),
    (pa.types.is_large_list_view, pa.large_list_view),
)


class _DictionaryUnifier:
    """One dictionary for a column across every batch of a file (the IPC file format allows no
    replacement): each batch's values are found in, or appended to, the values written so far, and its
    indices remapped; the writer then emits what was appended as a delta."""

    def __init__(self, kind: pa.DictionaryType) -> None:
        self._kind = kind
        self._known: pa.Array | None = None

    def __call__(self, array: pa.DictionaryArray, name: str) -> pa.DictionaryArray:
        values = array.dictionary
        if self._known is None:
            self._known = values
            return array
        if values.equals(self._known):
            return array
        found = pc.index_in(values, value_set=self._known, skip_nulls=False)
        fresh = values.filter(found.is_null())
        if len(fresh):
            self._known = pa.concat_arrays([self._known, fresh])
        mapping = pc.index_in(values, value_set=self._known, skip_nulls=False)
        if len(self._known) - 1 > _INDEX_MAX[str(self._kind.index_type)]:
            raise SchemaError(
                f'field "{name}": its dictionaries hold {len(self._known)} distinct values together, more '
                f"than its {self._kind.index_type} indices reach; write it with wider indices"
            )
        indices = mapping.take(array.indices).cast(self._kind.index_type)
        return pa.DictionaryArray.from_arrays(indices, self._known, ordered=self._kind.ordered)


_INDEX_MAX = {
    "int8": 2**7 - 1,
    "uint8": 2**8 - 1,
    "int16": 2**15 - 1,
    "uint16": 2**16 - 1,
    "int32": 2**31 - 1,
    "uint32": 2**32 - 1,
    "int64": 2**63 - 1,
    "uint64": 2**64 - 1,
}


class _ArrowWriter(FormatWriter):
    def __init__(self, file: IO[bytes], schema: pa.Schema, compression: str | None) -> None:
        self._schema = schema
        self._closed = False
        options = ipc.IpcWriteOptions(compression=compression, emit_dictionary_deltas=True)
        self._sink = PositionTrackingSink(file)
        self._stream = native_sink(self._sink)
        self._writer = ipc.new_file(self._stream, schema, options=options)
        self._unifiers = {
            i: _DictionaryUnifier(field.type)
            for i, field in enumerate(schema)
            if pa.types.is_dictionary(field.type)
        }

    def write_batch(self, batch: pa.RecordBatch) -> None:
        check_batch_schema(batch, self._schema, what="arrow writer")
        if self._unifiers:
            columns = list(batch.columns)
            for i, unify in self._unifiers.items():
                columns[i] = unify(columns[i], self._schema.field(i).name)
            batch = pa.RecordBatch.from_arrays(columns, schema=self._schema)
        for part in slice_batches(batch, DEFAULT_BATCH_ROWS):
            self._writer.write_batch(part)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()
            self._stream.close()


# Arrow IPC file layout: the footer (a flatbuffer) lists each record batch as a Block {offset: int64,
# metaDataLength: int32, bodyLength: int64}; each batch's message header holds its row count. pyarrow reads a
# whole batch to tell its rows, so the few flatbuffer fields needed are read here.
_MAGIC = b"ARROW1"
_RECORD_BATCH = 3  # MessageHeader.RecordBatch


def _u16(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "little")


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "little")


def _field(data: bytes, table: int, number: int) -> int | None:
    """The position of field ``number`` of the flatbuffer table at ``table``, or None when absent."""
    vtable = table - int.from_bytes(data[table : table + 4], "little", signed=True)
    entry = 4 + 2 * number
    if entry + 2 > _u16(data, vtable):
        return None
    offset = _u16(data, vtable + entry)
    return table + offset if offset else None


def _read_at(file: IO[bytes], offset: int, size: int) -> bytes:
    file.seek(offset)
    data = bytes(file.read(size))
    if len(data) != size:
        raise ValueError(f"ends before byte {offset + size}")
    return data


def _record_batch_blocks(file: IO[bytes]) -> list[tuple[int, int, int]]:
    """``(offset, metadata length, body length)`` of each record batch, from the file's footer."""
    size = file.seek(0, 2)
    if size < 2 * len(_MAGIC) + 4 or _read_at(file, 0, len(_MAGIC)) != _MAGIC:
        raise ValueError("no Arrow IPC file magic at its start")
    tail = _read_at(file, size - len(_MAGIC) - 4, len(_MAGIC) + 4)
    if tail[4:] != _MAGIC:
        raise ValueError("no Arrow IPC file magic at its end")
    length = int.from_bytes(tail[:4], "little", signed=True)
    if not 0 < length <= size - 2 * len(_MAGIC) - 4:
        raise ValueError(f"footer length {length} does not fit the file")
    footer = _read_at(file, size - len(_MAGIC) - 4 - length, length)
    root = _u32(footer, 0)
    where = _field(footer, root, 3)  # Footer.recordBatches
    if where is None:
        return []
    vector = where + _u32(footer, where)
    blocks = []
    for i in range(_u32(footer, vector)):
        at = vector + 4 + 24 * i
        offset = int.from_bytes(footer[at : at + 8], "little", signed=True)
        meta = int.from_bytes(footer[at + 8 : at + 12], "little", signed=True)
        body = int.from_bytes(footer[at + 16 : at + 24], "little", signed=True)
        blocks.append((offset, meta, body))
    return blocks


def _batch_length(file: IO[bytes], offset: int, meta_length: int) -> int:
    """The rows of the record batch whose message starts at ``offset``, from its header alone."""
    meta = _read_at(file, offset, meta_length)
    start = 8 if meta[:4] == b"\xff\xff\xff\xff" else 4  # continuation marker, then the length
    message = meta[start:]
    root = _u32(message, 0)
    kind = _field(message, root, 1)  # Message.header_type
    if kind is None or message[kind] != _RECORD_BATCH:
        raise ValueError(f"the block at byte {offset} is not a record batch")
    where = _field(message, root, 2)  # Message.header
    if where is None:
        raise ValueError(f"the record batch at byte {offset} has no header")
    header = where + _u32(message, where)
    length = _field(message, header, 0)  # RecordBatch.length
    return 0 if length is None else int.from_bytes(message[length : length + 8], "little", signed=True)
