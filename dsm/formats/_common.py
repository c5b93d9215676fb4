"""Helpers shared by the format modules (private): file adapters, compression, schema checks, base64."""

from __future__ import annotations

import binascii
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, TypeVar

import pyarrow as pa

from dsm.arrow_types import masked_nulls_filled
from dsm.errors import FormatError, InputError, SchemaError

T = TypeVar("T")
U = TypeVar("U")

try:
    from dsm.formats._jsonkernel import utf8_valid as _utf8_valid  # type: ignore[import-not-found]
except ImportError:  # built without a C compiler
    _utf8_valid = None

__all__ = [
    "STREAM_CODECS",
    "STREAM_SUFFIXES",
    "NonClosingReader",
    "PositionTrackingSink",
    "RowProblem",
    "b64decode_array",
    "b64encode_array",
    "check_batch_schema",
    "check_stream_codec",
    "check_text_timestamps",
    "check_utf8",
    "check_valid",
    "checked_ahead",
    "conform_batch",
    "describe_exception",
    "encode_dictionary",
    "is_binary_like",
    "is_codec_error",
    "is_string_like",
    "native_sink",
    "open_input_stream",
    "open_output_stream",
    "project_schema",
    "read_span",
    "slice_batches",
    "texts_valid",
]

STREAM_CODECS = ("gzip", "zstd", "bz2", "lz4")
"""Whole-file compression codecs the text formats accept (``lz4`` is the LZ4 frame format)."""
STREAM_SUFFIXES = {"gzip": ".gz", "zstd": ".zst", "bz2": ".bz2", "lz4": ".lz4"}
"""The file name suffix of each whole-file codec: a shard's name says how it is compressed."""


def describe_exception(exc: BaseException) -> str:
    """A one-line description of a pyarrow error, without its internal file positions."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


class PositionTrackingSink:
    """A write-only file object over ``raw`` that counts the bytes written.

    Arrow's writers ask the sink for ``tell()``; object-store files may not support ``tell``/``seek`` for
    writing, so the position is tracked here and ``close`` only flushes: the caller owns ``raw``.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._position = 0
        self.closed = False
        self._abandoned = False
        self._held: bytearray | None = None

    def abandon(self) -> None:
        """Drop whatever is written from now on: a writer given up on (its file is about to be removed)
        still flushes when it is collected, into a file its owner may have closed."""
        self._abandoned = True

    def hold(self) -> None:
        """Keep what is written from now on instead of passing it on, until :meth:`release`: a footer to
        be edited before it is written (:mod:`dsm.formats._stored_groups`)."""
        self._held = bytearray()

    def release(self) -> bytes:
        """What was written since :meth:`hold`; writes pass on again."""
        held, self._held = bytes(self._held or b""), None
        return held

    def write(self, data: Any) -> int:
        view = memoryview(data)
        if self._abandoned:
            return view.nbytes
        if self._held is not None:
            self._held += view
            return view.nbytes
        self._raw.write(view)  # type: ignore[arg-type]
        self._position += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self._position + (len(self._held) if self._held is not None else 0)

    def flush(self) -> None:
        flush = getattr(self._raw, "flush", None)
        if flush is not None and not self._abandoned:
            flush()

    def close(self) -> None:
        if not self.closed:
            self.flush()
            self.closed = True

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False


class NonClosingReader:
    """A read-only proxy of ``raw`` whose ``close`` does nothing: Arrow streams close what they wrap."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        return self._raw.read(size)

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(memoryview(buffer)))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def seekable(self) -> bool:
        return bool(getattr(self._raw, "seekable", lambda: False)())

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def check_stream_codec(compression: str | None) -> str | None:
    """Validate a whole-file compression option (``None`` means uncompressed)."""
    if compression is None or compression == "none":
        return None
    if compression not in STREAM_CODECS:
        raise InputError(
            f"compression {compression!r} is not supported; use one of: none, {', '.join(STREAM_CODECS)}"
        )
    if not pa.Codec.is_available(compression):
        raise InputError(f"compression {compression!r} is not available in this pyarrow build")
    return compression


def is_codec_error(exc: BaseException, compression: str | None) -> bool:
    """True for a decompression failure raised by Arrow (a plain OSError), not a storage error."""
    return compression is not None and (isinstance(exc, pa.ArrowException) or type(exc) is OSError)


def open_input_stream(file: IO[bytes], compression: str | None) -> Any:
    """A readable stream of the file's (decompressed) bytes; never closes ``file``."""
    if compression is None:
        return file
    return pa.CompressedInputStream(pa.PythonFile(NonClosingReader(file), mode="r"), compression)


