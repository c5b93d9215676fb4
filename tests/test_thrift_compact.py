"""Thrift's compact protocol (``dsm.formats._thrift``): generated struct trees encode and decode back to
themselves, bytes the spec spells out come out as spelled, the footers, page headers, page indexes and
Bloom filter headers that real writers (pyarrow with odd options, DuckDB, Polars, pandas) put in Parquet
files decode and encode back to the very same bytes, and bytes that are not a struct are a ThriftError."""

from __future__ import annotations

import io
import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsm.formats import _thrift
from dsm.formats._thrift import (
    BINARY,
    BOOL,
    DOUBLE,
    I8,
    I16,
    I32,
    I64,
    LIST,
    STRUCT,
    Field,
    Items,
    ThriftError,
    decode_struct,
    encode_struct,
    field,
    value_of,
    without,
)

SET, MAP = _thrift.SET, _thrift.MAP
assert (SET, MAP) == (10, 11)

_SCALARS = (BOOL, I8, I16, I32, I64, DOUBLE, BINARY)
_NESTED = (LIST, SET, MAP, STRUCT)
_SCALAR_VALUES: dict[int, st.SearchStrategy[Any]] = {
    BOOL: st.booleans(),
    I8: st.integers(-(2**7), 2**7 - 1),
    I16: st.integers(-(2**15), 2**15 - 1),
    I32: st.integers(-(2**31), 2**31 - 1),
    I64: st.one_of(
        st.sampled_from([-(2**63), 2**63 - 1, -(2**62) - 1, 2**62, -1, 0]),
        st.integers(-(2**63), 2**63 - 1),
    ),
    DOUBLE: st.floats(allow_nan=False),
    BINARY: st.binary(max_size=40),
}
_GAPS = st.one_of(st.integers(1, 15), st.integers(16, 2000))
"""Field id steps: small ones take the one-byte field header, large ones the zigzag id after it."""


def _types(depth: int) -> st.SearchStrategy[int]:
    return st.sampled_from(_SCALARS + (_NESTED if depth > 0 else ()))


def _values(type_: int, depth: int) -> st.SearchStrategy[Any]:
    if type_ in _SCALAR_VALUES:
        return _SCALAR_VALUES[type_]
    if type_ == STRUCT:
        return _structs(depth - 1)
    if type_ in (LIST, SET):
        # more than 14 elements take the long list header
        return _types(depth - 1).flatmap(
            lambda elem: st.lists(_values(elem, depth - 1), max_size=20 if elem in _SCALARS else 3).map(
                lambda values: Items(type_, elem, values)
            )
        )
    assert type_ == MAP
    # An empty map has no key and value types on the wire: it decodes as Items(MAP, 0, [], key_type=0).
    pairs = st.tuples(_types(depth - 1), _types(depth - 1)).flatmap(
        lambda kv: st.lists(
            st.tuples(_values(kv[0], depth - 1), _values(kv[1], depth - 1)), min_size=1, max_size=4
        ).map(lambda values: Items(MAP, kv[1], values, key_type=kv[0]))
    )
    return st.one_of(st.just(Items(MAP, 0, [])), pairs)


def _build(first: int, drawn: list[tuple[int, tuple[int, Any]]]) -> list[Field]:
    fields, id_ = [], first
    for gap, (type_, value) in drawn:
        id_ += gap
        fields.append(Field(id_, type_, value))
    return fields


def _structs(depth: int) -> st.SearchStrategy[list[Field]]:
    typed = _types(depth).flatmap(lambda t: st.tuples(st.just(t), _values(t, depth)))
    # ids start anywhere from -20 (a negative or zero id takes the long header too) and increase
    return st.builds(_build, st.integers(-20, 20), st.lists(st.tuples(_GAPS, typed), max_size=7))


STRUCT_TREES = _structs(3)

_EVERY_KIND = [
    Field(1, BOOL, True),
    Field(2, BOOL, False),
    Field(3, I8, -128),
    Field(4, I16, -(2**15)),
    Field(5, I32, 2**31 - 1),
    Field(20, I64, -(2**63)),
    Field(21, I64, 2**63 - 1),
    Field(22, DOUBLE, -0.5),
    Field(100, BINARY, b""),
    Field(101, LIST, Items(LIST, BOOL, [True, False] * 9)),
    Field(102, LIST, Items(LIST, STRUCT, [[Field(1, I32, 1)], [], [Field(300, BOOL, False)]])),
    Field(103, SET, Items(SET, I64, [-1, 2**40])),
    Field(104, MAP, Items(MAP, LIST, [(b"k", Items(LIST, I8, [1, -1]))], key_type=BINARY)),
    Field(105, MAP, Items(MAP, 0, [])),
    Field(106, STRUCT, [Field(-3, BINARY, b"neg"), Field(0, STRUCT, [])]),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=STRUCT_TREES, prefix=st.binary(max_size=4))
