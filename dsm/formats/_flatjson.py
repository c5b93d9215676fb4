"""The compiled kernel of JSON lines (``dsm.formats._jsonkernel``, C), private to the JSONL format.

Reading: rows of numbers, booleans, strings and timestamps are most of what JSONL holds, and pyarrow's
JSON parser spends about 15 ns a byte on them (two passes: tokens into strings, strings into values).
:class:`FlatScanner` reads such lines in one pass straight into Arrow buffers, with the GIL released. It
accepts a strict subset of JSON and says None for a chunk with any line outside it; the JSONL reader then
parses that chunk with pyarrow as before, so what a file means is decided by the same rules either way
(the tests compare the two on generated lines).

Writing: :func:`join_lines` copies the texts of a batch's columns and the constants between them into one
buffer of lines, row by row (Arrow's element-wise join of the same parts costs about 50 ns a part), and
escapes a text column without nulls as it copies it; :func:`escaped_texts` escapes the texts of other
string arrays in one pass, after one pass found what escaping them adds (:func:`escape_growth`). Arrow's
replacements, one pass for each kind of escape present at about 4 ns a byte, made text with newlines and
quotes ten times slower to write than text without. :func:`float_texts` writes float columns' JSON texts,
byte for byte Arrow's cast's but for negative zero, in a third of its time (Arrow's shortest-digits
formatting was about a third of a Parquet -> JSONL job on numeric columns); :func:`int_texts` writes integer
columns' texts, Arrow's cast's byte for byte, without the cast's string builder.

``DSM_JSON_KERNEL=python`` turns the kernel off; where it is not built, it is off.

>>> import pyarrow as pa
>>> scanner = FlatScanner.of(pa.schema([("id", pa.int64()), ("name", pa.string())]))
>>> rows = b'{"id":1,"name":"a"}\\n{"id":2}\\n'
>>> scanner is None or scanner.scan(rows).to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
True
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsm.formats._common import texts_valid
from dsm.formats._lines import count_newlines

__all__ = [
    "ENV_VAR",
    "Escaped",
    "FlatScanner",
    "escape_growth",
    "escaped_texts",
    "float_texts",
    "int_texts",
    "join_lines",
    "kernel_joins",
    "value_bytes",
]

ENV_VAR = "DSM_JSON_KERNEL"

_INTEGERS = {
    pa.int8(): ("I8", np.int8),
    pa.int16(): ("I16", np.int16),
    pa.int32(): ("I32", np.int32),
    pa.int64(): ("I64", np.int64),
    pa.uint8(): ("U8", np.uint8),
    pa.uint16(): ("U16", np.uint16),
    pa.uint32(): ("U32", np.uint32),
    pa.uint64(): ("U64", np.uint64),
    pa.float32(): ("F32", np.float32),
    pa.float64(): ("F64", np.float64),
}
_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


@lru_cache(maxsize=1)
def _kernel() -> ModuleType | None:
    try:
        from dsm.formats import _jsonkernel  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _jsonkernel


def _enabled() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() != "python" and _kernel() is not None


def escape_growth(data: np.ndarray) -> int | None:
    """How many bytes escaping ``data`` for a JSON string adds (0: nothing to escape), in one pass; None
    where the kernel is off."""
    kernel = _kernel()
    if kernel is None or not _enabled():
        return None
    return int(kernel.escapes(data))


def value_bytes(text: pa.Array) -> np.ndarray:
    """The bytes of a string array's values, from its first value's to its last's, as one uint8 view (no
    copy)."""
    _, offsets, data = text.buffers()
    if len(text) == 0 or data is None:
        return np.empty(0, dtype=np.uint8)
    bounds = np.frombuffer(offsets, np.int64 if pa.types.is_large_string(text.type) else np.int32)
    start, end = int(bounds[text.offset]), int(bounds[text.offset + len(text)])
    return np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)


def escaped_texts(text: pa.Array) -> pa.Array | None:
    """The JSON-escaped values of a large_string array (its nulls kept): ``text`` itself where one pass
    finds nothing to escape, else written by the kernel in one more pass; None where the kernel is off."""
    kernel = _kernel()
    if kernel is None or not _enabled():
        return None
    raw = value_bytes(text)
    growth = int(kernel.escapes(raw))
    if not growth:
        return text
    rows = len(text)
    _, offsets, data = text.buffers()
    ends = _pool_bytes((rows + 1) * 8)
    out = _pool_bytes(len(raw) + growth)
    used = kernel.escape(offsets, data, text.offset, rows, True, ends, out)
    if used != len(raw) + growth:
        raise ValueError(f"the escaped texts took {used} bytes where {len(raw) + growth} were counted")
    validity = None
    if text.null_count:
        validity = text.buffers()[0] if text.offset == 0 else text.is_valid().buffers()[1]
    return pa.Array.from_buffers(pa.large_string(), rows, [validity, ends, out], null_count=text.null_count)


@dataclass(frozen=True)
class Escaped:
    """A string array without nulls that :func:`join_lines` writes escaped, as JSON string bodies."""

    text: pa.Array


def kernel_joins() -> bool:
    """Whether :func:`join_lines` joins (the kernel is built and on)."""
    return _enabled()


def join_lines(parts: list[pa.Array | pa.Scalar | Escaped], rows: int) -> pa.Buffer | None:
    """Row by row, each part in turn: a string scalar, or the row's value of a string array without nulls
    (of an :class:`Escaped` one, escaped); None where the kernel is off (the caller joins with Arrow).

    Escapes are written as the texts are copied, into room for an eighth more than the escaped texts' bytes;
    only where they add more than that (text of mostly quotes or control characters) are they counted and
    the lines joined again into what they need."""
    kernel = _kernel()
    if kernel is None or not _enabled():
        return None
    specs: list[bytes | tuple[pa.Buffer, pa.Buffer | bytes, int, bool, bool]] = []
    escaped: list[np.ndarray] = []
    total = 0
    for part in parts:
        if isinstance(part, pa.Scalar):
            constant = part.as_py().encode("utf-8")
            specs.append(constant)
            total += len(constant) * rows
            continue
        array = part.text if isinstance(part, Escaped) else part
        if array.null_count or len(array) != rows:
            return None  # not what the writer joins: Arrow's join decides
        _, offsets, data = array.buffers()
        raw = value_bytes(array)
        if isinstance(part, Escaped):
            escaped.append(raw)
        wide = pa.types.is_large_string(array.type)
        specs.append((offsets, b"" if data is None else data, array.offset, wide, isinstance(part, Escaped)))
        total += len(raw)
    room = total + sum(len(text) for text in escaped) // 8 + (64 if escaped else 0)
    out = _pool_bytes(room)
    used = kernel.join(tuple(specs), rows, out)
    if used < 0:
        room = total + sum(escape_growth(text) or 0 for text in escaped)
        out = _pool_bytes(room)
        used = kernel.join(tuple(specs), rows, out)
    if used < total or (not escaped and used != total):
        raise ValueError(f"the joined lines took {used} bytes, where their texts hold {total}")
    return out if used == room else out.slice(0, used)


def int_texts(array: pa.Array) -> pa.Array | None:
    """The texts Arrow's cast to string gives the values of an integer array (a null slot null), written
    by the kernel (two digits a step, no builder); None where the kernel is off (the caller casts)."""
    kernel = _kernel()
    if kernel is None or not _enabled() or not pa.types.is_integer(array.type):
        return None
    signed = pa.types.is_signed_integer(array.type)
    return _number_texts(array, kernel.INT_TEXT_MAX, kernel.int_texts, signed)


def float_texts(array: pa.Array) -> pa.Array | None:
    """The JSON texts of the values of a float32 or float64 array (a null slot null): the texts Arrow's cast
    to string gives, but ``-0.0`` for negative zero (Arrow's ``-0`` reads back as the integer 0 in many
    JSON readers). Written by the kernel for arrays whose values are all finite and in positional notation,
    where it takes a third of the cast's time (the shortest digits that read back, found from the power of
    ten up: see the kernel's ``float_text``); None where the kernel is off or a value is outside what it
    writes (the caller casts)."""
    kernel = _kernel()
    wide = array.type.bit_width if pa.types.is_floating(array.type) else 0
    if kernel is None or not _enabled() or wide not in (32, 64):  # float16 included: its texts are the cast's
        return None
    return _number_texts(array, kernel.FLOAT_TEXT_MAX, kernel.float_texts)


def _number_texts(array: pa.Array, most: int, write: Callable[..., int], *options: object) -> pa.Array | None:
    """The texts the kernel's ``write`` (with ``options`` after its buffers) gives the slots of ``array``,
    at most ``most`` bytes each, as a large_string array, null where ``array`` is; None where ``write``
    leaves the array to the caller."""
    count = len(array)
    validity, values = array.buffers()[:2]
    offsets = _pool_bytes((count + 1) * 8)
    data = _pool_bytes(count * most, resizable=True)
    used = write(
        b"" if values is None else values,
        validity if array.null_count else None,
        array.offset,
        count,
        array.type.bit_width // 8,
        offsets,
        data,
        *options,
    )
    if used < 0:
        return None
    data.resize(used, shrink_to_fit=False)  # not moved to a smaller allocation: a copy of every text
    texts = pa.Array.from_buffers(pa.large_string(), count, [None, offsets, data])
    if array.null_count:
        return pc.if_else(array.is_valid(), texts, pa.scalar(None, pa.large_string()))
    return texts


def _pool_bytes(size: int, *, zeroed: bool = False, resizable: bool = False) -> pa.Buffer:
    """``size`` writable bytes from Arrow's memory pool, for the kernel to fill: the pool keeps what it
    frees for the next chunk's buffers, where NumPy's arrays of a chunk's size came from fresh pages that
    the operating system zeroed on first touch (8% of a JSONL -> Parquet job's CPU)."""
    buffer = pa.allocate_buffer(size, resizable=resizable)
    if zeroed:
        np.frombuffer(buffer, np.uint8)[:] = 0
    return buffer


@dataclass(frozen=True)
class _Column:
    """How one field is scanned: the kernel's kind code, the timestamp unit code and the values' dtype."""

    field: pa.Field
    kind: int
    unit: int
    dtype: Any  # a NumPy dtype; None for booleans (a bitmap) and strings (offsets and bytes)


class FlatScanner:
    """Scans chunks of whole lines under one schema of top-level scalar fields into tables of that schema."""

    def __init__(self, kernel: ModuleType, columns: list[_Column]) -> None:
        self._kernel = kernel
        self._columns = columns
        self._schema = pa.schema([c.field for c in columns])
        self._kinds = bytes(c.kind for c in columns)
        self._names = tuple(c.field.name.encode("utf-8") for c in columns)
        self._units = tuple(c.unit for c in columns)

    @classmethod
    def of(cls, schema: pa.Schema) -> FlatScanner | None:
        """The scanner of ``schema`` (field types as pyarrow's parser is asked for them), or None where the
        kernel is not built, is turned off, or a field's type is not one it reads."""
        kernel = _kernel()
        if kernel is None or not _enabled() or len(set(schema.names)) != len(schema.names):
            return None
        columns = []
        for field in schema:
            column = _column(kernel, field)
            if column is None:
                return None
            columns.append(column)
        return cls(kernel, columns)

    def scan(self, chunk: bytes, *, newlines: int | None = None) -> pa.Table | None:
        """The chunk's rows, validated (texts as UTF-8), or None where any line is not in the scanner's
        subset, a text is not UTF-8 (or it is turned off). ``newlines``: the chunk's newline bytes, where
        the caller counted them."""
        if not _enabled() or len(chunk) >= 1 << 31:
            return None
        if newlines is None:
            newlines = count_newlines(chunk)
        rows = newlines + (0 if chunk.endswith(b"\n") else 1)
        bitmap = (rows + 7) // 8
        outputs = []
        for column in self._columns:
            if column.dtype is None and column.kind == self._kernel.BOOL:
                values, data = _pool_bytes(bitmap, zeroed=True), None
            elif column.dtype is None:
                wide = column.kind == self._kernel.STR64
                values = _pool_bytes((rows + 1) * (8 if wide else 4))
                data = _pool_bytes(len(chunk), resizable=True)  # at most the chunk's bytes
            else:
                values, data = _pool_bytes(rows * np.dtype(column.dtype).itemsize), None
            outputs.append((values, _pool_bytes(bitmap, zeroed=True), data))
        found = self._kernel.scan(chunk, self._kinds, self._names, self._units, tuple(outputs), rows)
        if found is None:
            return None
        arrays = []
        for column, (values, validity, data), (used, nulls, ascii) in zip(
            self._columns, outputs, found, strict=True
        ):
            buffers = [validity if nulls else None, values]
            if data is not None:
                data.resize(used)
                buffers.append(data)
            array = pa.Array.from_buffers(column.field.type, rows, buffers, null_count=nulls)
            try:
                # In full (null counts, offsets, UTF-8), but for texts the kernel found all ASCII (their
                # offsets only grow as the kernel writes them, and ASCII is UTF-8) or that the shared UTF-8
                # check passes (texts without nulls).
                full = data is None or not (ascii or texts_valid(array))
                array.validate(full=full)
            except pa.ArrowInvalid:
                return None
            arrays.append(array)
        return pa.Table.from_arrays(arrays, schema=self._schema)


def _column(kernel: ModuleType, field: pa.Field) -> _Column | None:
    type_ = field.type
    if type_ in _INTEGERS:
        code, dtype = _INTEGERS[type_]
        return _Column(field, getattr(kernel, code), 0, dtype)
    if pa.types.is_boolean(type_):
        return _Column(field, kernel.BOOL, 0, None)
    if pa.types.is_string(type_):
        return _Column(field, kernel.STR32, 0, None)
    if pa.types.is_large_string(type_):
        return _Column(field, kernel.STR64, 0, None)
    if pa.types.is_timestamp(type_):
        zoned = kernel.TS_ZONED if type_.tz is not None else 0
        return _Column(field, kernel.TS, _UNIT_DIGITS[type_.unit] | zoned, np.int64)
    return None
