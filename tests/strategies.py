"""Hypothesis strategies for Arrow types, values and tables, shared by the property tests.

``arrow_types()`` draws types pyarrow produces (every leaf dsm fingerprints, nested lists, structs with
awkward field names, maps, dictionaries); ``tables(schema)`` draws rows for any such schema, with nulls
where the schema allows them. Values stay inside the ranges every format can spell (years 1 to 9999).
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

__all__ = ["FIELD_NAMES", "arrow_types", "leaf_types", "schemas", "tables", "values_of"]

_TIMEZONES = [None, "UTC", "Asia/Kolkata", "+01:00", "America/New_York"]
_UNITS = ["s", "ms", "us", "ns"]
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
_INT64 = (-(2**63), 2**63 - 1)
_YEAR_1 = int(datetime.datetime(1, 1, 1, tzinfo=datetime.UTC).timestamp())
_YEAR_9999 = int(datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC).timestamp())
_INT_TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
]

FIELD_NAMES = st.one_of(
    st.sampled_from(["a", "b", "id", "my col", "a: b", "x, y", " lead", "trail ", "", "é", 'q"uote', "<t>"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
)
"""Names of nested fields, including the ones pyarrow's type text cannot spell."""


def _decimal_types(min_scale: int = 0) -> st.SearchStrategy[pa.DataType]:
    def make(width: int, precision: int, scale: int) -> pa.DataType:
        return {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}[width](
            precision, scale
        )

    limits = {32: 9, 64: 18, 128: 38, 256: 76}
    return st.sampled_from([32, 64, 128, 256]).flatmap(
        lambda width: st.integers(1, limits[width]).flatmap(
            lambda precision: st.integers(min_scale, precision).map(
                lambda scale: make(width, precision, scale)
            )
        )
    )


def leaf_types(*, negative_scales: bool = False) -> st.SearchStrategy[pa.DataType]:
    """Every non-nested type dsm fingerprints (decimals of negative scale only as types: pyarrow builds
    their arrays from Python values wrongly)."""
    simple = st.sampled_from(
        [
            pa.null(),
            pa.bool_(),
            *_INT_TYPES,
            pa.float16(),
            pa.float32(),
            pa.float64(),
            pa.string(),
            pa.large_string(),
            pa.string_view(),
            pa.binary(),
            pa.large_binary(),
            pa.binary_view(),
            pa.date32(),
            pa.date64(),
            pa.time32("s"),
            pa.time32("ms"),
            pa.time64("us"),
            pa.time64("ns"),
        ]
    )
    return st.one_of(
        simple,
        st.integers(1, 8).map(pa.binary),
        st.builds(pa.timestamp, st.sampled_from(_UNITS), st.sampled_from(_TIMEZONES)),
        st.sampled_from(_UNITS).map(pa.duration),
        _decimal_types(-3 if negative_scales else 0),
    )


def _dictionaries() -> st.SearchStrategy[pa.DataType]:
    # pyarrow builds nested dictionaries from Python values only of these (dsm reads others: see formats)
    values = st.sampled_from([pa.string(), pa.large_string(), pa.binary()])
    indices = st.sampled_from([pa.int8(), pa.uint8(), pa.int16(), pa.int32(), pa.int64()])
    return st.builds(lambda i, v, o: pa.dictionary(i, v, ordered=o), indices, values, st.booleans())


def _field(name: str, kind: pa.DataType, nullable: bool) -> pa.Field:
    # Null fields are nullable. So are dictionary ones here: under a null parent pyarrow builds a
    # non-nullable dictionary child with index 0 into an empty dictionary, which no reader produces.
    return pa.field(name, kind, nullable=nullable or pa.types.is_null(kind) or pa.types.is_dictionary(kind))


def _fields(children: st.SearchStrategy[pa.DataType], name: st.SearchStrategy[str]) -> Any:
    return st.builds(_field, name, children, st.booleans())


