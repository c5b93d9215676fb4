"""Writing Parquet: :class:`ParquetFileWriter`, the writer of :class:`~dsm.formats.parquet.ParquetFormat`,
and the threads that encode its row groups beside it (:class:`GroupEncoders`).

A file written alone (one file converted, the last file of a job) encodes on every core, where pyarrow's
writer encodes one group at a time on the thread that writes the file: on the cores that no file being
written has, a group is encoded by pyarrow's writer, with the file's options, into a file of its own in
memory, and the file's writer places it as stored (:class:`~dsm.formats._stored_groups.StoredGroup`) once
the groups before it are written. The file is the same bytes as if its writer had encoded every group.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from dsm.formats._common import (
    NATIVE_WRITE_BUFFER,
    PositionTrackingSink,
    check_batch_schema,
    is_binary_like,
    is_string_like,
    native_sink,
)
from dsm.formats._stored_groups import StoredGroup, footer_with_groups
from dsm.formats.base import FormatWriter

__all__ = ["ENCODERS", "GroupEncoders", "ParquetFileWriter", "encoded_group", "writer_options"]

T = TypeVar("T")
_MAX_BUFFERED_BYTES = 256 * 1024 * 1024  # a row group is cut early rather than hold more than this


class ParquetFileWriter(FormatWriter):
    """Buffers batches into row groups of exactly ``row_group_size`` rows (the last one may be shorter)."""

    def __init__(self, file: IO[bytes], schema: pa.Schema, options: Mapping[str, Any]) -> None:
        """``options``: the format's (:meth:`~dsm.formats.parquet.ParquetFormat.options`)."""
        self._schema = schema
        self._row_group_size = int(options["row_group_size"])
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._closed = False
        self._sink = PositionTrackingSink(file)
        # One native stream for pyarrow's writer and for the groups written as stored: its position is
        # where pyarrow places what it writes next.
        self._native = native_sink(self._sink)
        self._format_options = dict(options)
        self._opened: pq.ParquetWriter | None = None  # opened with the first rows (see _writer)
        self._options: dict[str, Any] = {}  # pyarrow's writer options, decided with the first rows
        self._encoding: deque[Future[list[StoredGroup]]] = deque()  # groups being encoded, in file order
        self._stored: list[list[Any]] = []  # the footer entries of the groups written as stored
        ENCODERS.opened(self)

    def _writer(self, first: pa.Table) -> pq.ParquetWriter:
        """pyarrow's writer of the file (its leading magic, its footer), opened when the first rows are
        written: which columns are dictionary-encoded is decided on them (:func:`_dictionary_columns`), for
        every group of the file."""
        if self._opened is None:
            self._options = writer_options(first, self._format_options)
            self._opened = pq.ParquetWriter(self._native, self._schema, **self._options)
        return self._opened

    def abort(self) -> None:
        # pyarrow's writer closes itself when collected, writing a footer into a file that is gone, and the
        # native stream flushes what it holds: neither may reach the file.
        super().abort()
        self._pending.clear()
        self._encoding.clear()  # what is still being encoded is dropped when it is done
        self._closed = True
        ENCODERS.closed(self)
        if self._opened is not None:
            self._opened.is_open = False

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
            self._encode(table.slice(0, size))
            table = table.slice(size)
        self._pending = table.to_batches()
        self._pending_rows = table.num_rows
        self._pending_bytes = table.nbytes

    def _encode(self, group: pa.Table) -> None:
        """Write ``group`` as the next row group(s). Where cores are to spare (:data:`ENCODERS`), a group
        is encoded beside this thread, on one of them, while this thread goes on with the rows after it
        and encodes the next group itself: each is encoded by pyarrow's writer with the file's options into
        a file of its own in memory, and placed as stored once the groups before it are written. Otherwise
        the file's writer encodes it here. The same bytes either way (``footer_with_groups``): where a group
        was encoded never shows in the file."""
        writer = self._writer(group)  # the leading magic, and the options, from the first rows
        while self._encoding and self._encoding[0].done():
            self._place(*self._encoding.popleft().result())
        spare = ENCODERS.spare()
        if len(self._encoding) < spare:
            future = ENCODERS.submit(encoded_group, group, self._schema, self._options)
            if future is not None:
                self._encoding.append(future)
                return
        if not self._encoding:
            writer.write_table(group, row_group_size=max(1, group.num_rows))
            return
        encoded = encoded_group(group, self._schema, self._options)  # while the groups before it are
        self._drain()
        self._place(*encoded)

    def _place(self, *groups: StoredGroup) -> None:
        """Write ``groups`` as stored, in order. A chunk goes through the native stream's buffer in pieces
        of its size: a larger write passes whole into the Python file, as a copy of its own (a column chunk
        of 8 MiB of text, in fresh pages each time)."""
        for group in groups:
            at = self._native.tell()
            for chunk in group.chunks:
                view = memoryview(chunk)
                for start in range(0, len(view), NATIVE_WRITE_BUFFER):
                    self._native.write(view[start : start + NATIVE_WRITE_BUFFER])
            self._stored.append(group.placed(at))

    def _drain(self) -> None:
        """Every group being encoded beside this thread placed, in order."""
        while self._encoding:
            self._place(*self._encoding.popleft().result())

    def _written_so_far(self) -> None:
        """Every row written so far encoded and placed, in order."""
        if self._pending_rows:
            self._flush(everything=True)
        self._drain()

    def write_stored(self, group: StoredGroup) -> None:
        """Write a row group as stored (:mod:`dsm.formats._stored_groups`), after the rows written so far;
        its rows were checked to be of this file's schema by whoever read it."""
        self._written_so_far()
        self._writer(self._schema.empty_table())
        self._place(group)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._written_so_far()
        finally:
            ENCODERS.closed(self)
        writer = self._writer(self._schema.empty_table())
        if not self._stored:
            writer.close()
            self._native.close()
            return
        self._native.flush()
        self._sink.hold()  # pyarrow's footer lists its own groups only: it is rewritten with the stored ones
        writer.close()
        self._native.flush()
        held = self._sink.release()
        length = int.from_bytes(held[-8:-4], "little")
        self._sink.write(held[: len(held) - 8 - length])  # anything pyarrow wrote before its footer
        self._sink.write(footer_with_groups(held[len(held) - 8 - length :], self._stored))
        self._native.close()


