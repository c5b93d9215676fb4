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
    conform_batch,
    describe_exception,
    project_schema,
    slice_batches,
)
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter

__all__ = ["ArrowFormat"]

_CODECS = (None, "zstd", "lz4")
_MAGIC = b"ARROW1\x00\x00"  # the file format's body after these bytes is an IPC stream


def _unreadable(shard: str, exc: BaseException) -> FormatError:
    return FormatError(f"shard {shard}: not a readable Arrow IPC file ({describe_exception(exc)})")


class ArrowFormat(Format):
    """Arrow IPC *file* format (random-access, with a footer), optionally with zstd or lz4 buffers.

    Written batches are cut to at most ``DEFAULT_BATCH_ROWS`` rows; read batches keep the stored batch
    boundaries, cut to ``batch_rows``. Every Arrow type is held as it is (a dictionary nested inside another
    type as its values); a top-level dictionary column gets one dictionary for the whole file.
    """

    name: ClassVar[str] = "arrow"
    extensions: ClassVar[tuple[str, ...]] = (".arrow", ".feather", ".ipc")
    self_describing: ClassVar[bool] = True

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
        same record batches and rows, so a footer that lists fewer batches than the file holds (or more)
        is a FormatError, never a short read. A projection reads only the selected columns' buffers of
        the batches the footer lists.
        """
        footer = self._open(file, shard)
        stored = footer.schema
        target = project_schema(schema if schema is not None else stored, columns, shard=shard)
        indices = []
        for name in target.names:
            index = stored.get_field_index(name)
            if index < 0:
                raise SchemaError(
                    f'shard {shard}: field "{name}" is not in the file (it has: {", ".join(stored.names)})'
                )
            indices.append(index)
        if columns is None:
            yield from self._stream(file, footer, target, shard, batch_rows)
            return
        file.seek(0)
        reader = self._open(file, shard, ipc.IpcReadOptions(included_fields=sorted(set(indices))))
        for index in range(reader.num_record_batches):
            try:
                batch = reader.get_batch(index)
            except pa.ArrowException as exc:
                raise _unreadable(shard, exc) from None
            check_valid(batch, f"shard {shard} record batch {index}")
            yield from slice_batches(conform_batch(batch, target, shard=shard), batch_rows)

    def _stream(
        self, file: IO[bytes], footer: Any, target: pa.Schema, shard: str, batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        declared = footer.num_record_batches
        try:
            declared_rows = int(footer.count_rows())
        except pa.ArrowException as exc:
            raise _unreadable(shard, exc) from None
        file.seek(len(_MAGIC))
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
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowException as exc:
                raise FormatError(
                    f"shard {shard} record batch {batches}: not readable ({describe_exception(exc)})"
                ) from None
            check_valid(batch, f"shard {shard} record batch {batches}")
            batches += 1
            rows += batch.num_rows
            if batches > declared:
                break
            yield from slice_batches(conform_batch(batch, target, shard=shard), batch_rows)
        if (batches, rows) != (declared, declared_rows):
            raise FormatError(
                f"shard {shard}: the Arrow file's footer lists {declared} record batches ({declared_rows} "
                f"rows) but its body holds {batches}{'+' if batches > declared else ''} ({rows} rows so "
                "far): the file is damaged"
            )

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
        self._writer = ipc.new_file(self._sink, schema, options=options)
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
