"""JSON Lines: one JSON object per line, parsed with the contract's schema, never by guessing types.

Reading goes block by block (about 16 MiB of whole lines): blocks of flat rows through dsm's compiled scanner
(:mod:`dsm.formats._flatjson`) where it accepts every line, else through pyarrow's C++ JSON parser with an
explicit schema; only types that parser cannot read exactly (maps, base64 inside nested values), and any
block it rejects, are parsed by a Python reader that also finds the 1-based line and the field at fault.

It is longer than dsm's other modules (about 800 lines) because the fast path, the exact Python reader
that names the line and field at fault, the seekable reading from a byte offset, the row index for random
access and the writer share one set of encoding rules, which stay in one place.

>>> from dsm.formats.jsonl import JsonlFormat
>>> JsonlFormat(compression="gzip").options()
{'compression': 'gzip'}
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, ClassVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from dsm.arrow_types import whole
from dsm.errors import FormatError, SchemaError
from dsm.formats._common import (
    PositionTrackingSink,
    RowProblem,
    b64decode_array,
    check_batch_schema,
    check_stream_codec,
    describe_exception,
    encode_dictionary,
    is_binary_like,
    is_codec_error,
    is_string_like,
    open_input_stream,
    open_output_stream,
    project_schema,
    read_span,
)
from dsm.formats._flatjson import FlatScanner
from dsm.formats._jsontext import encode_lines_bytes, json_stored_type, unsupported_json_type
from dsm.formats._lines import LineIndexBuilder, count_newlines, read_room, row_starts
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter, SeekPoint
from dsm.formats.index import ShardIndex

__all__ = ["JsonlFormat"]

_CHUNK_BYTES = 16 * 1024 * 1024
_ALLOCATION_STEP = 1024 * 1024
_INFER_BYTES = 1024 * 1024
_PARSE_BLOCK_BYTES = 1024 * 1024
_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_MAX_LINE_BYTES = 1 << 30
_MAX_NESTING = 256
"""Deepest nesting of a line: far beyond any contract type (``MAX_TYPE_DEPTH``), far below the ~10,000
levels at which pyarrow's recursive JSON parser overflows the stack and kills the process."""
_STRING_LITERAL = re.compile(rb'"(?:[^"\\]|\\.)*"')


# ---------------------------------------------------------------------------------------------- chunks


_Chunk = tuple[int, bytes, int]
"""A run of whole lines: its first line's number, its bytes, and how many newline bytes they hold."""