def open_output_stream(sink: PositionTrackingSink, compression: str | None) -> Any:
    """A writable stream that compresses into ``sink``; closing it never closes the file under it."""
    if compression is None:
        return sink
    return pa.CompressedOutputStream(pa.PythonFile(sink, mode="w"), compression)


NATIVE_WRITE_BUFFER = 1 << 20
"""Bytes an Arrow writer's stream gathers before it writes them to its Python file."""


def native_sink(sink: PositionTrackingSink) -> pa.NativeFile:
    """``sink`` as an Arrow stream that passes writes on in pieces of :data:`NATIVE_WRITE_BUFFER` bytes (a
    larger write passes whole). Arrow's writers write each buffer of a record batch, each page header and
    each page as a write of its own, and every write into a Python file takes the GIL and makes a system
    call: a shuffle's pass 1 wrote its spill files in 81,900 writes for 0.5 GB of numeric rows, and the
    worker threads waited on one another for the GIL. ``close`` flushes, and closes ``sink``, which only
    flushes: the file under it stays open."""
    return pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), NATIVE_WRITE_BUFFER)


def read_span(file: IO[bytes], start: int, end: int, compression: str | None) -> bytes:
    """Bytes ``start`` up to ``end`` of a file, or of its decompressed stream (which is decompressed from
    its first byte: compressed text has no place to jump to)."""
    size = end - start
    if compression is None:
        file.seek(start)
        stream: Any = file
    else:
        file.seek(0)
        stream = open_input_stream(file, compression)
        skip = start
        while skip > 0:
            got = stream.read(min(skip, 16 << 20))
            if not got:
                raise FormatError(f"{compression} stream ends before byte {start}; the file changed")
            skip -= len(got)
    parts = []
    while size > 0:
        got = stream.read(size)
        if not got:
            raise FormatError(f"ends before byte {end}; the file changed after it was indexed")
        parts.append(bytes(got))
        size -= len(got)
    return b"".join(parts)


def is_string_like(type_: pa.DataType) -> bool:
    return bool(pa.types.is_string(type_) or pa.types.is_large_string(type_))


def is_binary_like(type_: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(type_) or pa.types.is_large_binary(type_) or pa.types.is_fixed_size_binary(type_)
    )


def project_schema(schema: pa.Schema, columns: Sequence[str] | None, *, shard: str) -> pa.Schema:
    """``schema`` restricted to ``columns`` (in that order); an unknown column is a SchemaError."""
    if columns is None:
        return schema
    missing = [c for c in columns if schema.get_field_index(c) < 0]
    if missing:
        names = ", ".join(f'"{c}"' for c in missing)
        raise SchemaError(f"shard {shard}: no column {names} (columns: {', '.join(schema.names)})")
    return pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)


def check_batch_schema(batch: pa.RecordBatch, schema: pa.Schema, *, what: str) -> None:
    """Refuse a batch whose schema differs from the writer's (names, types, nullability)."""
    if not batch.schema.equals(schema, check_metadata=False):
        raise SchemaError(
            f"{what}: a batch with schema ({batch.schema.to_string(show_schema_metadata=False)}) "
            f"was given to a writer of ({schema.to_string(show_schema_metadata=False)})"
        )


_FIRST_READABLE_NS = -9_223_372_036_000_000_000
"""Arrow parses ISO-8601 text into whole seconds first, then scales them: in ``timestamp[ns]`` the last
0.85 s before 1677-09-21T00:12:44 (the int64 minimum) are written fine but cannot be read back."""


def check_text_timestamps(array: pa.Array) -> None:
    """Refuse timestamps that text formats would write but no reader could parse back (SchemaError)."""
    if array.type.unit != "ns" or len(array) == array.null_count:
        return
    import pyarrow.compute as pc

    low = pc.min(array.view(pa.int64())).as_py()
    if low is not None and low < _FIRST_READABLE_NS:
        raise SchemaError(
            f"a {array.type} value ({low} ns) is before 1677-09-21T00:12:44, which ISO-8601 text cannot hold "
            "readably at nanosecond precision"
        )