def _nested(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    item = _fields(children, st.sampled_from(["item", "element", "x"]))
    struct_fields = st.lists(_fields(children, FIELD_NAMES), max_size=3, unique_by=lambda f: f.name)
    keys = st.sampled_from([pa.string(), pa.int32(), pa.large_string()])
    map_item = _fields(children, st.sampled_from(["value", "v"]))
    map_key = st.builds(lambda k, n: pa.field(n, k, nullable=False), keys, st.sampled_from(["key", "k"]))
    return st.one_of(
        item.map(pa.list_),
        item.map(pa.large_list),
        st.builds(pa.list_, item, st.integers(1, 3)),
        item.map(pa.list_view),
        struct_fields.map(pa.struct),
        st.builds(pa.map_, map_key, map_item, st.booleans()),
    )


def arrow_types(max_leaves: int = 6, *, negative_scales: bool = False) -> st.SearchStrategy[pa.DataType]:
    """Leaves, dictionaries and nested types of them (a few levels deep)."""
    leaves = st.one_of(leaf_types(negative_scales=negative_scales), _dictionaries())
    return st.recursive(leaves, _nested, max_leaves=max_leaves).filter(_buildable)


def _has_dictionary(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        return True
    return any(_has_dictionary(kind.field(i).type) for i in range(kind.num_fields))


def _buildable(kind: pa.DataType) -> bool:
    """Not a dictionary under a fixed-size list: pyarrow fills a null list's slots with index 0 into an
    empty dictionary (an invalid array no reader produces)."""
    if pa.types.is_fixed_size_list(kind):
        return not _has_dictionary(kind.value_type)
    if pa.types.is_dictionary(kind):
        return True
    return all(_buildable(kind.field(i).type) for i in range(kind.num_fields))


def schemas(types: st.SearchStrategy[pa.DataType], *, max_fields: int = 4) -> st.SearchStrategy[pa.Schema]:
    names = st.sampled_from(["a", "b", "c", "d", "e", "f", "text", "n"])
    fields = st.lists(st.builds(_field, names, types, st.booleans()), min_size=1, max_size=max_fields)
    return fields.map(lambda fs: pa.schema({f.name: f for f in fs}.values()))


# ------------------------------------------------------------------------------------------------ values


def _temporal_range(kind: pa.DataType) -> tuple[int, int]:
    if pa.types.is_time32(kind) or pa.types.is_time64(kind):
        return 0, 86_400 * _PER_SECOND[kind.unit] - 1
    if pa.types.is_timestamp(kind):
        per = _PER_SECOND[kind.unit]
        return max(_INT64[0], _YEAR_1 * per), min(_INT64[1], _YEAR_9999 * per)
    return -(10**12), 10**12


def values_of(kind: pa.DataType, nullable: bool = True) -> st.SearchStrategy[Any]:
    """Python values ``pa.array(values, type=kind)`` accepts; None only where ``nullable``."""
    value = _non_null(kind)
    return st.one_of(st.none(), value) if nullable else value


def _non_null(kind: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_null(kind):
        return st.none()
    if pa.types.is_boolean(kind):
        return st.booleans()
    if pa.types.is_integer(kind):
        info = np.iinfo(kind.to_pandas_dtype())
        return st.integers(int(info.min), int(info.max))
    if pa.types.is_float16(kind):
        return st.floats(width=16).map(np.float16)
    if pa.types.is_floating(kind):
        return st.floats(width=32 if pa.types.is_float32(kind) else 64)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    if pa.types.is_fixed_size_binary(kind):
        return st.binary(min_size=kind.byte_width, max_size=kind.byte_width)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return st.binary(max_size=12)
    if pa.types.is_date32(kind):
        return st.integers(-719_162, 2_932_896)  # days of years 1 to 9999
    if pa.types.is_date64(kind):
        return st.integers(-719_162, 2_932_896).map(
            lambda d: datetime.date(1970, 1, 1) + datetime.timedelta(d)
        )
    if pa.types.is_timestamp(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        low, high = _temporal_range(kind)
        return st.integers(low, high)
    if pa.types.is_decimal(kind):
        limit = 10**kind.precision - 1
        # Built from its digits: Decimal arithmetic would round to 28 significant digits.
        return st.integers(-limit, limit).map(
            lambda n: Decimal((int(n < 0), tuple(int(c) for c in str(abs(n))), -kind.scale))
        )
    if pa.types.is_dictionary(kind):
        return _non_null(kind.value_type)
    if pa.types.is_fixed_size_list(kind):
        item = values_of(kind.value_type, kind.value_field.nullable)
        return st.lists(item, min_size=kind.list_size, max_size=kind.list_size)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        return st.lists(values_of(kind.value_type, kind.value_field.nullable), max_size=3)
    if pa.types.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        return st.fixed_dictionaries({f.name: values_of(f.type, f.nullable) for f in fields})
    if pa.types.is_map(kind):
        pair = st.tuples(_non_null(kind.key_type), values_of(kind.item_type, kind.item_field.nullable))
        return st.lists(pair, max_size=3)
    raise TypeError(f"no values for {kind}")


def _array(kind: pa.DataType, values: list[Any]) -> pa.Array:
    if pa.types.is_dictionary(kind):
        decoded = pa.array(values, type=kind.value_type)
        encoded = decoded.dictionary_encode()
        indices = encoded.indices.cast(kind.index_type)
        return pa.DictionaryArray.from_arrays(indices, encoded.dictionary, ordered=kind.ordered)
    return pa.array(values, type=kind)


def nulls_under_null_parents(array: pa.Array) -> pa.Array:
    """``array`` with every slot that a null struct hides made null too, declared nullable or not.

    Arrow leaves those slots undefined: pyarrow's builders put a value there, dsm's JSONL reader a null.
    Both are the same rows; a generated table is drawn in either shape."""
    kind = array.type
    if pa.types.is_struct(kind) and kind.num_fields:
        children = [
            nulls_under_null_parents(c) for c in array.flatten()
        ]  # flatten() merges the parent's nulls
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        mask = array.is_null() if array.null_count else None
        values = nulls_under_null_parents(array.values)
        return type(array).from_arrays(array.offsets, values, type=kind, mask=mask)
    if pa.types.is_fixed_size_list(kind):
        mask = array.is_null() if array.null_count else None
        size = kind.list_size
        values = nulls_under_null_parents(array.values.slice(array.offset * size, len(array) * size))
        return pa.FixedSizeListArray.from_arrays(values, type=kind, mask=mask)
    if pa.types.is_map(kind):
        mask = array.is_null() if array.null_count else None
        entries = nulls_under_null_parents(array.values)
        return pa.MapArray.from_arrays(
            array.offsets, entries.field(0), entries.field(1), type=kind, mask=mask
        )
    return array


@st.composite
def tables(draw: st.DrawFn, schema: pa.Schema, *, max_rows: int = 12) -> pa.Table:
    """A table of ``schema`` with up to ``max_rows`` rows; the slots null structs hide hold values (as
    pyarrow builds them) or nulls (as dsm's JSONL reader does)."""
    rows = draw(st.integers(0, max_rows))
    columns = [
        _array(f.type, draw(st.lists(values_of(f.type, f.nullable), min_size=rows, max_size=rows)))
        for f in schema
    ]
    if draw(st.booleans()):
        columns = [nulls_under_null_parents(c) for c in columns]
    return pa.Table.from_arrays(columns, schema=schema)
