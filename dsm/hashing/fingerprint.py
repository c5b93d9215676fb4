"""The row fingerprint ``dsm-rows-v1``: a digest of rows as typed values, independent of file format.

Every value hashes to 64 bits by a canonical rule for its type (``docs/fingerprint.md`` is the
specification; ``tests/test_fingerprint_vectors.py`` pins it). A row hashes to 64 bits from its fields,
keyed by field name. Two digests are kept:

- ``unordered``: two sums mod 2**64 of the row hashes under two finalisers; the same multiset of rows gives
  the same value whatever the order, sharding or format. Shards combine by addition.
- ``ordered``: two polynomial hashes mod the prime 2**61-1 of the row-hash sequence; the same rows in the
  same order give the same value whatever the sharding. Shards combine as ``a * g**len(b) + b``.

Everything is vectorised over Arrow buffers: by the compiled kernel (:mod:`dsm.hashing.fingerprint_kernel`,
one C call per array, GIL released) where it is built, else by the NumPy path below, which gives the same
digests (only variable-length values and decimals then take one C hash call per value).

>>> import pyarrow as pa
>>> digest_batch(pa.record_batch({"id": [1, 2]})).rows
2
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
import pyarrow as pa
import xxhash

from dsm.arrow_types import list_view_as_list, placeholders_nulled
from dsm.errors import SchemaError
from dsm.hashing import fingerprint_kernel
from dsm.hashing.rowdigest import ALGORITHM, G1, G2, P, RowDigest

__all__ = ["ALGORITHM", "RowDigest", "digest_batch", "digest_batches", "hash_rows", "hash_values"]


_U64 = np.uint64
_P = P

# Tags: domain separation between types that share a bit pattern (fixed forever for dsm-rows-v1).
_NULL = 0x9E3779B97F4A7C15
_T_INT = 0x0000000000000101
_T_UINT_HIGH = 0x0000000000000102
_T_FLOAT = 0x0000000000000103
_T_BOOL = 0x0000000000000104
_T_STRING = 0x0000000000000105
_T_BINARY = 0x0000000000000106
_T_DATE = 0x0000000000000107
_T_TIMESTAMP = 0x0000000000000108
_T_TIMESTAMP_TZ = 0x0000000000000109
_T_TIME = 0x000000000000010A
_T_DURATION = 0x000000000000010B
_T_DECIMAL = 0x000000000000010C
_T_LIST = 0x000000000000010D
_T_STRUCT = 0x000000000000010E
_T_MAP = 0x000000000000010F
_T_ROW = 0x0000000000000110
_K_UNORDERED_1 = 0x243F6A8885A308D3
_K_UNORDERED_2 = 0x13198A2E03707344
_CANONICAL_NAN = 0x7FF8000000000000
_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: a bijection on uint64 with full avalanche."""
    x = x ^ (x >> _U64(33))
    x = x * _U64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> _U64(33))
    x = x * _U64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> _U64(33))


def _tagged(values: np.ndarray, tag: int) -> np.ndarray:
    return _fmix64(values.astype(_U64, copy=False) ^ _U64(tag))


def _key_hash(name: str) -> int:
    return xxhash.xxh3_64_intdigest(name.encode("utf-8"), seed=_T_ROW)


def _apply_nulls(arr: pa.Array, hashes: np.ndarray) -> np.ndarray:
    if arr.null_count == 0:
        return hashes
    if fingerprint_kernel.enabled() and fingerprint_kernel.apply_nulls(arr, hashes, _NULL):
        return hashes
    is_null = arr.is_null().to_numpy(zero_copy_only=False)
    return np.where(is_null, _U64(_NULL), hashes)


def _filled_numpy(arr: pa.Array, fill: object) -> np.ndarray:
    if arr.null_count:
        import pyarrow.compute as pc

        arr = pc.fill_null(arr, pa.scalar(fill, arr.type))
    return arr.to_numpy(zero_copy_only=False)


def _hash_ints(arr: pa.Array) -> np.ndarray:
    if fingerprint_kernel.enabled():
        return fingerprint_kernel.hash_number_values(arr, _T_INT, _T_UINT_HIGH)
    signed = pa.types.is_signed_integer(arr.type)
    values = _filled_numpy(arr, 0)
    if signed:
        return _tagged(values.astype(np.int64).view(_U64), _T_INT)
    unsigned = values.astype(_U64)
    high = unsigned >= _U64(1 << 63)
    out = _tagged(unsigned, _T_INT)
    if high.any():
        out = np.where(high, _tagged(unsigned, _T_UINT_HIGH), out)
    return out


