"""Arrow IPC file format (Feather v2): self-describing, record batch by record batch.

>>> from dsm.formats.arrow import ArrowFormat
>>> ArrowFormat(compression="lz4").options()
{'compression': 'lz4'}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.ipc as ipc

from dsm.errors import FormatError, InputError, SchemaError
from dsm.formats._common import (
    PositionTrackingSink,
    check_batch_schema,
    conform_batch,
    describe_exception,
    project_schema,
    slice_batches,
)
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter

__all__ = ["ArrowFormat"]

_CODECS = (None, "zstd", "lz4")


def _unreadable(shard: str, exc: BaseException) -> FormatError:
    return FormatError(f"shard {shard}: not a readable Arrow IPC file ({describe_exception(exc)})")


class ArrowFormat(Format):
    """Arrow IPC *file* format (random-access, with a footer), optionally with zstd or lz4 buffers.

    Written batches are cut to at most ``DEFAULT_BATCH_ROWS`` rows; read batches keep the stored batch
    boundaries, cut to ``batch_rows``. Every Arrow type is supported.
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
        """The stored batches (cut to ``batch_rows``); with ``schema``, cast to it (SchemaError if not)."""
        stored = self._open(file, shard).schema
        target = project_schema(schema if schema is not None else stored, columns, shard=shard)
        indices = []
        for name in target.names:
            index = stored.get_field_index(name)
            if index < 0:
                raise SchemaError(
                    f'shard {shard}: field "{name}" is not in the file (it has: {", ".join(stored.names)})'
                )
            indices.append(index)
        file.seek(0)
        reader = self._open(file, shard, ipc.IpcReadOptions(included_fields=sorted(set(indices))))
        for index in range(reader.num_record_batches):
            try:
                batch = reader.get_batch(index)
                batch.validate()
            except pa.ArrowException as exc:
                raise _unreadable(shard, exc) from None
            yield from slice_batches(conform_batch(batch, target, shard=shard), batch_rows)

    def open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        return _ArrowWriter(file, schema, self.compression)


class _ArrowWriter(FormatWriter):
    def __init__(self, file: IO[bytes], schema: pa.Schema, compression: str | None) -> None:
        self._schema = schema
        self._closed = False
        options = ipc.IpcWriteOptions(compression=compression)
        self._writer = ipc.new_file(PositionTrackingSink(file), schema, options=options)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        check_batch_schema(batch, self._schema, what="arrow writer")
        for part in slice_batches(batch, DEFAULT_BATCH_ROWS):
            self._writer.write_batch(part)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()