@example(tree=_EVERY_KIND, prefix=b"")
@example(tree=[], prefix=b"PAR1")
def test_a_struct_tree_decodes_from_its_encoding(tree: list[Field], prefix: bytes) -> None:
    encoded = encode_struct(tree)
    assert decode_struct(encoded) == (tree, len(encoded))
    # from a position inside other bytes (a page header inside a column chunk), and from a bytearray
    assert decode_struct(prefix + encoded + b"\x99", len(prefix)) == (tree, len(prefix) + len(encoded))
    assert decode_struct(bytearray(encoded)) == (tree, len(encoded))
    assert decode_struct(memoryview(b"\x00" + encoded)[1:]) == (tree, len(encoded))
    # up to a field: those before it, read in order (field ids ascend in what Parquet writers encode)
    for until in {item.id for item in tree} | {1 << 20}:
        fields, _ = decode_struct(encoded, until=until)
        head = list(itertools.takewhile(lambda item, until=until: item.id < until, tree))
        assert fields == head


# Bytes as the compact protocol's specification spells them (thrift/doc/specs/thrift-compact-protocol.md):
# field header (delta << 4) | type, or type then zigzag varint id; zigzag varints for integers; booleans in
# the header's type (1 true, 2 false) and one byte in a list; list header (size << 4) | element type, or
# 0xF0 | type then a varint size; map: varint size, then (key type << 4) | value type; doubles little-endian.
KNOWN = [
    ([Field(1, I32, 7), Field(3, BINARY, b"x")], "15 0e 28 01 78 00"),
    ([Field(1, BOOL, True), Field(2, BOOL, False)], "11 12 00"),
    ([Field(15, I8, -1), Field(16, I16, -2)], "f3 ff 14 03 00"),
    ([Field(1, I16, 1), Field(17, I16, 1)], "14 02 04 22 02 00"),
    ([Field(100, I64, -1)], "06 c8 01 01 00"),
    ([Field(5, I64, 1), Field(3, I64, 64)], "56 02 06 06 80 01 00"),
    ([Field(1, I64, -(2**63))], "16 ff ff ff ff ff ff ff ff ff 01 00"),
    ([Field(1, DOUBLE, 1.0)], "17 00 00 00 00 00 00 f0 3f 00"),
    ([Field(1, LIST, Items(LIST, BOOL, [True, False]))], "19 21 01 02 00"),
    ([Field(1, LIST, Items(LIST, I32, [0] * 15))], "19 f5 0f" + " 00" * 15 + " 00"),
    ([Field(2, SET, Items(SET, BINARY, [b"ab"]))], "2a 18 02 61 62 00"),
    ([Field(1, MAP, Items(MAP, I32, [(b"a", 1)], key_type=BINARY))], "1b 01 85 01 61 02 00"),
    ([Field(1, MAP, Items(MAP, 0, []))], "1b 00 00"),
    ([Field(1, STRUCT, [Field(1, I32, 1)]), Field(2, I32, 2)], "1c 15 02 00 15 04 00"),
    ([Field(1, LIST, Items(LIST, STRUCT, [[], [Field(2, BOOL, True)]]))], "19 2c 00 21 00 00"),
]


@pytest.mark.parametrize(("tree", "spelled"), KNOWN)
def test_the_bytes_are_those_the_specification_spells(tree: list[Field], spelled: str) -> None:
    expected = bytes.fromhex(spelled)
    assert encode_struct(tree) == expected
    assert decode_struct(expected) == (tree, len(expected))


def test_the_helpers_find_and_drop_fields() -> None:
    tree = [Field(1, I32, 7), Field(4, BOOL, False), Field(9, BINARY, b"x")]
    assert field(tree, 4) == Field(4, BOOL, False)
    assert field(tree, 2) is None
    assert value_of(tree, 9) == b"x"
    assert value_of(tree, 4, True) is False  # a false value is not the default
    assert value_of(tree, 2, "none") == "none"
    assert without(tree, 1, 9, 11) == [Field(4, BOOL, False)]
    assert tree == [Field(1, I32, 7), Field(4, BOOL, False), Field(9, BINARY, b"x")]  # not changed


