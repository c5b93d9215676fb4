"""A second implementation of ``dsm-rows-v1``, written from ``docs/fingerprint.md`` alone.

It shares no code with ``dsm.fingerprint``: it walks each Arrow array slot by slot in plain Python (the
library is vectorised with NumPy), taking only the structure of the arrays (offsets, children, validity)
and their leaf values from pyarrow, and XXH3 from the ``xxhash`` package, as the spec names it.
``tests/test_fingerprint_reference.py`` checks that both agree on generated tables.
"""

from __future__ import annotations

import struct
from decimal import Decimal

import pyarrow as pa
import xxhash

__all__ = ["reference_digest", "reference_row_hashes", "reference_value_hashes"]

M64 = (1 << 64) - 1
NULL = 0x9E3779B97F4A7C15
TAGS = {
    "INT": 0x101,
    "UINT_HIGH": 0x102,
    "FLOAT": 0x103,
    "BOOL": 0x104,
    "STRING": 0x105,
    "BINARY": 0x106,
    "DATE": 0x107,
    "TIMESTAMP": 0x108,
    "TIMESTAMP_TZ": 0x109,
    "TIME": 0x10A,
    "DURATION": 0x10B,
    "DECIMAL": 0x10C,
    "LIST": 0x10D,
    "STRUCT": 0x10E,
    "MAP": 0x10F,
    "ROW": 0x110,
}
P = (1 << 61) - 1
G1 = 0x1A2B3C4D5E6F789 % P
G2 = 0x0FEDCBA987654321 % P
PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def fmix(x: int) -> int:
    x &= M64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def tagged(v: int, tag: str) -> int:
    return fmix((v & M64) ^ TAGS[tag])


def xxh3(data: bytes, tag: str) -> int:
    return xxhash.xxh3_64_intdigest(data, seed=TAGS[tag])


def key(name: str) -> int:
    return xxh3(name.encode("utf-8"), "ROW")


