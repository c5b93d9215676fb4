"""Hypothesis strategies for Arrow types, arrays and tables (nested, sliced, with nulls and odd layouts).

``arrow_types()`` draws every type the row fingerprint defines, nested up to a depth; ``arrays(type_)``
draws an array of it, sometimes sliced (a non-zero offset) and, for variable-length types, sometimes with
bytes left under null slots (as other writers leave them); ``tables()`` draws a table of such columns.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

__all__ = ["any_types", "arrays", "arrow_types", "decimal_array", "decimal_types", "decimals", "tables"]

_PRIMITIVES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.date32(),
    pa.date64(),
    pa.timestamp("s"),
    pa.timestamp("ns", "UTC"),
    pa.timestamp("us", "Asia/Tokyo"),
    pa.time32("ms"),
    pa.time64("ns"),
    pa.duration("us"),
    pa.null(),
]
_BYTE_TYPES = [
    pa.string(),
    pa.large_string(),
    pa.string_view(),
    pa.binary(),
    pa.large_binary(),
    pa.binary_view(),
    pa.binary(1),
    pa.binary(7),
    pa.binary(16),
]


_DECIMALS = [(pa.decimal32, 9, 4), (pa.decimal64, 18, 8), (pa.decimal128, 38, 16), (pa.decimal256, 76, 32)]
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def decimal_types(*, nested: bool = False) -> st.SearchStrategy[pa.DataType]:
    """decimal32/64/128/256 of any precision, with scales from negative to the type's largest precision.

    ``nested``: only what ``pa.array`` builds inside lists and structs (0 <= scale <= precision); arrays
    of the others are built from their buffers.
    """

    @st.composite
    def draw_type(draw: st.DrawFn) -> pa.DataType:
        factory, most, _ = draw(st.sampled_from(_DECIMALS))
        precision = draw(st.integers(1, most))
        scale = draw(st.integers(0, precision) if nested else st.integers(-5, most))
        return factory(precision, scale)

    return draw_type()


def decimals(type_: pa.DataType) -> st.SearchStrategy[decimal.Decimal]:
    """Values of a decimal type: any unscaled integer of up to ``precision`` digits, biased to the ends."""
    bound = 10**type_.precision - 1
    # Where the kernel's arithmetic changes: 64-bit limbs, 19-digit chunks, the two's-complement carry.
    edges = [
        1,
        2**64 - 1,
        2**64,
        2**64 + 1,
        2**63,
        2**128,
        2**128 + 2**64,
        10**19 - 1,
        10**19,
        10**38,
        10**57,
    ]
    unscaled = st.one_of(
        st.integers(-bound, bound),
        st.sampled_from([0, 1, -1, bound, -bound]),
        st.integers(0, type_.precision - 1).map(lambda k: 10**k),
        st.sampled_from([e for e in edges if e <= bound]).flatmap(lambda e: st.sampled_from([e, -e])),
    )
    # Built from text: exact whatever the number of digits (arithmetic would round to the context's 28).
    return unscaled.map(lambda u: decimal.Decimal(f"{u}E{-type_.scale}"))


def decimal_array(type_: pa.DataType, values: list[decimal.Decimal | None]) -> pa.Array:
    """A decimal array built from its buffers (two's-complement unscaled integers), for every scale."""
    width = {factory(1, 0).id: size for factory, _, size in _DECIMALS}[type_.id]
    unscaled = [0 if v is None else int(v.scaleb(type_.scale, _EXACT)) for v in values]
    data = b"".join(u.to_bytes(width, "little", signed=True) for u in unscaled)
    valid = np.packbits(
        np.array([v is not None for v in values] + [False] * 7, dtype=bool), bitorder="little"
    )
    return pa.Array.from_buffers(type_, len(values), [pa.py_buffer(valid.tobytes()), pa.py_buffer(data)])


def arrow_types(max_depth: int = 2) -> st.SearchStrategy[pa.DataType]:
    leaves = st.one_of(st.sampled_from(_PRIMITIVES), st.sampled_from(_BYTE_TYPES), decimal_types(nested=True))

    def nest(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
        names = st.text("abcxyz_é", min_size=1, max_size=4)
        return st.one_of(
            children.map(pa.list_),
            children.map(pa.large_list),
            st.builds(pa.list_, children, st.integers(1, 3)),
            st.lists(st.tuples(names, children), min_size=1, max_size=3, unique_by=lambda f: f[0]).map(
                lambda fields: pa.struct([pa.field(n, t) for n, t in fields])
            ),
            st.builds(pa.map_, st.sampled_from([pa.string(), pa.int32(), pa.binary()]), children),
        )

    return st.recursive(leaves, nest, max_leaves=max_depth * 2)


# Byte lengths where a layout or XXH3 changes code path: inline views hold up to 12 bytes; XXH3 switches
# at 3, 8, 16, 128 and 240.
_EDGE_LENGTHS = st.sampled_from([0, 1, 3, 4, 8, 9, 12, 13, 16, 17, 128, 129, 240, 241, 1000])


def _values(type_: pa.DataType) -> st.SearchStrategy[object]:
    if pa.types.is_null(type_):
        return st.none()
    if pa.types.is_boolean(type_):
        return st.booleans()
    if pa.types.is_integer(type_):
        bits = type_.bit_width
        if pa.types.is_signed_integer(type_):
            return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return st.integers(0, 2**bits - 1)
    if pa.types.is_float16(type_):
        return st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf"), 65504.0])
    if pa.types.is_floating(type_):
        return st.floats(width=type_.bit_width, allow_nan=True, allow_infinity=True)
    if pa.types.is_date32(type_):
        return st.integers(-(2**31), 2**31 - 1)
    if pa.types.is_date64(type_):
        return st.integers(-(2**50), 2**50)
    if pa.types.is_time32(type_):
        return st.integers(0, 86_399_999)
    if pa.types.is_time64(type_):
        return st.integers(0, 86_399_999_999_999)
    if pa.types.is_timestamp(type_) or pa.types.is_duration(type_):
        return st.integers(-(2**63), 2**63 - 1)
    if pa.types.is_fixed_size_binary(type_):
        return st.binary(min_size=type_.byte_width, max_size=type_.byte_width)
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_string_view(type_):
        return st.one_of(st.text(max_size=40), _EDGE_LENGTHS.map(lambda n: "é" * (n // 2) + "x" * (n % 2)))
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_) or pa.types.is_binary_view(type_):
        return st.one_of(
            st.binary(max_size=40), _EDGE_LENGTHS.flatmap(lambda n: st.binary(min_size=n, max_size=n))
        )
    if pa.types.is_decimal(type_):
        return decimals(type_)
    if pa.types.is_fixed_size_list(type_):
        return st.lists(_nullable(type_.value_type), min_size=type_.list_size, max_size=type_.list_size)
    if pa.types.is_map(type_):
        return st.lists(st.tuples(_values(type_.key_type), _nullable(type_.item_type)), max_size=4)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return st.lists(_nullable(type_.value_type), max_size=5)
    if pa.types.is_struct(type_):
        return st.fixed_dictionaries({f.name: _nullable(f.type) for f in type_})
    raise AssertionError(f"no value strategy for {type_}")


def _nullable(type_: pa.DataType) -> st.SearchStrategy[object]:
    return st.one_of(st.none(), _values(type_))


def _build(type_: pa.DataType, values: list[object]) -> pa.Array:
    if pa.types.is_decimal(type_):
        return decimal_array(type_, values)  # type: ignore[arg-type]
    if pa.types.is_float16(type_):
        halves = np.array([0.0 if v is None else v for v in values], dtype=np.float16)
        return pa.array(halves, mask=np.array([v is None for v in values], dtype=bool), type=type_)
    return pa.array(values, type=type_)


def _with_bytes_under_nulls(arr: pa.Array, hide: list[bool]) -> pa.Array:
    """The same values with the slots in ``hide`` made null while their bytes stay in the buffers."""
    bits = [not h and valid for h, valid in zip(hide, arr.is_valid().to_pylist(), strict=True)]
    packed = np.packbits(np.array(bits + [False] * (-len(bits) % 8), dtype=bool), bitorder="little")
    buffers = arr.buffers()
    return pa.Array.from_buffers(arr.type, len(arr), [pa.py_buffer(packed.tobytes()), *buffers[1:]])


def any_types() -> st.SearchStrategy[pa.DataType]:
    """Every type :func:`arrow_types` draws, plus top-level decimals of every scale."""
    return st.one_of(arrow_types(), decimal_types())


@st.composite
def arrays(draw: st.DrawFn, type_: pa.DataType, max_size: int = 12) -> pa.Array:
    values = draw(st.lists(_nullable(type_), max_size=max_size))
    arr = _build(type_, values)
    flat = not (pa.types.is_nested(type_) or pa.types.is_null(type_))
    if flat and len(arr) and arr.offset == 0 and draw(st.booleans()):
        arr = _with_bytes_under_nulls(
            arr, draw(st.lists(st.booleans(), min_size=len(arr), max_size=len(arr)))
        )
    if len(arr) and draw(st.booleans()):
        start = draw(st.integers(0, len(arr)))
        arr = arr.slice(start, draw(st.integers(0, len(arr) - start)))
    return arr


@st.composite
def tables(draw: st.DrawFn, max_columns: int = 5, max_rows: int = 12) -> pa.Table:
    rows = draw(st.integers(0, max_rows))
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=5), max_size=max_columns, unique=True))
    columns = {}
    for name in names:
        type_ = draw(any_types())
        values = draw(st.lists(_nullable(type_), min_size=rows, max_size=rows))
        columns[name] = _build(type_, values)
    return pa.table(columns) if columns else pa.table({"_": pa.nulls(rows)}).drop_columns(["_"])
