"""Type names round-trip for every type pyarrow produces: ``parse_type(type_name(t)) == t``, names and
nullability of nested fields included (a property over generated types, and the spellings pyarrow and
Parquet readers print)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.arrow_types import MAX_TYPE_DEPTH, parse_type, type_name
from dsm.contract import Schema
from dsm.errors import SchemaError
from tests.strategies import FIELD_NAMES, arrow_types


def _structure(kind: pa.DataType) -> object:
    """Everything that identifies a type, nested field names and nullability included, except the name
    of a map's entries struct (which Arrow's equality ignores too): an independent check of the names."""
    if pa.types.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        return ("struct", tuple((f.name, f.nullable, _structure(f.type)) for f in fields))
    if pa.types.is_map(kind):
        key, item = kind.key_field, kind.item_field
        return (
            "map",
            key.name,
            _structure(key.type),
            item.name,
            item.nullable,
            _structure(item.type),
            kind.keys_sorted,
        )
    if pa.types.is_dictionary(kind):
        return ("dictionary", str(kind.index_type), _structure(kind.value_type), kind.ordered)
    if kind.num_fields == 1:  # the list kinds
        field = kind.value_field
        size = kind.list_size if pa.types.is_fixed_size_list(kind) else None
        return (type(kind).__name__, size, field.name, field.nullable, _structure(field.type))
    return str(kind)


@settings(max_examples=300, deadline=None)
@given(arrow_types(max_leaves=8, negative_scales=True))
def test_every_generated_type_name_reads_back_as_the_same_type(kind: pa.DataType) -> None:
    text = type_name(kind)
    back = parse_type(text)
    assert back == kind
    assert _structure(back) == _structure(kind), text
    assert type_name(back) == text


@settings(max_examples=100, deadline=None)
@given(st.lists(FIELD_NAMES, min_size=1, max_size=4, unique=True))
def test_any_field_name_survives_a_contract(names: list[str]) -> None:
    kind = pa.struct([pa.field(name, pa.int64()) for name in names])
    schema = Schema.from_arrow(pa.schema([pa.field("s", kind)]))
    assert schema.to_arrow().field("s").type.names == names


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # pyarrow's spelling of a map read from Parquet (the entries struct named after the column):
        ("map<string, int64 ('mp')>", pa.map_(pa.string(), pa.field("mp", pa.int64()))),
        (
            "map<string ('k'), int64 ('v'), keys_sorted ('c')>",
            pa.map_(pa.field("k", pa.string(), False), pa.field("v", pa.int64()), True),
        ),
        ("struct<: int64>", pa.struct([pa.field("", pa.int64())])),
        ("decimal(10, 2)", pa.decimal128(10, 2)),
        ("date32", pa.date32()),
    ],
)
def test_pyarrow_spellings_are_read(text: str, expected: pa.DataType) -> None:
    assert parse_type(text) == expected


def test_a_map_read_from_parquet_registers_and_reads_back() -> None:
    """The issue's case: Parquet maps print as ``map<string, int64 ('mp')>``, which no contract could read."""
    buffer = io.BytesIO()
    pq.write_table(pa.table({"mp": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))}), buffer)
    stored = pq.read_schema(io.BytesIO(buffer.getvalue()))
    assert "('mp')" in str(stored.field("mp").type)
    schema = Schema.from_arrow(stored)
    assert schema.to_arrow().equals(stored)


@pytest.mark.parametrize(
    "kind",
    [
        pa.struct([pa.field("a: b", pa.int64())]),
        pa.struct([pa.field("x, y", pa.int64()), pa.field(" lead", pa.string())]),
        pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)),
    ],
)
def test_names_pyarrow_prints_ambiguously_round_trip(kind: pa.DataType) -> None:
    assert parse_type(type_name(kind)) == kind
    assert _structure(parse_type(type_name(kind))) == _structure(kind)


def test_types_without_a_name_are_refused_cleanly() -> None:
    for kind in (
        pa.uuid(),
        pa.sparse_union([pa.field("a", pa.int8())]),
        pa.run_end_encoded(pa.int32(), pa.int8()),
    ):
        with pytest.raises(SchemaError, match="no name"):
            type_name(kind)


def test_nesting_is_bounded() -> None:
    deep = "list<item: " * (MAX_TYPE_DEPTH + 2) + "int8" + ">" * (MAX_TYPE_DEPTH + 2)
    with pytest.raises(SchemaError, match="deeper"):
        parse_type(deep)
    huge = "list<item: " * 100_000 + "int8" + ">" * 100_000  # no RecursionError, no traceback
    with pytest.raises(SchemaError):
        parse_type(huge)