def _hash_floats(arr: pa.Array) -> np.ndarray:
    if fingerprint_kernel.enabled():
        return fingerprint_kernel.hash_number_values(arr, _T_FLOAT)
    values = _filled_numpy(arr, 0).astype(np.float64)
    bits = values.view(_U64).copy()
    bits[np.isnan(values)] = _U64(_CANONICAL_NAN)
    return _tagged(bits, _T_FLOAT)


def _storage_ints(arr: pa.Array) -> np.ndarray:
    """The integers a temporal array stores (nulls as 0), as int64."""
    storage = arr.view(pa.int32() if arr.type.bit_width == 32 else pa.int64())
    return _filled_numpy(storage, 0).astype(np.int64)


def _split_ns(values: np.ndarray, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Whole seconds and nanoseconds within the second, exact for any int64 value in any unit."""
    per_second = 1_000_000_000 // _NS_PER_UNIT[unit]
    seconds = np.floor_divide(values, per_second)
    nanos = (values - seconds * per_second) * _NS_PER_UNIT[unit]
    return seconds, nanos


def _hash_instants(arr: pa.Array, unit: str, tag: int) -> np.ndarray:
    if fingerprint_kernel.enabled():
        return fingerprint_kernel.hash_instant_values(arr, _NS_PER_UNIT[unit], tag)
    seconds, nanos = _split_ns(_storage_ints(arr), unit)
    return _fmix64(_tagged(seconds.view(_U64), tag) ^ nanos.astype(_U64))


def _var_offsets(arr: pa.Array) -> tuple[np.ndarray, memoryview]:
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    buffers = arr.buffers()
    offsets = np.frombuffer(
        buffers[1],
        dtype=np.int64 if large else np.int32,
        count=len(arr) + 1,
        offset=arr.offset * (8 if large else 4),
    )
    data = memoryview(buffers[2]) if buffers[2] is not None else memoryview(b"")
    return offsets, data


def _hash_bytes(arr: pa.Array, tag: int) -> np.ndarray:
    if fingerprint_kernel.enabled():
        return fingerprint_kernel.hash_binary_values(arr, tag)
    if pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.large_string())
    elif pa.types.is_binary_view(arr.type) or pa.types.is_fixed_size_binary(arr.type):
        arr = arr.cast(pa.large_binary())
    offsets, data = _var_offsets(arr)
    bounds = offsets.tolist()
    digest = xxhash.xxh3_64_intdigest
    out = np.fromiter(
        (digest(data[bounds[i] : bounds[i + 1]], tag) for i in range(len(arr))), dtype=_U64, count=len(arr)
    )
    return out


def _hash_decimals(arr: pa.Array) -> np.ndarray:
    # Canonical form: the value's normalised decimal text ("1.5" for 1.50), so scale changes keep the value.
    if fingerprint_kernel.enabled():
        return fingerprint_kernel.hash_decimal_values(arr, _T_DECIMAL)
    digest = xxhash.xxh3_64_intdigest
    out = np.empty(len(arr), dtype=_U64)
    for i, value in enumerate(arr.to_pylist()):
        if value is None:
            out[i] = 0
            continue
        text = _decimal_text(value)
        out[i] = digest(text.encode("ascii"), _T_DECIMAL)
    return out


def _decimal_text(value: decimal.Decimal) -> str:
    """The normalised text of docs/fingerprint.md, exact for every digit count.

    ``format(value, "f")`` writes the value's own digits without rounding (``Decimal.normalize`` would
    round to the 28 digits of the default context, so that two 38-digit values shared a text).
    """
    if value.is_zero():
        return "0"
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _segment_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sum (mod 2**64) of ``values[offsets[i]:offsets[i+1]]`` for each i; empty segments sum to 0."""
    cumulative = np.concatenate([np.zeros(1, dtype=_U64), np.cumsum(values, dtype=_U64)])
    return cumulative[offsets[1:]] - cumulative[offsets[:-1]]


def _list_offsets(arr: pa.Array) -> np.ndarray:
    return arr.offsets.to_numpy().astype(np.int64)