class GroupEncoders:
    """Threads that encode row groups beside the Parquet writers of the process, on the cores that no file
    being written has: at most one group per such core at once, and none while as many files are being
    written as there are cores (each writer then encodes on its own thread, as pyarrow's writer does). A
    file written alone (one file converted, the last file of a job) encodes on every core."""

    def __init__(self) -> None:
        # the cores this process may run on (where the system does not say: the machine's)
        affinity = getattr(os, "sched_getaffinity", None)
        self.width = max(1, len(affinity(0)) if affinity is not None else (os.cpu_count() or 1))
        self._start()
        os.register_at_fork(after_in_child=self._start)

    def _start(self) -> None:
        """A fresh start: in this process, and in a child forked from it, where the parent's threads do not
        run (and a lock one of them held stays held)."""
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._free = self.width
        self._writers: weakref.WeakSet[object] = weakref.WeakSet()

    def opened(self, writer: object) -> None:
        with self._lock:
            self._writers.add(writer)

    def closed(self, writer: object) -> None:
        with self._lock:
            self._writers.discard(writer)

    def spare(self) -> int:
        """How many groups a writer may have encoding beside it now: the cores no file being written has
        (0 where every core has one)."""
        with self._lock:
            return max(0, self.width - len(self._writers))

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T] | None:
        """``fn(*args)`` on one of the threads, or None if :attr:`width` groups are being encoded already."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="dsm-encode")
            if not self._free:
                return None
            self._free -= 1
            future = self._pool.submit(fn, *args)
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Future[Any]) -> None:
        with self._lock:
            self._free += 1


ENCODERS = GroupEncoders()


def writer_options(first: pa.Table, asked: Mapping[str, Any]) -> dict[str, Any]:
    """pyarrow's writer options for a file whose first rows are ``first``, from the format's (``asked``):
    which columns are dictionary-encoded is decided on those rows (:func:`_dictionary_columns`)."""
    return {
        "compression": asked["compression"],
        "compression_level": asked["compression_level"],
        "use_dictionary": _dictionary_columns(first) if asked["use_dictionary"] else False,
        "write_statistics": asked["write_statistics"],
        "write_page_checksum": True,
    }


def encoded_group(group: pa.Table, schema: pa.Schema, options: dict[str, Any]) -> list[StoredGroup]:
    """``group`` encoded by pyarrow's writer with ``options`` in a file in memory: one row group (more
    where it holds more rows than pyarrow puts in one, as the file's own writer would cut it too)."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema, **options) as writer:
        writer.write_table(group, row_group_size=max(1, group.num_rows))
    return StoredGroup.encoded(sink.getvalue())


_DICTIONARY_SAMPLE_ROWS = 16_384
_DICTIONARY_MIN_VALUES = 1_024


def _dictionary_columns(first: pa.Table) -> bool | list[str]:
    """What ``use_dictionary`` hands pyarrow's writer for one file: ``True`` (every column), or the
    Parquet column paths to dictionary-encode, without each top-level column of numbers, instants,
    decimals, text or bytes whose first values (of numbers, up to 16,384 rows; of text or bytes, the first
    2,048 rows; at least 1,024 values either way) are more than a quarter distinct.

    pyarrow dictionary-encodes a column until its dictionary outgrows 1 MiB: a chunk of mostly distinct
    numbers is hashed whole into a dictionary almost as large as the values, which made it the largest
    single cost of writing numeric columns (a third of a shuffled reshard of 48 numeric columns; on a file
    of 28 float columns about half distinct, encoding took 1.84 CPU-s instead of 2.87, and the zstd file
    was 1.6% larger). Text of distinct values fills the 1 MiB sooner but does so in every row group, and
    the dictionary page and indices are then written besides the values. The choice depends on the file's
    first rows only, so the same rows give the same bytes.
    """
    import pyarrow.compute as pc

    sample = first.slice(0, _DICTIONARY_SAMPLE_ROWS)
    plain = set()
    for field, column in zip(sample.schema, sample.columns, strict=True):
        kind = field.type
        if is_string_like(kind) or is_binary_like(kind):  # views are stored as these (stored_type)
            column = column.slice(0, 2 * _DICTIONARY_MIN_VALUES)  # a few texts hashed, not 16,384
        elif not (
            pa.types.is_integer(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_temporal(kind)
            or pa.types.is_decimal(kind)
        ):
            continue
        values = len(column) - column.null_count
        if values >= _DICTIONARY_MIN_VALUES and pc.count_distinct(column).as_py() * 4 > values:
            plain.add(field.name)
    if not plain:
        return True
    paths = _column_paths(first.schema)
    return [path for path in paths if path not in plain]


def _column_paths(schema: pa.Schema) -> list[str]:
    """The Parquet column paths (dotted) of every leaf of ``schema``, as pyarrow's writer names them."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    parquet_schema = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    return [parquet_schema.column(i).path for i in range(len(parquet_schema))]