def test_a_boolean_list_element_other_than_one_is_false_and_a_long_list_header_is_read() -> None:
    # a list of three booleans: 1 is true, and (read leniently) anything else false
    assert decode_struct(bytes.fromhex("19 31 01 02 00 00")) == (
        [Field(1, LIST, Items(LIST, BOOL, [True, False, False]))],
        6,
    )
    # a short list may also be written with the long header (size 2 as a varint)
    assert decode_struct(bytes.fromhex("19 f5 02 02 04 00"))[0] == [Field(1, LIST, Items(LIST, I32, [1, 2]))]


# ------------------------------------------------------------------------------------- not a struct


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=STRUCT_TREES.filter(lambda t: len(encode_struct(t)) > 1))
def test_every_truncation_of_an_encoding_is_a_thrift_error(tree: list[Field]) -> None:
    encoded = encode_struct(tree)
    for cut in range(len(encoded)):
        with pytest.raises(ThriftError):
            decode_struct(encoded[:cut])
        with pytest.raises(ThriftError):
            decode_struct(b"PAR1" + encoded[:cut], 4)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=64))
@example(data=b"")
@example(data=b"\x1d\x00")  # field of type 13: not a compact type
@example(data=b"\x19\x1d\x00")  # a list of type 13
@example(data=b"\x1b\x01\xd5\x00")  # a map whose key type is 13
@example(data=b"\x10\x00")  # field of type 0 (stop) with an id
@example(data=b"\x18\xff\xff\xff\xff\x0f")  # a binary longer than the bytes
@example(data=b"\x19\xf5\xff\xff\xff\xff\xff\xff\xff\xff\x7f")  # a list of 2**63 - 1 elements
@example(data=b"\x1b\xff\xff\xff\xff\x0f\x55")  # a map of 2**32 - 1 pairs
@example(data=b"\x16" + b"\xff" * 12)  # a varint that does not end
@example(data=b"\x1c" * 80)  # structs nested deeper than any footer
@example(data=b"\x19" * 70 + b"\x15\x02")  # lists of lists, deeper
def test_bytes_that_are_not_a_struct_are_a_thrift_error(data: bytes) -> None:
    try:
        tree, end = decode_struct(data)
    except ThriftError:
        return
    assert 0 < end <= len(data)
    assert data[end - 1] == 0  # the struct's stop byte
    assert isinstance(tree, list) and all(isinstance(item, Field) for item in tree)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=STRUCT_TREES, data=st.data())