def _has_text(type_: pa.DataType) -> bool:
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_string_view(type_):
        return True
    if pa.types.is_dictionary(type_):
        return _has_text(type_.value_type)
    return any(_has_text(type_.field(i).type) for i in range(type_.num_fields))


def texts_valid(column: pa.Array) -> bool:
    """Whether the compiled kernel finds a string or large_string column without nulls valid: each value
    UTF-8, the offsets ascending within the bytes. False where it finds otherwise or does not apply (nulls,
    whose bytes Arrow does not check; other types; no kernel built): Arrow's full validation then decides,
    and says what is wrong. The kernel passes over ASCII 64 bytes at a time: on text in cache, it took half
    the instructions of Arrow's check and ran at 1.3-2x its speed."""
    kind = column.type
    if _utf8_valid is None or not len(column) or column.null_count:
        return False
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return False
    _, offsets, data = column.buffers()
    if offsets is None:
        return False
    wide = pa.types.is_large_string(kind)
    return bool(_utf8_valid(offsets, b"" if data is None else data, column.offset, len(column), wide))


def check_utf8(batch: pa.RecordBatch, where: str) -> pa.RecordBatch:
    """``batch``, once its string values are known to be valid UTF-8 (readers of stored Arrow data do not
    check them).

    ``where`` names the shard (and row group) in the FormatError, which also names the field.
    """
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if not _has_text(field.type) or texts_valid(column):
            continue
        try:
            column.validate(full=True)
        except pa.ArrowException as exc:
            raise FormatError(f'{where} field "{field.name}": {describe_exception(exc)}') from None
    return batch


def checked_ahead(items: Iterator[T], check: Callable[[T], U], *, ahead: int = 1) -> Iterator[U]:
    """``check(item)`` of each of ``items``, in order, each run on a helper thread while the next items are
    produced: a decoder's next batch and the check of the one before overlap (both release the GIL).

    Up to ``ahead`` checks run at once, on as many threads (``ahead > 1`` where the checks are the heavy
    part, such as decoding independent pieces of one file). Nothing is yielded before its check passed. An
    item's failure is raised where a reader would have met it: after every item before it was yielded (a
    failure to produce the next item waits for the checks of the ones before, and for their yields). In a
    forked child, where the parent's helper threads do not run, checks run in the caller's thread.
    """
    pid = os.getpid()
    pending: deque[tuple[T, Future[U]]] = deque()

    def result(entry: tuple[T, Future[U]]) -> U:
        return entry[1].result() if os.getpid() == pid else check(entry[0])

    pool = ThreadPoolExecutor(max_workers=max(ahead, 1), thread_name_prefix="dsm-check")
    finished = False
    try:
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except BaseException:
                while pending:
                    yield result(pending.popleft())
                raise
            if os.getpid() != pid:
                while pending:
                    yield result(pending.popleft())
                yield check(item)
                continue
            future = pool.submit(check, item)
            if len(pending) >= max(ahead, 1):
                yield result(pending.popleft())
            pending.append((item, future))
        while pending:
            yield result(pending.popleft())
        finished = True
    finally:
        # Closed early (its reader stopped, or the garbage collector closed a dropped generator), the
        # checks in hand are abandoned, not waited for: the collector runs wherever an allocation
        # triggers it, in any thread, even inside threading's own bookkeeping while it holds the lock
        # that joining a thread takes, and a wait there deadlocks the process. Each helper ends by itself
        # after the check it is running.
        pool.shutdown(wait=finished, cancel_futures=True)


def check_valid(batch: pa.RecordBatch, where: str) -> None:
    """Full validation of every column (offsets in bounds and increasing, UTF-8, dictionary indices):
    a batch decoded from untrusted IPC bytes is only a view of them. FormatError names the field."""
    for field, column in zip(batch.schema, batch.columns, strict=True):
        try:
            column.validate(full=True)
        except pa.ArrowException as exc:
            raise FormatError(f'{where} field "{field.name}": {describe_exception(exc)}') from None


