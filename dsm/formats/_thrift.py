"""Thrift's compact protocol, as Parquet stores its footer and page headers: decoded into a generic tree that
keeps every field (known or not) and encoded back to the same bytes.

A struct is a list of :class:`Field` in the order read; a list or set is a :class:`Items`. Unknown fields
(written by a newer writer) survive a decode and an encode unchanged, which is what lets a footer be edited
(offsets, sizes, row groups) without a schema of every struct.

>>> tree, end = decode_struct(encode_struct([Field(1, I32, 7), Field(3, BINARY, b"x")]))
>>> [(f.id, f.value) for f in tree], end
[(1, 7), (3, b'x')]
"""

from __future__ import annotations

import struct as _struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BINARY",
    "BOOL",
    "DOUBLE",
    "I8",
    "I16",
    "I32",
    "I64",
    "LIST",
    "STRUCT",
    "Field",
    "Items",
    "ThriftError",
    "decode_struct",
    "encode_struct",
    "field",
    "value_of",
    "varint_at",
    "varint_bytes",
    "without",
]

# Compact protocol type codes (a field's type; booleans carry their value in the type: 1 true, 2 false).
BOOL, I8, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
_FALSE = 2
_MAX_DEPTH = 64


class ThriftError(ValueError):
    """Bytes that are not a compact-protocol struct (truncated, or an unknown type)."""


@dataclass
class Field:
    id: int
    type: int
    value: Any


@dataclass
class Items:
    """A list or set (``kind`` LIST or SET) of values of one ``type``; a map keeps ``key_type`` too, its
    values a list of pairs."""

    kind: int
    type: int
    values: list[Any]
    key_type: int = 0


def field(tree: list[Field], id_: int) -> Field | None:
    """The field ``id_`` of a struct, if present."""
    for item in tree:
        if item.id == id_:
            return item
    return None


def value_of(tree: list[Field], id_: int, default: Any = None) -> Any:
    found = field(tree, id_)
    return default if found is None else found.value


def without(tree: list[Field], *ids: int) -> list[Field]:
    return [item for item in tree if item.id not in ids]


# --------------------------------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes | memoryview, pos: int) -> None:
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.pos = pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError("truncated")
        value = self.data[self.pos]
        self.pos += 1
        return int(value)

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ThriftError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftError("truncated")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, type_: int, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise ThriftError("nested too deep")
        if type_ in (BOOL, _FALSE):  # in a list a boolean is one byte
            return self.byte() == 1
        if type_ == I8:
            b = self.byte()
            return b - 256 if b > 127 else b
        if type_ in (I16, I32, I64):
            return self.zigzag()
        if type_ == DOUBLE:
            return _struct.unpack("<d", self.take(8))[0]
        if type_ == BINARY:
            return self.take(self.varint())
        if type_ in (LIST, SET):
            header = self.byte()
            size, elem = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return Items(type_, elem, [self.value(elem, depth + 1) for _ in range(size)])
        if type_ == MAP:
            size = self.varint()
            if size == 0:
                return Items(MAP, 0, [])
            kinds = self.byte()
            key, val = kinds >> 4, kinds & 0x0F
            pairs = [(self.value(key, depth + 1), self.value(val, depth + 1)) for _ in range(size)]
            return Items(MAP, val, pairs, key_type=key)
        if type_ == STRUCT:
            return self.struct(depth + 1)
        raise ThriftError(f"unknown type {type_}")

    def struct(self, depth: int, until: int | None = None) -> list[Field]:
        fields: list[Field] = []
        last = 0
        while True:
            header = self.byte()
            if header == 0:
                return fields
            delta, type_ = header >> 4, header & 0x0F
            id_ = last + delta if delta else self.zigzag()
            if until is not None and id_ >= until:
                return fields
            if type_ in (BOOL, _FALSE):
                fields.append(Field(id_, BOOL, type_ == BOOL))
            else:
                fields.append(Field(id_, type_, self.value(type_, depth)))
            last = id_


def decode_struct(
    data: bytes | memoryview, pos: int = 0, *, until: int | None = None
) -> tuple[list[Field], int]:
    """The struct that starts at ``pos`` and the position after it (ThriftError if it is not one).
    ``until``: its fields up to the first whose id is that or more, where it stops (and says no position)."""
    reader = _Reader(data, pos)
    return reader.struct(0, until), reader.pos


# --------------------------------------------------------------------------------------------- encoding


def varint_at(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint (ULEB128, as thrift's compact protocol and Parquet's RLE runs write it) at
    ``pos``, and the position after it (ThriftError if it is cut short or too long)."""
    reader = _Reader(data, pos)
    return reader.varint(), reader.pos


def varint_bytes(n: int) -> bytes:
    """The unsigned varint of ``n``."""
    out = bytearray()
    _varint(n, out)
    return bytes(out)


def _varint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(n: int, out: bytearray) -> None:
    _varint((n << 1) ^ (n >> 63), out)


def _value(type_: int, value: Any, out: bytearray) -> None:
    if type_ in (BOOL, _FALSE):  # an element of a list, set or map; a field's boolean is in its type
        out.append(1 if value else 2)
    elif type_ == I8:
        out.append(value & 0xFF)
    elif type_ in (I16, I32, I64):
        _zigzag(value, out)
    elif type_ == DOUBLE:
        out += _struct.pack("<d", value)
    elif type_ == BINARY:
        _varint(len(value), out)
        out += value
    elif type_ in (LIST, SET):
        size = len(value.values)
        if size < 15:
            out.append((size << 4) | value.type)
        else:
            out.append(0xF0 | value.type)
            _varint(size, out)
        for item in value.values:
            _value(value.type, item, out)
    elif type_ == MAP:
        _varint(len(value.values), out)
        if value.values:
            out.append((value.key_type << 4) | value.type)
            for key, val in value.values:
                _value(value.key_type, key, out)
                _value(value.type, val, out)
    elif type_ == STRUCT:
        _struct_into(value, out)
    else:
        raise ThriftError(f"unknown type {type_}")


def _struct_into(fields: list[Field], out: bytearray) -> None:
    last = 0
    for item in fields:
        code = (BOOL if item.value else _FALSE) if item.type == BOOL else item.type
        delta = item.id - last
        if 0 < delta <= 15:
            out.append((delta << 4) | code)
        else:
            out.append(code)
            _zigzag(item.id, out)
        if item.type != BOOL:
            _value(item.type, item.value, out)
        last = item.id
    out.append(0)


def encode_struct(fields: list[Field]) -> bytes:
    """The compact-protocol bytes of a struct (fields in the order given)."""
    out = bytearray()
    _struct_into(fields, out)
    return bytes(out)