def test_damaged_encodings_decode_or_are_a_thrift_error(tree: list[Field], data: st.DataObject) -> None:
    damaged = bytearray(encode_struct(tree))
    for _ in range(data.draw(st.integers(1, 4))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    try:
        _, end = decode_struct(bytes(damaged))
    except ThriftError:
        return
    assert 0 < end <= len(damaged)


def test_deep_nesting_is_a_thrift_error_not_a_recursion_error() -> None:
    for deep in (b"\x1c" * 5000, b"\x19" * 5000, b"\x1b\x01\xcc" * 3000):
        with pytest.raises(ThriftError, match="deep"):
            decode_struct(deep)


def test_an_unknown_type_does_not_encode() -> None:
    with pytest.raises(ThriftError):
        encode_struct([Field(1, 13, b"")])
    with pytest.raises(ThriftError):
        encode_struct([Field(1, LIST, Items(LIST, 14, [1]))])


@pytest.mark.parametrize(
    "spelled", ["19 12 01 00", "1a 22 01 02 00", "1b 01 12 01 02 00", "1b 01 21 02 01 00"]
)
def test_booleans_typed_two_in_a_collection_encode_again(spelled: str) -> None:
    data = bytes.fromhex(spelled)
    tree, end = decode_struct(data)
    assert end == len(data)
    assert encode_struct(tree) == data


# --------------------------------------------------------------------------------- real Parquet files


def _same_again(data: bytes, start: int) -> tuple[list[Field], int]:
    """The struct at ``start`` of ``data``, checked to encode back to the very bytes it was read from."""
    tree, end = decode_struct(data, start)
    assert encode_struct(tree) == data[start:end], f"the struct at {start} does not encode to its bytes"
    return tree, end


def _structs_of_file(data: bytes) -> dict[str, int]:
    """Every thrift struct of a Parquet file checked to round-trip byte for byte: the footer, each page
    header of each column chunk (the first at offset 4), and the page indexes and Bloom filter headers the
    footer points at. Counted by kind."""
    assert data[:4] == data[-4:] == b"PAR1"
    length = int.from_bytes(data[-8:-4], "little")
    footer, end = _same_again(data, len(data) - 8 - length)
    assert end == len(data) - 8
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    assert value_of(footer, 3) == metadata.num_rows
    groups = value_of(footer, 4).values
    assert len(groups) == metadata.num_row_groups
    counts = {"footer": 1, "page": 0, "column index": 0, "offset index": 0, "bloom filter": 0}
    _, first_end = _same_again(data, 4)  # the first page header, right after the magic
    assert first_end > 4
    for g, group in enumerate(groups):
        assert value_of(group, 3) == metadata.row_group(g).num_rows
        for c, chunk in enumerate(value_of(group, 1).values):
            meta = value_of(chunk, 3)
            theirs = metadata.row_group(g).column(c)
            assert value_of(meta, 9) == theirs.data_page_offset
            assert value_of(meta, 7) == theirs.total_compressed_size
            start = min(value_of(meta, 11) or value_of(meta, 9), value_of(meta, 9))
            position, stop = start, start + value_of(meta, 7)
            while position < stop:
                header, body = _same_again(data, position)
                position = body + value_of(header, 3)
                counts["page"] += 1
            assert position == stop
            for kind, offset_id in (("offset index", 4), ("column index", 6)):
                if value_of(chunk, offset_id) is not None:
                    _, end = _same_again(data, value_of(chunk, offset_id))
                    assert end - value_of(chunk, offset_id) == value_of(chunk, offset_id + 1)
                    counts[kind] += 1
            if value_of(meta, 14) is not None:
                _same_again(data, value_of(meta, 14))
                counts["bloom filter"] += 1
    return counts


def _nested_table(rows: int = 300) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "small": pa.array([i % 100 - 50 for i in range(rows)], pa.int8()),
            "flag": pa.array([None if i % 7 == 0 else i % 3 == 0 for i in range(rows)], pa.bool_()),
            "score": pa.array([i / 7 if i % 11 else None for i in range(rows)], pa.float64()),
            "name": pa.array([f"name {i % 37} é" if i % 5 else None for i in range(rows)]),
            "blob": pa.array([bytes([i % 256]) * (i % 9) for i in range(rows)], pa.binary()),
            "ts": pa.array([1_700_000_000_000_000 + i for i in range(rows)], pa.timestamp("us", "UTC")),
            "dec": pa.array([Decimal(i * 101).scaleb(-2) for i in range(rows)], pa.decimal128(12, 2)),
            "nums": pa.array(
                [[j for j in range(i % 4)] if i % 6 else None for i in range(rows)], pa.list_(pa.int32())
            ),
            "point": pa.array(
                [{"x": i, "y": None if i % 2 else f"y{i}"} for i in range(rows)],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
            "tags": pa.array(
                [[(f"k{j}", j * i) for j in range(i % 3)] for i in range(rows)],
                pa.map_(pa.string(), pa.int64()),
            ),
            "deep": pa.array(
                [[{"a": [i, None], "b": {"c": True}}] if i % 4 else [] for i in range(rows)],
                pa.list_(pa.struct([("a", pa.list_(pa.int16())), ("b", pa.struct([("c", pa.bool_())]))])),
            ),
        }
    )


PYARROW_OPTIONS = {
    "defaults": {},
    "v2 pages": {"data_page_version": "2.0", "compression": "zstd"},
    "plain": {"use_dictionary": False, "compression": "gzip"},
    "no statistics": {"write_statistics": False, "compression": "none"},
    "page index": {"write_page_index": True, "compression": "snappy", "data_page_size": 200},
    "checksums": {"write_page_checksum": True, "data_page_version": "2.0", "compression": "zstd"},
    "everything": {
        "data_page_version": "2.0",
        "use_dictionary": ["name"],
        "write_page_index": True,
        "write_page_checksum": True,
        "compression": {"id": "zstd", "name": "gzip", "blob": "none"},
        "row_group_size": 70,
        "max_rows_per_page": 16,
        "sorting_columns": [pq.SortingColumn(0)],
        "store_decimal_as_integer": True,
    },
    "bloom filters": {"bloom_filter_options": {"id": {"ndv": 300, "fpp": 0.05}, "name": True}},
    "old format": {"version": "1.0", "use_compliant_nested_type": False, "compression": "snappy"},
}