def _hash_list(arr: pa.Array, *, ordered: bool, tag: int) -> np.ndarray:
    offsets = _list_offsets(arr)
    start, stop = int(offsets[0]), int(offsets[-1])
    child = hash_values(arr.values.slice(start, stop - start))
    offsets = offsets - start
    if fingerprint_kernel.enabled():
        return fingerprint_kernel.hash_list_values(offsets, child, tag, ordered=ordered)
    if ordered:
        lengths = np.diff(offsets)
        positions = np.arange(stop - start, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
        child = _fmix64(child ^ _fmix64(positions.astype(_U64) + _U64(tag)))
    else:
        child = _fmix64(child ^ _U64(tag))
    lengths = np.diff(offsets).astype(_U64)
    return _fmix64(_segment_sums(child, offsets) ^ _tagged(lengths, tag))


def _hash_struct(arr: pa.StructArray) -> np.ndarray:
    fields = [arr.type.field(i) for i in range(arr.type.num_fields)]
    children = [(f.name, arr.field(i)) for i, f in enumerate(fields)]
    return _combine_fields(children, len(arr), _T_STRUCT)


def _combine_fields(children: Iterable[tuple[str, pa.Array]], length: int, tag: int) -> np.ndarray:
    total = np.zeros(length, dtype=_U64)
    if fingerprint_kernel.enabled():
        for name, child in children:
            key = _key_hash(name)
            if not _fold_flat(total, child, key):
                fingerprint_kernel.fold(total, hash_values(child), key)
        return fingerprint_kernel.finish(total, tag)
    for name, child in children:
        total += _fmix64(hash_values(child) ^ _U64(_key_hash(name)))
    return _fmix64(total ^ _U64(tag))


def _fold_flat(total: np.ndarray, arr: pa.Array | pa.ChunkedArray, key: int) -> bool:
    """Kernel only: for an integer, float32/64, date32, timestamp, time or duration field, add
    ``fmix(hash_values(arr) ^ key)`` to ``total`` straight from its buffers, in one pass (the array of value
    hashes between the two steps cost more to allocate and touch than the hashing did); False, and nothing
    done, for a field of any other type."""
    tag = _flat_tag(arr.type)
    if tag is None:
        return False
    if isinstance(arr, pa.ChunkedArray):
        at = 0
        for chunk in arr.chunks:
            _fold_flat(total[at : at + len(chunk)], chunk, key)
            at += len(chunk)
    elif tag in (_T_INT, _T_FLOAT, _T_DATE):
        numbers = arr.view(pa.int32()) if tag == _T_DATE else arr
        fingerprint_kernel.fold_number_values(total, numbers, key, tag, _T_UINT_HIGH, _NULL)
    else:
        unit = arr.type.unit
        fingerprint_kernel.fold_instant_values(total, arr, key, _NS_PER_UNIT[unit], tag, _NULL)
    return True


def _flat_tag(kind: pa.DataType) -> int | None:
    """The tag :func:`_fold_flat` hashes a type's values under (as :func:`hash_values` does); None for a type
    it leaves to :func:`hash_values`."""
    if pa.types.is_integer(kind):
        return _T_INT
    if pa.types.is_float32(kind) or pa.types.is_float64(kind):
        return _T_FLOAT
    if pa.types.is_date32(kind):
        return _T_DATE
    return _instant_tag(kind)


def _instant_tag(kind: pa.DataType) -> int | None:
    """The tag of a timestamp (with or without a time zone), time or duration type; None for any other."""
    if pa.types.is_timestamp(kind):
        return _T_TIMESTAMP_TZ if kind.tz else _T_TIMESTAMP
    if pa.types.is_time(kind):
        return _T_TIME
    if pa.types.is_duration(kind):
        return _T_DURATION
    return None


def hash_values(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """One uint64 per value of ``arr`` under the canonical rules of dsm-rows-v1 (nulls included)."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 0:
            return np.zeros(0, dtype=_U64)
        if arr.num_chunks == 1:
            return hash_values(arr.chunk(0))
        return np.concatenate([hash_values(chunk) for chunk in arr.chunks])
    kind = arr.type
    if pa.types.is_dictionary(kind):
        return hash_values(placeholders_nulled(arr).dictionary_decode())
    if isinstance(kind, pa.ExtensionType):
        return hash_values(arr.storage)
    if pa.types.is_list_view(kind) or pa.types.is_large_list_view(kind):
        return hash_values(list_view_as_list(arr))
    if len(arr) == 0:
        return np.zeros(0, dtype=_U64)
    if pa.types.is_null(kind):
        return np.full(len(arr), _NULL, dtype=_U64)
    if pa.types.is_integer(kind):
        out = _hash_ints(arr)
    elif pa.types.is_floating(kind):
        out = _hash_floats(arr.cast(pa.float64()) if pa.types.is_float16(kind) else arr)
    elif pa.types.is_boolean(kind):
        out = _tagged(_filled_numpy(arr, False).astype(_U64), _T_BOOL)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        out = _hash_bytes(arr, _T_STRING)
    elif (
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_binary_view(kind)
        or pa.types.is_fixed_size_binary(kind)
    ):
        out = _hash_bytes(arr, _T_BINARY)
    elif pa.types.is_date32(kind):
        out = _tagged(_storage_ints(arr).view(_U64), _T_DATE)
    elif pa.types.is_date64(kind):
        days = np.floor_divide(_storage_ints(arr), 86_400_000)
        out = _tagged(days.view(_U64), _T_DATE)
    elif (instant := _instant_tag(kind)) is not None:
        out = _hash_instants(arr, kind.unit, instant)
    elif pa.types.is_decimal(kind):
        out = _hash_decimals(arr)
    elif pa.types.is_map(kind):
        # Entries are the structs {key, value} of the spec, whatever the map's own field names are.
        pairs = pa.StructArray.from_arrays([arr.values.field(0), arr.values.field(1)], names=["key", "value"])
        out = _hash_list(pa.ListArray.from_arrays(arr.offsets, pairs), ordered=False, tag=_T_MAP)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        out = _hash_list(arr, ordered=True, tag=_T_LIST)
    elif pa.types.is_fixed_size_list(kind):
        size = kind.list_size
        offsets = pa.array(np.arange(len(arr) + 1, dtype=np.int32) * size)
        flat = arr.values.slice(arr.offset * size, len(arr) * size)
        out = _hash_list(pa.ListArray.from_arrays(offsets, flat), ordered=True, tag=_T_LIST)
    elif pa.types.is_struct(kind):
        out = _hash_struct(arr)
    else:
        raise SchemaError(f"type {kind} has no canonical encoding in {ALGORITHM}")
    return _apply_nulls(arr, out)


def hash_rows(batch: pa.RecordBatch | pa.Table) -> np.ndarray:
    """One uint64 per row: the fields' value hashes, each keyed by its field name, combined."""
    columns = batch.columns
    return _combine_fields(zip(batch.schema.names, columns, strict=True), batch.num_rows, _T_ROW)


# --- modular arithmetic for the ordered digest (vectorised mod 2**61 - 1) -----------------------------


def _mod_p(x: np.ndarray) -> np.ndarray:
    x = (x & _U64(_P)) + (x >> _U64(61))
    return np.where(x >= _U64(_P), x - _U64(_P), x)


def _mulmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b mod 2**61-1 for uint64 arrays with values below 2**61, without 128-bit integers."""
    mask32 = _U64(0xFFFFFFFF)
    a_hi, a_lo = a >> _U64(32), a & mask32
    b_hi, b_lo = b >> _U64(32), b & mask32
    mid = a_hi * b_lo + a_lo * b_hi  # < 2**62
    high = (a_hi * b_hi) << _U64(3)  # 2**64 = 8 (mod p); < 2**61
    mid_part = (mid >> _U64(29)) + ((mid & _U64((1 << 29) - 1)) << _U64(32))  # 2**32 * mid (mod p)
    low = _mod_p(a_lo * b_lo)
    return _mod_p(_mod_p(high + mid_part) + low)


@lru_cache(maxsize=4)
def _powers(base: int, count: int) -> np.ndarray:
    """base**0 .. base**(count-1) mod p, by doubling."""
    out = np.ones(1, dtype=_U64)
    while len(out) < count:
        step = pow(base, len(out), _P)
        out = np.concatenate([out, _mulmod(out, np.full(len(out), step, dtype=_U64))])
    return out[:count]


def _poly(values: np.ndarray, base: int) -> int:
    """sum(v[i] * base**(n-1-i)) mod p: the polynomial hash of a sequence, Horner order."""
    n = len(values)
    if n == 0:
        return 0
    size = 1 << max(10, (n - 1).bit_length())
    powers = _powers(base, size)[:n][::-1]
    terms = _mulmod(_mod_p(values), powers)
    low = int(np.sum(terms & _U64(0xFFFFFFFF), dtype=_U64))
    high = int(np.sum(terms >> _U64(32), dtype=_U64))
    return ((high << 32) + low) % _P


def digest_batch(batch: pa.RecordBatch | pa.Table) -> RowDigest:
    """The :class:`RowDigest` of the rows of ``batch``."""
    row_hashes = hash_rows(batch)
    if fingerprint_kernel.enabled():
        u1, u2, o1, o2 = fingerprint_kernel.digest_parts(row_hashes, _K_UNORDERED_1, _K_UNORDERED_2, G1, G2)
        return RowDigest(rows=batch.num_rows, u1=u1, u2=u2, o1=o1, o2=o2)
    return RowDigest(
        rows=batch.num_rows,
        u1=int(np.sum(_fmix64(row_hashes ^ _U64(_K_UNORDERED_1)), dtype=_U64)),
        u2=int(np.sum(_fmix64(row_hashes ^ _U64(_K_UNORDERED_2)), dtype=_U64)),
        o1=_poly(row_hashes, G1),
        o2=_poly(_fmix64(row_hashes), G2),
    )


def digest_batches(batches: Iterable[pa.RecordBatch | pa.Table]) -> RowDigest:
    """The :class:`RowDigest` of all rows of ``batches`` in order."""
    return RowDigest.combine(digest_batch(b) for b in batches)