def _read_as(column: pa.Array, field: pa.Field, shard: str) -> pa.Array:
    """A stored column as ``field``'s type: Arrow's safe cast, else (no cast kernel: values into a
    dictionary, views) the formats' exact conversions; SchemaError when neither gets there exactly."""
    from dsm.formats._storage import convert_array

    try:
        try:
            return column.cast(field.type, safe=True)
        except pa.ArrowNotImplementedError:
            return convert_array(column, field.type)
    except (SchemaError, pa.ArrowException, ValueError) as exc:
        problem = describe_exception(exc)
    raise SchemaError(
        f'shard {shard} field "{field.name}": stored as {column.type}, cannot be read as {field.type} '
        f"({problem})"
    )


def conform_batch(batch: pa.RecordBatch, target: pa.Schema, *, shard: str) -> pa.RecordBatch:
    """``batch`` with exactly the ``target`` schema: columns selected by name and cast safely.

    A stored type that cannot be cast without loss, or a null that no parent hides in a field the
    schema declares non-nullable (at any depth: an Arrow IPC file can hold one), is a SchemaError naming
    the shard and the field. Slots a null parent hides come out filled
    (:func:`dsm.arrow_types.masked_nulls_filled`).
    """
    if not batch.schema.equals(target, check_metadata=True):
        missing = [f.name for f in target if batch.schema.get_field_index(f.name) < 0]
        if missing:
            has = ", ".join(batch.schema.names)
            raise SchemaError(f'shard {shard}: no field "{missing[0]}" in the data (it has: {has})')
        arrays = []
        for field in target:
            column = batch.column(field.name)
            if not column.type.equals(field.type):
                column = _read_as(column, field, shard)
            if not field.nullable and column.null_count:
                raise SchemaError(
                    f'shard {shard} field "{field.name}": {column.null_count} null value(s) in a field the '
                    "schema declares not nullable"
                )
            arrays.append(column)
        batch = pa.RecordBatch.from_arrays(arrays, schema=target)
    try:
        return masked_nulls_filled(batch)
    except SchemaError as exc:
        raise SchemaError(f"shard {shard} {exc}") from None


def encode_dictionary(values: pa.Array, target: pa.DataType) -> pa.DictionaryArray:
    """``values`` (of ``target``'s value type) dictionary-encoded with ``target``'s index type; an index
    type too narrow for the distinct values is an ArrowInvalid from the safe cast."""
    encoded = values.dictionary_encode()
    indices = encoded.indices.cast(target.index_type, safe=True)
    return pa.DictionaryArray.from_arrays(indices, encoded.dictionary, ordered=target.ordered)


def slice_batches(batch: pa.RecordBatch, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """``batch`` cut into zero-copy slices of at most ``batch_rows`` rows (an empty batch is kept)."""
    if batch.num_rows <= batch_rows:
        yield batch
        return
    for start in range(0, batch.num_rows, batch_rows):
        yield batch.slice(start, batch_rows)


def b64encode_array(array: pa.Array) -> pa.Array:
    """Standard base64 (with padding) of each binary value, as a string array; nulls stay null."""
    values = [
        None if v is None else binascii.b2a_base64(v, newline=False).decode("ascii")
        for v in array.to_pylist()
    ]
    return pa.array(values, type=pa.large_string() if pa.types.is_large_binary(array.type) else pa.string())


class RowProblem(Exception):
    """A value that does not decode, at 0-based ``row`` of an array; callers turn it into a FormatError."""

    def __init__(self, row: int, message: str) -> None:
        super().__init__(message)
        self.row = row
        self.message = message


def b64decode_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Decode a string array of base64 values into ``target`` (a binary type); raises RowProblem."""
    decoded: list[bytes | None] = []
    for row, value in enumerate(array.to_pylist()):
        if value is None:
            decoded.append(None)
            continue
        try:
            decoded.append(binascii.a2b_base64(value, strict_mode=True))
        except (binascii.Error, ValueError) as exc:
            raise RowProblem(row, f"not valid base64 ({exc})") from None
        if pa.types.is_fixed_size_binary(target) and len(decoded[-1] or b"") != target.byte_width:
            raise RowProblem(row, f"expected {target.byte_width} bytes, got {len(decoded[-1] or b'')}")
    return pa.array(decoded, type=target)