def _iter_chunks(stream: Any, chunk_bytes: int = _CHUNK_BYTES) -> Iterator[_Chunk]:
    """``(first line number, bytes, newlines in them)`` for runs of whole lines of about ``chunk_bytes``:
    the newlines are counted once, for the line numbers and for the parser, which sizes its columns by them.

    Each chunk is a fresh ``bytearray`` (it has every method of ``bytes`` the readers use) that the file
    is read straight into, after the partial line the previous read left: the only copy is that partial
    line, never the whole chunk.
    """
    readinto = getattr(stream, "readinto", None)
    pending = b""
    line = 1
    while True:
        if readinto is None:
            data = bytearray(pending)
            data += stream.read(chunk_bytes)
        else:
            # One size for (almost) every chunk, so that the allocator reuses the memory it just freed
            # instead of mapping fresh pages for each chunk (a size that varies by the partial line does).
            room = chunk_bytes + -(-len(pending) // _ALLOCATION_STEP) * _ALLOCATION_STEP
            data = read_room(room)
            data[: len(pending)] = pending
            got = readinto(memoryview(data)[len(pending) :])
            del data[len(pending) + (got or 0) :]
        if len(data) == len(pending):  # end of the stream
            if pending:
                yield line, cast(bytes, data), count_newlines(data)
            return
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            pending = bytes(data)  # the read so far, pending included
            if len(pending) > _MAX_LINE_BYTES:
                raise FormatError(f"line {line}: longer than {_MAX_LINE_BYTES >> 30} GiB without a newline")
            continue
        pending = bytes(memoryview(data)[cut:])
        del data[cut:]
        newlines = count_newlines(data)
        yield line, cast(bytes, data), newlines  # a bytearray: the readers use only what it shares with bytes
        line += newlines


def _depth(line: bytes) -> int:
    """How deep the arrays and objects of one line nest (brackets inside strings do not count)."""
    bare = np.frombuffer(_STRING_LITERAL.sub(b"", line), dtype=np.uint8)
    steps = (bare == 0x5B).astype(np.int32) + (bare == 0x7B) - (bare == 0x5D) - (bare == 0x7D)
    return int(np.cumsum(steps).max()) if len(steps) else 0


def _check_nesting(chunk: bytes, first_line: int, shard: str) -> None:
    """Refuse a line nesting deeper than ``_MAX_NESTING`` before any parser sees it.

    A line nests no deeper than it has opening brackets: the brackets of every line are counted at once
    (from the positions of the chunk's brackets), and only a line with more than the limit is looked at
    closely.
    """
    data = np.frombuffer(chunk, dtype=np.uint8)
    opens = np.flatnonzero((data | 0x20) == 0x7B)  # "[" (0x5B) and "{" (0x7B), and no other byte
    if len(opens) <= _MAX_NESTING:
        return
    ends = np.flatnonzero(data == 0x0A)
    if not len(ends) or ends[-1] != len(chunk) - 1:
        ends = np.append(ends, len(chunk))
    starts = np.concatenate(([0], ends[:-1] + 1))
    brackets = np.searchsorted(opens, ends) - np.searchsorted(opens, starts)
    for index in np.flatnonzero(brackets > _MAX_NESTING).tolist():
        start, end = int(starts[index]), int(ends[index])
        if _depth(chunk[start:end]) > _MAX_NESTING:
            raise FormatError(
                f"shard {shard} line {first_line + index}: values nest deeper than {_MAX_NESTING} levels"
            )


def _head(chunk: bytes, size: int) -> bytes:
    """The whole lines of ``chunk`` that start within its first ``size`` bytes."""
    if len(chunk) <= size:
        return chunk
    end = chunk.find(b"\n", size)
    return chunk if end < 0 else chunk[: end + 1]


# ---------------------------------------------------------------------------------------------- errors


def _at(shard: str, line: int, field: str | None = None) -> str:
    where = f"shard {shard} line {line}"
    return f'{where} field "{field}"' if field else where


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


class _BadValue(Exception):
    """A JSON value that does not fit its type; ``path`` grows as it propagates out of nested values."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.path = path


class _NegativeZero(int):
    """The JSON integer ``-0``: 0 for integer fields, -0.0 for float fields (as pyarrow's parser reads it)."""


def _parse_int(text: str) -> int:
    return _NegativeZero(0) if text == "-0" else int(text)


# Bare NaN / Infinity / -Infinity tokens are accepted for float fields, as pyarrow's parser accepts them.
_DECODER = json.JSONDecoder(parse_int=_parse_int)


# ---------------------------------------------------------------------------------------------- types


def _native_type(type_: pa.DataType) -> pa.DataType | None:
    """What to ask pyarrow's JSON parser for so that a cast gives ``type_`` exactly; None if it cannot."""
    if (
        pa.types.is_null(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_string(type_)
        or pa.types.is_timestamp(type_)
        or pa.types.is_decimal(type_)
    ):
        return type_
    if pa.types.is_large_string(type_) or pa.types.is_date(type_):
        return pa.string()
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        child = _native_type(type_.value_type)
        return None if child is None else pa.list_(pa.field(type_.value_field.name, child))
    if pa.types.is_struct(type_):
        fields = []
        for index in range(type_.num_fields):
            field = type_.field(index)
            child = _native_type(field.type)
            if child is None:
                return None
            fields.append(pa.field(field.name, child))
        return pa.struct(fields)
    return None


def _native_field_type(type_: pa.DataType) -> pa.DataType | None:
    """Like ``_native_type``, plus what only a top-level column can do: base64 binary and dictionaries."""
    if is_binary_like(type_):
        return pa.string()
    if pa.types.is_dictionary(type_):
        return _native_type(type_.value_type)
    return _native_type(type_)


def _wire_type(type_: pa.DataType) -> pa.DataType:
    """The type of the Python values the fallback reader builds; a cast turns it into ``type_``."""
    if pa.types.is_date(type_) or pa.types.is_timestamp(type_) or pa.types.is_decimal(type_):
        return pa.string()
    if pa.types.is_dictionary(type_):
        return _wire_type(type_.value_type)
    if pa.types.is_list(type_):
        return pa.list_(pa.field(type_.value_field.name, _wire_type(type_.value_type)))
    if pa.types.is_large_list(type_):
        return pa.large_list(pa.field(type_.value_field.name, _wire_type(type_.value_type)))
    if pa.types.is_fixed_size_list(type_):
        return pa.list_(pa.field(type_.value_field.name, _wire_type(type_.value_type)))
    if pa.types.is_struct(type_):
        return pa.struct([pa.field(f.name, _wire_type(f.type)) for f in type_])
    if pa.types.is_map(type_):
        return pa.map_(_wire_type(type_.key_type), _wire_type(type_.item_type))
    return type_


# ------------------------------------------------------------------------------- python value converters

_Converter = Callable[[Any], Any]


def _converter(type_: pa.DataType) -> _Converter:
    """A function from a decoded JSON value (not None) to a Python value of ``_wire_type(type_)``."""
    if pa.types.is_dictionary(type_):
        return _converter(type_.value_type)
    for test, make in _CONVERTERS:
        if test(type_):
            return make(type_)
    raise SchemaError(unsupported_json_type(type_) or f"type {type_} has no JSON encoding in dsm")


def _expect(type_: pa.DataType, value: Any) -> _BadValue:
    return _BadValue(f"expected {type_}, got {_show(value)}")


def _null_converter(type_: pa.DataType) -> _Converter:
    def convert(value: Any) -> Any:
        raise _expect(type_, value)

    return convert


def _bool_converter(type_: pa.DataType) -> _Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, bool):
            return value
        raise _expect(type_, value)

    return convert


def _int_converter(type_: pa.DataType) -> _Converter:
    bits = type_.bit_width
    low, high = (
        (0, 2**bits - 1) if pa.types.is_unsigned_integer(type_) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    )

    def convert(value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if low <= value <= high:
                return value
            raise _BadValue(f"{value} is out of range for {type_}")
        raise _expect(type_, value)

    return convert


def _float_converter(type_: pa.DataType) -> _Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, float):
            return value
        if isinstance(value, _NegativeZero):
            return -0.0
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:
                raise _BadValue(f"{value} is out of range for {type_}") from None
        if isinstance(value, str) and value in _NON_FINITE:
            return _NON_FINITE[value]
        raise _expect(type_, value)

    return convert


def _string_converter(type_: pa.DataType) -> _Converter:
    def convert(value: Any) -> Any:
        if isinstance(value, str):
            return value
        raise _expect(type_, value)

    return convert


def _binary_converter(type_: pa.DataType) -> _Converter:
    width = type_.byte_width if pa.types.is_fixed_size_binary(type_) else None

    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            raise _BadValue(f"expected {type_} as a base64 string, got {_show(value)}")
        try:
            data = binascii.a2b_base64(value, strict_mode=True)
        except (binascii.Error, ValueError) as exc:
            raise _BadValue(f"not valid base64 ({exc})") from None
        if width is not None and len(data) != width:
            raise _BadValue(f"expected {width} bytes, got {len(data)}")
        return data

    return convert


def _text_converter(type_: pa.DataType) -> _Converter:
    """Dates, timestamps and decimals: kept as text here and parsed by an Arrow cast."""

    def convert(value: Any) -> Any:
        if isinstance(value, str):
            return value
        if pa.types.is_decimal(type_) and isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise _expect(type_, value)

    return convert


def _list_converter(type_: pa.DataType) -> _Converter:
    item = _converter(type_.value_type)
    item_nullable = type_.value_field.nullable
    size = type_.list_size if pa.types.is_fixed_size_list(type_) else None

    def convert(value: Any) -> Any:
        if not isinstance(value, list):
            raise _expect(type_, value)
        if size is not None and len(value) != size:
            raise _BadValue(f"expected {size} items, got {len(value)}")
        out = []
        for index, element in enumerate(value):
            try:
                out.append(_convert_nullable(item, element, item_nullable))
            except _BadValue as bad:
                bad.path = f"[{index}]{bad.path}"
                raise
        return out

    return convert


def _struct_converter(type_: pa.DataType) -> _Converter:
    children = [(f.name, _converter(f.type), f.nullable) for f in type_]
    names = {f.name for f in type_}

    def convert(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _expect(type_, value)
        for key in value:
            if key not in names:
                raise _BadValue(f'unexpected field "{key}"')
        out = {}
        for name, child, nullable in children:
            try:
                out[name] = _convert_nullable(child, value.get(name), nullable)
            except _BadValue as bad:
                bad.path = f".{name}{bad.path}"
                raise
        return out

    return convert


def _map_converter(type_: pa.DataType) -> _Converter:
    key = _converter(type_.key_type)
    item = _converter(type_.item_type)
    item_nullable = type_.item_field.nullable

    def convert(value: Any) -> Any:
        if not isinstance(value, list):
            raise _BadValue(f"expected {type_} as an array of [key, value] pairs, got {_show(value)}")
        out = []
        for index, entry in enumerate(value):
            try:
                if not isinstance(entry, list) or len(entry) != 2:
                    raise _BadValue(f"expected a [key, value] pair, got {_show(entry)}")
                out.append(
                    (
                        _convert_nullable(key, entry[0], False),
                        _convert_nullable(item, entry[1], item_nullable),
                    )
                )
            except _BadValue as bad:
                bad.path = f"[{index}]{bad.path}"
                raise
        return out

    return convert


_CONVERTERS: list[tuple[Callable[[pa.DataType], bool], Callable[[pa.DataType], _Converter]]] = [
    (pa.types.is_null, _null_converter),
    (pa.types.is_boolean, _bool_converter),
    (pa.types.is_integer, _int_converter),
    (pa.types.is_floating, _float_converter),
    (is_string_like, _string_converter),
    (is_binary_like, _binary_converter),
    (lambda t: pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_decimal(t), _text_converter),
    (
        lambda t: pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t),
        _list_converter,
    ),
    (pa.types.is_struct, _struct_converter),
    (pa.types.is_map, _map_converter),
]


def _convert_nullable(convert: _Converter, value: Any, nullable: bool) -> Any:
    if value is None:
        if not nullable:
            raise _BadValue("null in a field that is not nullable")
        return None
    return convert(value)


def _nulls_inside(child: pa.Array, parent: pa.Array) -> bool:
    """Whether ``child`` (a struct's field, nulls of the struct merged in) is null where ``parent`` is not."""
    if not child.null_count:
        return False
    return bool(pc.any(pc.and_(child.is_null(), parent.is_valid())).as_py())


def _cast_to(array: pa.Array, target: pa.DataType) -> pa.Array:
    """The parsed ``array`` as ``target``: nested values cast field by field, children of null structs
    made null first (so their placeholders are never parsed), dictionaries encoded, and a null where a
    nested field is not nullable refused (ValueError; the line-by-line reader then names the line).

    A null struct's non-nullable fields hold nulls: Arrow allows it (the struct's null covers them).
    """
    source = array.type
    if pa.types.is_dictionary(target):
        return encode_dictionary(_cast_to(array, target.value_type), target)
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        children = []
        for child, field in zip(array.flatten(), target, strict=True):
            child = _cast_to(child, field.type)
            if not field.nullable and _nulls_inside(child, array):
                raise ValueError(f'a null in the non-nullable field "{field.name}"')
            children.append(child)
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    listy = pa.types.is_list(target) or pa.types.is_large_list(target) or pa.types.is_fixed_size_list(target)
    if listy and (pa.types.is_list(source) or pa.types.is_large_list(source)):
        offsets = pc.subtract(array.offsets, array.offsets[0])
        start = array.offsets[0].as_py()
        values = array.values.slice(start, array.offsets[-1].as_py() - start)
        values = _cast_to(values, target.value_type)
        if not target.value_field.nullable and values.null_count:
            raise ValueError("a null item in a list whose items are not nullable")
        mask = array.is_null() if array.null_count else None
        if pa.types.is_fixed_size_list(target):
            return _fixed_size(array, offsets, values, target, mask)
        return _list_class(target).from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_map(source) and pa.types.is_map(target):
        offsets = pc.subtract(array.offsets, array.offsets[0])
        start = array.offsets[0].as_py()
        entries = array.values.slice(start, array.offsets[-1].as_py() - start)
        keys = _cast_to(entries.field(0), target.key_type)
        items = _cast_to(entries.field(1), target.item_type)
        if not target.item_field.nullable and items.null_count:
            raise ValueError("a null value in a map whose values are not nullable")
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    if source.equals(target):
        return array
    return array.cast(target, safe=True)


def _fixed_size(
    array: pa.Array, offsets: pa.Array, values: pa.Array, target: pa.DataType, mask: pa.Array | None
) -> pa.Array:
    """Parsed lists as ``target`` (a fixed-size list): each valid list must have its size; a null one
    gets null placeholders (built by a take, not a cast, which Arrow refuses for non-nullable items)."""
    size = target.list_size
    starts = np.asarray(offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    lengths = np.diff(starts)
    if np.any(valid & (lengths != size)):
        raise ValueError(f"a list whose length is not {size}")
    positions = starts[:-1, None] + np.arange(size, dtype=np.int64)[None, :]
    indices = pa.array(positions.reshape(-1), mask=np.repeat(~valid, size))
    return pa.FixedSizeListArray.from_arrays(values.take(indices), type=target, mask=mask)


def _list_class(kind: pa.DataType) -> type[pa.Array]:
    return pa.LargeListArray if pa.types.is_large_list(kind) else pa.ListArray


# ---------------------------------------------------------------------------------------------- parsing


class _ChunkParser:
    """Parses runs of lines of one shard under one schema into tables of exactly that schema."""

    def __init__(self, schema: pa.Schema, shard: str) -> None:
        self.schema = schema
        self.shard = shard
        # Lines are parsed into the types the file holds (no dictionaries, no views), then cast to ``schema``.
        self._stored = pa.schema([pa.field(f.name, json_stored_type(f.type), f.nullable) for f in schema])
        self._converters = [(f.name, _converter(f.type), f.nullable) for f in self._stored]
        native = [_native_field_type(f.type) for f in self._stored]
        self._native_schema = (
            None
            if any(t is None for t in native)
            else pa.schema([pa.field(f.name, t) for f, t in zip(self._stored, native, strict=True)])
        )
        self._scanner = None if self._native_schema is None else FlatScanner.of(self._native_schema)

    def parse(self, chunk: bytes, first_line: int, *, newlines: int | None = None) -> pa.Table:
        """The rows of ``chunk``, whole lines whose first is line ``first_line``; ``newlines`` is how many
        newline bytes it holds, where the caller counted them already."""
        if not chunk or chunk.isspace():  # as ``not chunk.strip()``, without copying a 16 MiB chunk
            return self.schema.empty_table()
        table = self._scan_flat(chunk, newlines) if self._scanner is not None else None
        if table is None:
            _check_nesting(chunk, first_line, self.shard)
            table = self._parse_native(chunk) if self._native_schema is not None else None
        if table is None:
            table = self._parse_python(chunk, first_line)
        if table.schema.equals(self.schema):
            return table
        columns = [
            _cast_to(whole(column), field.type)
            for column, field in zip(table.columns, self.schema, strict=True)
        ]
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _parse_native(self, chunk: bytes) -> pa.Table | None:
        """The table from pyarrow's parser, or None when it refuses the chunk (the Python path decides)."""
        parse = pj.ParseOptions(explicit_schema=self._native_schema, unexpected_field_behavior="error")
        for block_size in (_PARSE_BLOCK_BYTES, len(chunk) + 1):
            read = pj.ReadOptions(use_threads=True, block_size=max(block_size, 1024))
            try:
                table = pj.read_json(pa.BufferReader(chunk), read_options=read, parse_options=parse)
            except pa.ArrowException as exc:
                if "straddl" in str(exc) and block_size < len(chunk) + 1:
                    continue
                return None
            return self._finished(table)
        return None

    def _scan_flat(self, chunk: bytes, newlines: int | None) -> pa.Table | None:
        """The table from the compiled scanner of flat lines, or None where it leaves the chunk to pyarrow's
        parser (a line outside its subset) or the rows are not valid (pyarrow's parser then decides)."""
        assert self._scanner is not None
        table = self._scanner.scan(chunk, newlines=newlines)
        return None if table is None else self._finished(table, validated=True)

    def _finished(self, table: pa.Table, *, validated: bool = False) -> pa.Table | None:
        try:
            return self._finish_native(table, validated=validated)
        except (RowProblem, pa.ArrowException, ValueError):
            return None

    def _finish_native(self, table: pa.Table, *, validated: bool) -> pa.Table | None:
        """``table`` in the stored types; ``validated``: its arrays were checked (UTF-8 included)."""
        if not validated:
            table.validate(full=True)  # pyarrow's JSON parser does not check that strings are UTF-8
        columns = []
        for field, column in zip(self._stored, table.columns, strict=True):
            array = whole(column)
            if is_binary_like(field.type):
                array = b64decode_array(array, field.type)
            elif not array.type.equals(field.type):
                array = _cast_to(array, field.type)
            if not field.nullable and array.null_count:
                return None
            columns.append(array)
        return pa.Table.from_arrays(columns, schema=self._stored)

    def _parse_python(self, chunk: bytes, first_line: int) -> pa.Table:
        """Parse line by line; raises FormatError naming the first bad line (and field)."""
        values: list[list[Any]] = [[] for _ in self._converters]
        lines: list[int] = []
        names = set(self._stored.names)
        for offset, raw in enumerate(chunk.split(b"\n")):
            if not raw.strip():
                continue
            line = first_line + offset
            record = self._decode_line(raw, line)
            for key in record:
                if key not in names:
                    raise FormatError(f'{_at(self.shard, line)}: unexpected field "{key}"')
            for column, (name, convert, nullable) in zip(values, self._converters, strict=True):
                value = record.get(name)
                if value is None and not nullable:
                    what = "null" if name in record else "missing"
                    raise FormatError(f"{_at(self.shard, line, name)}: {what}, but the field is not nullable")
                try:
                    column.append(None if value is None else convert(value))
                except _BadValue as bad:
                    raise FormatError(f"{_at(self.shard, line, name + bad.path)}: {bad.message}") from None
            lines.append(line)
        arrays = [
            self._build(field, column, lines) for field, column in zip(self._stored, values, strict=True)
        ]
        return pa.Table.from_arrays(arrays, schema=self._stored)

    def _decode_line(self, raw: bytes, line: int) -> dict[str, Any]:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(
                f"{_at(self.shard, line)}: not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        try:
            record = _DECODER.decode(text)
        except json.JSONDecodeError as exc:
            raise FormatError(
                f"{_at(self.shard, line)}: invalid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        except RecursionError:
            raise FormatError(
                f"{_at(self.shard, line)}: values nest too deeply to decode (lists or objects within each "
                "other, hundreds of levels); flatten them"
            ) from None
        except ValueError as exc:
            raise FormatError(f"{_at(self.shard, line)}: invalid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise FormatError(f"{_at(self.shard, line)}: expected a JSON object, got {_kind(record)}")
        return record

    def _build(self, field: pa.Field, values: list[Any], lines: list[int]) -> pa.Array:
        wire = _wire_type(field.type)
        try:
            array = pa.array(values, type=wire)
            return array if wire.equals(field.type) else _cast_to(array, field.type)
        except (pa.ArrowException, ValueError, OverflowError) as exc:
            problem = describe_exception(exc)
        for index, value in enumerate(values):
            if value is None:
                continue
            try:
                pa.array([value], type=wire).cast(field.type, safe=True)
            except (pa.ArrowException, ValueError, OverflowError):
                raise FormatError(
                    f"{_at(self.shard, lines[index], field.name)}: expected {field.type}, got {_show(value)}"
                ) from None
        raise FormatError(f'shard {self.shard} field "{field.name}": {problem}')


# ---------------------------------------------------------------------------------------------- format


class JsonlFormat(Format):
    """JSON Lines (``.jsonl``), optionally compressed as a whole file (gzip, zstd, bz2, lz4).

    Values are encoded as documented in ``docs/formats.md``: binary as base64 strings, non-finite floats as
    the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, timestamps as ISO-8601 strings (UTC with ``Z``
    when the type has a time zone), dates and decimals as strings, maps as arrays of ``[key, value]``.
    Reading with a schema refuses unknown fields; a missing field is null.
    """

    name: ClassVar[str] = "jsonl"
    extensions: ClassVar[tuple[str, ...]] = (".jsonl", ".ndjson", ".jsonl.gz", ".jsonl.zst")
    self_describing: ClassVar[bool] = False
    index_by_scan: ClassVar[bool] = True
    plain_values: ClassVar[bool] = True

    def __init__(self, *, compression: str | None = None) -> None:
        self.compression = check_stream_codec(compression)

    def options(self) -> dict[str, Any]:
        return {"compression": self.compression}

    def stored_type(self, type_: pa.DataType) -> pa.DataType:
        """See :func:`dsm.formats._jsontext.json_stored_type`: dictionaries and views are held as values."""
        return json_stored_type(type_)

    def _chunks(self, file: IO[bytes]) -> Iterator[_Chunk]:
        try:
            yield from _iter_chunks(open_input_stream(file, self.compression))
        except (pa.ArrowException, OSError) as exc:
            if not is_codec_error(exc, self.compression):
                raise
            raise FormatError(
                f"not readable as {self.compression}-compressed data ({describe_exception(exc)})"
            ) from None

    def read_schema(self, file: IO[bytes], *, shard: str) -> pa.Schema:
        """The schema pyarrow infers from the lines in the first ~1 MiB (every field nullable)."""
        for _, chunk, _ in self._named(self._chunks(file), shard):
            if chunk.strip():
                return _infer(_head(chunk, _INFER_BYTES), shard)
        return pa.schema([])

    def _named(self, chunks: Iterator[_Chunk], shard: str) -> Iterator[_Chunk]:
        try:
            yield from chunks
        except FormatError as exc:
            raise FormatError(f"shard {shard}: {exc}") from None

    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Rows parsed with ``schema`` (or the schema inferred from the first lines when it is None)."""
        parser: _ChunkParser | None = None
        if schema is not None:
            project_schema(schema, columns, shard=shard)
            parser = self._parser(schema, shard)
        for first_line, chunk, newlines in self._named(self._chunks(file), shard):
            if parser is None:
                if not chunk or chunk.isspace():
                    continue
                parser = self._parser(_infer(_head(chunk, _INFER_BYTES), shard), shard)
                project_schema(parser.schema, columns, shard=shard)
            table = parser.parse(chunk, first_line, newlines=newlines)
            if columns is not None:
                table = table.select(list(columns))
            yield from table.combine_chunks().to_batches(max_chunksize=batch_rows)

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
        """Rows from ``start_row`` on, each batch with the byte offset and line of the row after it.

        An uncompressed file jumps to ``seek``; lines before ``start_row`` are found by scanning for
        newlines, never parsed. Compressed files give no seek points (their offsets cannot be jumped to).
        """
        if schema is None:
            file.seek(0)
            schema = self.read_schema(file, shard=shard)
            file.seek(0)
        project_schema(schema, columns, shard=shard)
        parser = self._parser(schema, shard)
        row, line, offset = 0, 1, 0
        seekable = self.compression is None and bool(getattr(file, "seekable", lambda: False)())
        if seek is not None and seekable and seek.line is not None and 0 < seek.row <= start_row:
            file.seek(seek.offset)
            row, line, offset = seek.row, seek.line, seek.offset
        for first_line, chunk, newlines in self._named(self._chunks(file), shard):
            chunk_line = line + first_line - 1
            starts, lines = row_starts(chunk)
            if row + len(starts) <= start_row:
                row, offset = row + len(starts), offset + len(chunk)
                continue
            cut = max(start_row - row, 0)
            base = int(starts[cut]) if cut else 0
            table = parser.parse(
                chunk[base:] if base else chunk,
                chunk_line + (int(lines[cut]) if cut else 0),
                newlines=None if base else newlines,
            )
            if columns is not None:
                table = table.select(list(columns))
            points = table.num_rows == len(starts) - cut and self.compression is None
            done = cut
            for batch in table.combine_chunks().to_batches(max_chunksize=batch_rows):
                done += batch.num_rows
                point = None
                if points and done < len(starts):
                    point = SeekPoint(
                        row=row + done, offset=offset + int(starts[done]), line=chunk_line + int(lines[done])
                    )
                elif points:
                    point = SeekPoint(row=row + done, offset=offset + len(chunk), line=chunk_line + newlines)
                yield batch, point
            row, offset = row + len(starts), offset + len(chunk)

    def index_shard(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> ShardIndex:
        """Blocks of lines found by one pass over the file (newlines only, nothing is parsed)."""
        file.seek(0)
        builder = LineIndexBuilder()
        for first_line, chunk, _ in self._named(self._chunks(file), shard):
            starts, lines = row_starts(chunk)
            builder.add(len(chunk), starts, lines, first_line)
        return builder.finish(format=self.name, info={"compressed": self.compression is not None})

    def _span(
        self, file: IO[bytes], index: ShardIndex, start: int, stop: int, shard: str
    ) -> tuple[bytes, int, int]:
        """The bytes of the pieces holding rows ``start`` up to ``stop``, with the first piece's first row
        and line."""
        first, last = index.piece_of(start), index.piece_of(stop - 1)
        span = index.span(first, last)
        if span is None or index.lines is None:
            raise FormatError(f"shard {shard}: the row index has no byte offsets; rebuild it")
        try:
            data = read_span(file, span[0], span[1], self.compression)
        except FormatError as exc:
            raise FormatError(f"shard {shard}: {exc}") from None
        return data, int(index.starts[first]), int(index.lines[first])

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
        """Only the lines of rows ``start`` up to ``stop`` are parsed; errors name their lines."""
        index.check_range(start, stop, shard=shard)
        if start == stop:
            return
        if schema is None:
            file.seek(0)
            schema = self.read_schema(file, shard=shard)
        project_schema(schema, columns, shard=shard)
        data, first_row, first_line = self._span(file, index, start, stop, shard)
        starts, lines = row_starts(data)
        lo, hi = start - first_row, stop - first_row
        if hi > len(starts):
            raise FormatError(f"shard {shard}: the row index does not match the file; it changed, rebuild it")
        end = int(starts[hi]) if hi < len(starts) else len(data)
        table = self._parser(schema, shard).parse(data[int(starts[lo]) : end], first_line + int(lines[lo]))
        if columns is not None:
            table = table.select(list(columns))
        yield from table.combine_chunks().to_batches(max_chunksize=batch_rows)

    def row_lines(
        self, file: IO[bytes], index: ShardIndex, *, shard: str, start: int, stop: int
    ) -> list[tuple[int, int]] | None:
        index.check_range(start, stop, shard=shard)
        if start == stop:
            return []
        data, first_row, first_line = self._span(file, index, start, stop, shard)
        first = index.piece_of(start)
        base = int(index.offsets[first])
        starts, lines = row_starts(data)
        lo, hi = start - first_row, stop - first_row
        return [(first_line + int(lines[i]), base + int(starts[i])) for i in range(lo, min(hi, len(starts)))]

    def _parser(self, schema: pa.Schema, shard: str) -> _ChunkParser:
        reasons = self.unsupported(schema)
        if reasons:
            raise SchemaError(f"shard {shard}: " + "; ".join(reasons))
        return _ChunkParser(schema, shard)

    def _open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        return _JsonlWriter(file, schema, self.compression)


def _infer(head: bytes, shard: str) -> pa.Schema:
    _check_nesting(head, 1, shard)
    try:
        table = pj.read_json(pa.BufferReader(head), read_options=pj.ReadOptions(block_size=len(head) + 1))
    except pa.ArrowException as exc:
        _locate_syntax(head, shard)
        raise FormatError(
            f"shard {shard}: cannot infer a schema from the first lines ({describe_exception(exc)}); "
            "give a schema"
        ) from None
    return table.schema


def _locate_syntax(chunk: bytes, shard: str) -> None:
    """Raise FormatError for the first line of ``chunk`` that is not a JSON object, if any."""
    parser = _ChunkParser(pa.schema([]), shard)
    for offset, raw in enumerate(chunk.split(b"\n")):
        if raw.strip():
            parser._decode_line(raw, 1 + offset)


class _JsonlWriter(FormatWriter):
    """Encodes each batch column-wise into lines and writes them; ``close`` finishes any compression."""

    def __init__(self, file: IO[bytes], schema: pa.Schema, compression: str | None) -> None:
        self._schema = schema
        self._sink = PositionTrackingSink(file)
        self._out = open_output_stream(self._sink, compression)
        self._closed = False

    def write_batch(self, batch: pa.RecordBatch) -> None:
        check_batch_schema(batch, self._schema, what="jsonl writer")
        if batch.num_rows:
            self._out.write(encode_lines_bytes(batch))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._out.close()