def split(value: int, unit: str) -> tuple[int, int]:
    """Whole seconds (floor) and nanoseconds in [0, 10**9) of an integer in ``unit``."""
    seconds, rest = divmod(value, PER_SECOND[unit])
    return seconds, rest * (1_000_000_000 // PER_SECOND[unit])


def instant(value: int, unit: str, tag: str) -> int:
    seconds, nanos = split(value, unit)
    return fmix(tagged(seconds, tag) ^ nanos)


def decimal_text(value: Decimal) -> str:
    """The value's normalised decimal text: no exponent, no trailing zeros after the point, ``0`` for zero."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    number = int("".join(map(str, digits)) or "0")
    if number == 0:
        return "0"
    if exponent >= 0:
        text = str(number * 10**exponent)
    else:
        whole, fraction = divmod(number, 10**-exponent)
        fraction_text = str(fraction).rjust(-exponent, "0").rstrip("0")
        text = str(whole) + ("." + fraction_text if fraction_text else "")
    return ("-" if sign else "") + text


def _float_bits(value: float) -> int:
    if value != value:
        return 0x7FF8000000000000
    return int(struct.unpack("<Q", struct.pack("<d", float(value)))[0])


def _combine(parts: list[tuple[str, int]], tag: str) -> int:
    total = 0
    for name, hashed in parts:
        total = (total + fmix(hashed ^ key(name))) & M64
    return fmix(total ^ TAGS[tag])


def _list_hash(elements: list[int]) -> int:
    total = 0
    for i, element in enumerate(elements):
        total = (total + fmix(element ^ fmix(i + TAGS["LIST"]))) & M64
    return fmix(total ^ tagged(len(elements), "LIST"))


def _map_hash(entries: list[int]) -> int:
    total = 0
    for entry in entries:
        total = (total + fmix(entry ^ TAGS["MAP"])) & M64
    return fmix(total ^ tagged(len(entries), "MAP"))


def reference_value_hashes(array: pa.Array | pa.ChunkedArray) -> list[int]:
    """The 64-bit hash of every value of ``array`` by the rules of the spec's section 2."""
    if isinstance(array, pa.ChunkedArray):
        return [h for chunk in array.chunks for h in reference_value_hashes(chunk)]
    kind = array.type
    valid = array.is_valid().to_pylist()
    if isinstance(kind, pa.ExtensionType):
        return reference_value_hashes(array.storage)
    if pa.types.is_dictionary(kind):
        dictionary = reference_value_hashes(array.dictionary)
        indices = array.indices.to_pylist()
        # An index past the dictionary is a placeholder under a null parent (pyarrow writes 0 there).
        return [dictionary[i] if i is not None and i < len(dictionary) else NULL for i in indices]
    out = [NULL] * len(array)
    if pa.types.is_null(kind):
        return out
    if pa.types.is_integer(kind):
        for i, v in enumerate(array.to_pylist()):
            if v is not None:
                out[i] = tagged(v, "UINT_HIGH" if v >= 1 << 63 else "INT")
    elif pa.types.is_floating(kind):
        for i, v in enumerate(array.to_pylist()):
            if v is not None:
                out[i] = tagged(_float_bits(float(v)), "FLOAT")
    elif pa.types.is_boolean(kind):
        for i, v in enumerate(array.to_pylist()):
            if v is not None:
                out[i] = tagged(int(v), "BOOL")
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        for i, v in enumerate(array.to_pylist()):
            if v is not None:
                out[i] = xxh3(v.encode("utf-8"), "STRING")
    elif (
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_binary_view(kind)
        or pa.types.is_fixed_size_binary(kind)
    ):
        for i, v in enumerate(array.to_pylist()):
            if v is not None:
                out[i] = xxh3(v, "BINARY")
    elif pa.types.is_date32(kind) or pa.types.is_date64(kind):
        raw = array.view(pa.int32() if pa.types.is_date32(kind) else pa.int64()).to_pylist()
        for i, v in enumerate(raw):
            if v is not None:
                out[i] = tagged(v if pa.types.is_date32(kind) else v // 86_400_000, "DATE")
    elif pa.types.is_timestamp(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        tag = (
            ("TIMESTAMP_TZ" if kind.tz else "TIMESTAMP")
            if pa.types.is_timestamp(kind)
            else ("TIME" if pa.types.is_time(kind) else "DURATION")
        )
        raw = array.view(pa.int32() if kind.bit_width == 32 else pa.int64()).to_pylist()
        for i, v in enumerate(raw):
            if v is not None:
                out[i] = instant(v, kind.unit, tag)
    elif pa.types.is_decimal(kind):
        for i, v in enumerate(array.to_pylist()):
            if v is not None:
                out[i] = xxh3(decimal_text(v).encode("ascii"), "DECIMAL")
    elif pa.types.is_struct(kind):
        children = [
            (kind.field(j).name, reference_value_hashes(array.field(j))) for j in range(kind.num_fields)
        ]
        for i in range(len(array)):
            if valid[i]:
                out[i] = _combine([(name, hashes[i]) for name, hashes in children], "STRUCT")
    elif pa.types.is_map(kind):
        offsets = array.offsets.to_pylist()
        keys = reference_value_hashes(array.values.field(0))
        items = reference_value_hashes(array.values.field(1))
        entries = [_combine([("key", k), ("value", v)], "STRUCT") for k, v in zip(keys, items, strict=True)]
        for i in range(len(array)):
            if valid[i]:
                out[i] = _map_hash(entries[offsets[i] : offsets[i + 1]])
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        offsets = array.offsets.to_pylist()
        values = reference_value_hashes(array.values)
        for i in range(len(array)):
            if valid[i]:
                out[i] = _list_hash(values[offsets[i] : offsets[i + 1]])
    elif pa.types.is_list_view(kind) or pa.types.is_large_list_view(kind):
        starts, sizes = array.offsets.to_pylist(), array.sizes.to_pylist()
        values = reference_value_hashes(array.values)
        for i in range(len(array)):
            if valid[i]:
                out[i] = _list_hash(values[starts[i] : starts[i] + sizes[i]])
    elif pa.types.is_fixed_size_list(kind):
        size = kind.list_size
        values = reference_value_hashes(array.values)
        for i in range(len(array)):
            if valid[i]:
                start = (array.offset + i) * size
                out[i] = _list_hash(values[start : start + size])
    else:
        raise TypeError(f"the spec has no rule for {kind}")
    return [NULL if not ok else h for ok, h in zip(valid, out, strict=True)]


def reference_row_hashes(table: pa.Table | pa.RecordBatch) -> list[int]:
    columns = [(name, reference_value_hashes(table.column(name))) for name in table.schema.names]
    return [_combine([(n, hashes[i]) for n, hashes in columns], "ROW") for i in range(table.num_rows)]


def reference_digest(table: pa.Table | pa.RecordBatch) -> tuple[int, str, str]:
    """``(rows, unordered, ordered)`` of the rows of ``table`` (spec section 4)."""
    rows = reference_row_hashes(table)
    u1 = sum(fmix(r ^ 0x243F6A8885A308D3) for r in rows) & M64
    u2 = sum(fmix(r ^ 0x13198A2E03707344) for r in rows) & M64
    o1 = o2 = 0
    for r in rows:  # Horner's rule: sum of r_i * g^(n-1-i)
        o1 = (o1 * G1 + r % P) % P
        o2 = (o2 * G2 + fmix(r) % P) % P
    return len(rows), f"{u1:016x}{u2:016x}", f"{o1:016x}{o2:016x}"