def _pyarrow_file(options: dict[str, Any]) -> bytes:
    sink = io.BytesIO()
    try:
        pq.write_table(_nested_table(), sink, **options)
    except TypeError as exc:  # an option this pyarrow does not know (Bloom filters came in pyarrow 22)
        pytest.skip(f"pyarrow {pa.__version__}: {exc}")
    return sink.getvalue()


@pytest.mark.parametrize("name", list(PYARROW_OPTIONS))
def test_pyarrow_files_round_trip_byte_for_byte(name: str) -> None:
    options = PYARROW_OPTIONS[name]
    counts = _structs_of_file(_pyarrow_file(options))
    assert counts["page"] >= 12
    if options.get("write_page_index"):
        assert counts["column index"] and counts["offset index"]
    if "bloom_filter_options" in options:
        assert counts["bloom filter"] >= 1
    if options.get("write_page_checksum"):  # page headers with their CRC (field 4) decode as such
        data = _pyarrow_file(options)
        header, _ = decode_struct(data, 4)
        assert isinstance(value_of(header, 4), int)


def _duckdb_file(path: Path, options: str) -> bytes:
    con = duckdb.connect()
    try:
        con.execute(
            f"""COPY (
                SELECT i AS id, (i % 100)::TINYINT AS small, i % 3 = 0 AS flag,
                       CASE WHEN i % 11 = 0 THEN NULL ELSE i / 7 END AS score,
                       CASE WHEN i % 5 = 0 THEN NULL ELSE 'name ' || (i % 37) END AS name,
                       [j FOR j IN range(i % 4)] AS nums,
                       {{'x': i, 'y': CASE WHEN i % 2 = 0 THEN 'y' || i END}} AS point,
                       MAP {{'k': i}} AS tags,
                       [{{'a': [i, NULL], 'b': {{'c': true}}}}] AS deep,
                       (i * 1.01)::DECIMAL(12, 2) AS dec,
                       TIMESTAMP '2024-01-01' + INTERVAL (i) SECOND AS ts
                FROM range(5000) t(i)
            ) TO '{path}' ({options})"""
        )
    finally:
        con.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "options",
    [
        "FORMAT parquet",
        "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 2048",
        "FORMAT parquet, COMPRESSION uncompressed, PARQUET_VERSION v2, ROW_GROUP_SIZE 2048",
        "FORMAT parquet, COMPRESSION gzip, DICTIONARY_COMPRESSION_RATIO_THRESHOLD 0",
    ],
)
def test_duckdb_files_round_trip_byte_for_byte(tmp_path: Path, options: str) -> None:
    try:
        data = _duckdb_file(tmp_path / "d.parquet", options)
    except duckdb.Error as exc:  # an option this DuckDB does not know
        if "PARQUET_VERSION" in options or "DICTIONARY_COMPRESSION" in options:
            pytest.skip(f"duckdb {duckdb.__version__}: {exc}")
        raise
    counts = _structs_of_file(data)
    assert counts["page"] >= 11


@pytest.mark.parametrize("compression", ["zstd", "snappy", "uncompressed", "gzip"])
def test_polars_files_round_trip_byte_for_byte(tmp_path: Path, compression: str) -> None:
    pl = pytest.importorskip("polars")
    frame = pl.from_arrow(_nested_table())
    path = tmp_path / "p.parquet"
    frame.write_parquet(path, compression=compression, row_group_size=64, statistics=compression != "gzip")
    assert _structs_of_file(path.read_bytes())["page"] >= 12


def test_pandas_files_round_trip_byte_for_byte() -> None:
    pytest.importorskip("pandas")
    frame = _nested_table().select(["id", "small", "score", "name", "ts"]).to_pandas()
    sink = io.BytesIO()
    frame.to_parquet(sink, compression="snappy", row_group_size=50)
    assert _structs_of_file(sink.getvalue())["page"] >= 5


def test_a_footer_edited_through_the_tree_is_what_pyarrow_reads() -> None:
    """An edit keeps every other field as it was: the row count changed in the tree is the one pyarrow
    reads, and every other byte of the footer is as written."""
    data = _pyarrow_file({"compression": "none"})
    length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - length
    footer, _ = decode_struct(data, start)
    edited = [Field(3, I64, 299) if item.id == 3 else item for item in footer]
    encoded = encode_struct(edited)
    assert len(encoded) == length  # 300 and 299 take as many varint bytes
    assert sum(a != b for a, b in zip(encoded, data[start:], strict=False)) == 1
    changed = data[:start] + encoded + data[start + length :]
    assert pq.ParquetFile(io.BytesIO(changed)).metadata.num_rows == 299
