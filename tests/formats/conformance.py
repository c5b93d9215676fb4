"""The conformance suite every format passes, mixed into one test class per format (fsspec tests/abstract).

A format's test module defines ``class TestX(FormatConformance)`` with ``format_name``, the names of the
``TYPE_CASES`` it holds (``supported``) and optionally ``prepare`` (to add columns a format requires).
Values are compared exactly: NaN equals NaN, -0.0 differs from 0.0, timestamps by their integer value.
"""

from __future__ import annotations

import datetime
import io
import math
import os
import struct
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError, InputError, SchemaError
from dsm.formats import Format, get_format
from dsm.hashing.fingerprint import digest_batches

__all__ = ["TYPE_CASES", "FormatConformance", "NonSeekableSink", "assert_same_rows", "comparable_rows"]

_INT_BOUNDS = {
    "int8": (pa.int8(), -(2**7), 2**7 - 1),
    "int16": (pa.int16(), -(2**15), 2**15 - 1),
    "int32": (pa.int32(), -(2**31), 2**31 - 1),
    "int64": (pa.int64(), -(2**63), 2**63 - 1),
    "uint8": (pa.uint8(), 0, 2**8 - 1),
    "uint16": (pa.uint16(), 0, 2**16 - 1),
    "uint32": (pa.uint32(), 0, 2**32 - 1),
    "uint64": (pa.uint64(), 0, 2**64 - 1),
}
_FLOATS = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    0.0,
    0.1,
    1.0,
    -2.5,
    5e-324,
    1.7976931348623157e308,
    1e-7,
]
_FLOAT32S = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    0.1,
    3.4028234663852886e38,
    1.401298464324817e-45,
]
_STRINGS = [
    "",
    "plain",
    "🦀 emoji 👩‍👩‍👧",
    "漢字とかな",
    "שלום עולם",
    'q"uo\\te, comma;\ttab\nnew\r\nline',
    "\x00\x01\x1f\x7f",
    " ",
]
_BYTES = [b"", b"\x00\xff", bytes(range(256)), b"plain", b'"\n,']
_TS = [0, 1, -1, 1_700_000_000_123_456_789, -2_208_988_800_000_000_000]  # in ns; scaled per unit


def _timestamps(unit: str, tz: str | None) -> tuple[pa.DataType, list[Any]]:
    scale = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    return pa.timestamp(unit, tz), [v // scale for v in _TS]


def _cases() -> dict[str, tuple[pa.DataType, list[Any]]]:
    cases: dict[str, tuple[pa.DataType, list[Any]]] = {
        name: (type_, [low, high, 0, 1]) for name, (type_, low, high) in _INT_BOUNDS.items()
    }
    cases["float64"] = (pa.float64(), _FLOATS)
    cases["float32"] = (pa.float32(), _FLOAT32S)
    cases["float16"] = (pa.float16(), [0.5, float("nan"), -0.0, 65504.0])
    cases["bool"] = (pa.bool_(), [True, False])
    cases["string"] = (pa.string(), _STRINGS)
    cases["large_string"] = (pa.large_string(), _STRINGS)
    cases["binary"] = (pa.binary(), _BYTES)
    cases["large_binary"] = (pa.large_binary(), _BYTES)
    cases["date32"] = (
        pa.date32(),
        [datetime.date(2024, 2, 29), datetime.date(1900, 1, 1), datetime.date(1970, 1, 1)],
    )
    for unit in ("s", "ms", "us", "ns"):
        cases[f"timestamp_{unit}"] = _timestamps(unit, None)
        cases[f"timestamp_{unit}_utc"] = _timestamps(unit, "UTC")
    cases["timestamp_ns_kolkata"] = _timestamps("ns", "Asia/Kolkata")
    cases["decimal128"] = (
        pa.decimal128(38, 10),
        [Decimal("0"), Decimal("-1.5"), Decimal("1234567890123456789012345678.0123456789")],
    )
    cases["decimal256"] = (pa.decimal256(50, 3), [Decimal("-0.001"), Decimal("1" * 47 + ".125")])
    cases["fixed_size_binary"] = (pa.binary(3), [b"abc", b"\x00\x00\x00"])
    cases["time64"] = (pa.time64("us"), [0, 1])
    cases["duration"] = (pa.duration("s"), [0, 1])
    cases["list"] = (pa.list_(pa.int64()), [[], [1, None, 3], [2**63 - 1]])
    cases["large_list"] = (pa.large_list(pa.string()), [[], ["a", None, "🦀"]])
    cases["fixed_size_list"] = (pa.list_(pa.float32(), 2), [[0.5, -0.0], [float("nan"), 1.0]])
    cases["list_of_floats"] = (pa.list_(pa.float64()), [[float("nan"), float("-inf"), -0.0, 0.1]])
    cases["list_of_binary"] = (pa.list_(pa.binary()), [[b"\x00", b""], []])
    cases["struct"] = (
        pa.struct([("a", pa.int64()), ("b", pa.string()), ("t", pa.timestamp("ns", "UTC"))]),
        [{"a": 1, "b": "x", "t": 5}, {"a": None, "b": None, "t": None}],
    )
    cases["map"] = (pa.map_(pa.string(), pa.int64()), [[("a", 1), ("b", None)], [], [("a", 2), ("a", 3)]])
    cases["dictionary"] = (pa.dictionary(pa.int32(), pa.string()), ["x", "y", "x"])
    # Types some formats store as another type (docs/formats.md, "Which types each format holds"):
    cases["date64"] = (pa.date64(), [datetime.date(2024, 2, 29), datetime.date(1900, 1, 1)])
    cases["time32_s"] = (pa.time32("s"), [0, 1, 86_399])
    cases["timestamp_s_kolkata"] = _timestamps("s", "Asia/Kolkata")
    cases["decimal32"] = (pa.decimal32(7, 2), [Decimal("-12345.67"), Decimal("0.01")])
    cases["decimal64"] = (pa.decimal64(18, 4), [Decimal("12345678901234.5678"), Decimal("-1")])
    cases["dictionary_int8_large_string"] = (pa.dictionary(pa.int8(), pa.large_string()), ["x", "y", "x"])
    cases["dictionary_of_ints"] = (pa.dictionary(pa.int16(), pa.int64()), [7, -1, 7])
    cases["dictionary_null_value"] = (pa.dictionary(pa.int32(), pa.string()), [])  # built by column()
    cases["string_view"] = (pa.string_view(), _STRINGS)
    cases["struct_of_non_null_list"] = (
        pa.struct([pa.field("l", pa.list_(pa.int64()), nullable=False)]),
        [{"l": [1, 2]}, {"l": []}],
    )
    cases["map_non_null_values"] = (
        pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)),
        [[("a", 1)], [], [("b", 2), ("a", 3)]],
    )
    return cases


TYPE_CASES = _cases()
"""name -> (type, values); every column also gets a null."""

FILLABLE = [name for name in TYPE_CASES if TYPE_CASES[name][1] or name == "dictionary_null_value"]


def column(name: str, rows: int) -> pa.Array:
    """``rows`` values of the case ``name``: its values cycled, every fourth one null."""
    type_, values = TYPE_CASES[name]
    if name == "dictionary_null_value":
        # A null among the dictionary's values (pyarrow's Parquet writer cannot write it as it is).
        indices = pa.array([None if i % 4 == 3 else i % 3 for i in range(rows)], pa.int32())
        return pa.DictionaryArray.from_arrays(indices, pa.array(["x", None, "y"]))
    picked = [None if i % 4 == 3 else values[i % len(values)] for i in range(rows)]
    if pa.types.is_dictionary(type_):
        return pa.array(picked, type=type_.value_type).dictionary_encode().cast(type_)
    if pa.types.is_float16(type_):
        halves = np.array([0.0 if v is None else v for v in picked], dtype=np.float16)
        return pa.array(halves, mask=np.array([v is None for v in picked], dtype=bool), type=type_)
    return pa.array(picked, type=type_)


def _comparable_type(type_: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(type_):
        return pa.int64()
    if pa.types.is_dictionary(type_):
        return _comparable_type(type_.value_type)
    if pa.types.is_string_view(type_):
        return pa.string()
    if pa.types.is_list(type_):
        return pa.list_(pa.field(type_.value_field.name, _comparable_type(type_.value_type)))
    if pa.types.is_large_list(type_):
        return pa.large_list(pa.field(type_.value_field.name, _comparable_type(type_.value_type)))
    if pa.types.is_fixed_size_list(type_):
        return pa.list_(pa.field(type_.value_field.name, _comparable_type(type_.value_type)), type_.list_size)
    if pa.types.is_struct(type_):
        return pa.struct([pa.field(f.name, _comparable_type(f.type), f.nullable) for f in type_])
    if pa.types.is_map(type_):
        return pa.map_(_comparable_type(type_.key_type), _comparable_type(type_.item_type))
    return type_


def _exact(value: Any) -> Any:
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else ("float", struct.pack("<d", value))
    if isinstance(value, dict):
        return tuple((k, _exact(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_exact(v) for v in value)
    return value


def _comparable_values(column: pa.ChunkedArray) -> list[Any]:
    target = _comparable_type(column.type)
    if str(target) == str(column.type):
        return column.to_pylist()  # type: ignore[no-any-return]
    try:
        return column.cast(target).to_pylist()  # type: ignore[no-any-return]
    except (pa.ArrowInvalid, pa.ArrowIndexError):
        # Arrow cannot cast a struct whose non-nullable fields hold nulls under its own nulls.
        return column.to_pylist()  # type: ignore[no-any-return]


def comparable_rows(table: pa.Table) -> list[Any]:
    """Rows as exact, hashable Python values (floats by bits, timestamps as integers)."""
    columns = [_comparable_values(c) for c in table.columns]
    return [_exact(dict(zip(table.schema.names, row, strict=True))) for row in zip(*columns, strict=True)]


def assert_same_rows(actual: pa.Table, expected: pa.Table) -> None:
    """Same schema and the same rows in the same order, compared exactly."""
    assert actual.schema.equals(expected.schema, check_metadata=False), (
        f"\n{actual.schema}\n!=\n{expected.schema}"
    )
    assert actual.num_rows == expected.num_rows
    for index, (got, want) in enumerate(zip(comparable_rows(actual), comparable_rows(expected), strict=True)):
        assert got == want, f"row {index}: {got!r} != {want!r}"


class NonSeekableSink:
    """A write-only sink like an object-store upload: no seek, no tell, no read."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()

    def write(self, data: Any) -> int:
        return self.buffer.write(data)

    def flush(self) -> None:
        pass

    def seekable(self) -> bool:
        return False


class FormatConformance:
    """Mixed into ``TestX`` classes; ``supported`` names the ``TYPE_CASES`` the format holds."""

    format_name: ClassVar[str]
    supported: ClassVar[frozenset[str]]
    options: ClassVar[dict[str, Any]] = {}
    suffix: ClassVar[str] = ""
    large_value_type: ClassVar[pa.DataType] = pa.string()

    # --------------------------------------------------------------------------------------- helpers

    def make_format(self) -> Format:
        return get_format(self.format_name, **self.options)

    def prepare(self, table: pa.Table) -> pa.Table:
        """The table this format stores for ``table`` (a format may add a column it requires)."""
        return table

    def table_of(self, names: Sequence[str], rows: int = 8) -> pa.Table:
        return self.prepare(pa.table({name: column(name, rows) for name in names}))

    def write(self, path: Path, table: pa.Table, batches: Sequence[pa.RecordBatch] | None = None) -> Path:
        fmt = self.make_format()
        with open(path, "wb") as handle, fmt.open_writer(handle, table.schema) as writer:
            for batch in table.to_batches() if batches is None else batches:
                writer.write_batch(batch)
        return path

    def read(self, path: Path, schema: pa.Schema | None, **kwargs: Any) -> pa.Table:
        fmt = self.make_format()
        with open(path, "rb") as handle:
            batches = list(fmt.iter_batches(handle, shard=path.name, schema=schema, **kwargs))
        if schema is None:
            return pa.Table.from_batches(batches)
        if kwargs.get("columns") is not None:
            schema = pa.schema([schema.field(c) for c in kwargs["columns"]])
        return pa.Table.from_batches(batches, schema=schema)

    def shard_path(self, tmp_path: Path, stem: str = "part-00000") -> Path:
        return tmp_path / f"{stem}{self.suffix or self.make_format().extensions[0]}"

    def round_trip(self, tmp_path: Path, table: pa.Table, **kwargs: Any) -> pa.Table:
        """Write ``table``, read it back with the schema the format stores for it: the same rows (values
        compared exactly, in the stored types) and the same row fingerprint."""
        path = self.write(self.shard_path(tmp_path), table, **kwargs)
        stored = self.make_format().storage(table.schema).schema
        back = self.read(path, stored)
        try:
            expected = table.cast(stored)
        except pa.ArrowInvalid:  # a cast Arrow has no kernel for: the fingerprint below compares values
            expected = back
        assert_same_rows(back, expected)
        assert digest_batches(back.to_batches()) == digest_batches(table.to_batches())
        if self.make_format().self_describing:
            with open(path, "rb") as handle:
                found = self.make_format().read_schema(handle, shard=path.name)
            assert found.equals(stored), f"the file holds {found}, the format said {stored}"
        return back

    # --------------------------------------------------------------------------------------- types

    @pytest.mark.parametrize("case", sorted(TYPE_CASES))
    def test_round_trip_of_each_type_or_its_refusal(self, tmp_path: Path, case: str) -> None:
        if case in self.supported:
            self.round_trip(tmp_path, self.table_of([case]))
            return
        schema = self.prepare(pa.table({case: pa.array([], type=TYPE_CASES[case][0])})).schema
        sink = io.BytesIO()
        with pytest.raises(SchemaError, match=case):
            self.make_format().open_writer(sink, schema)
        assert sink.getvalue() == b"", "a refused schema writes nothing"

    @pytest.mark.parametrize("case", sorted(TYPE_CASES))
    def test_unsupported_names_each_field_it_cannot_hold(self, case: str) -> None:
        schema = self.prepare(pa.table({case: pa.array([], type=TYPE_CASES[case][0])})).schema
        reasons = self.make_format().unsupported(schema)
        if case in self.supported:
            assert reasons == []
        else:
            assert len(reasons) == 1 and f'"{case}"' in reasons[0]

    def test_all_supported_types_together_in_several_and_sliced_batches(self, tmp_path: Path) -> None:
        names = [c for c in sorted(self.supported) if c in FILLABLE]
        table = self.table_of(names, rows=40)
        batches = [b for b in table.to_batches()]
        sliced = [batches[0].slice(0, 7), batches[0].slice(7, 20), batches[0].slice(27)]
        self.round_trip(tmp_path, table, batches=sliced)

    def test_nulls_in_every_column(self, tmp_path: Path) -> None:
        table = self.table_of(sorted(self.supported & set(FILLABLE)), rows=4)
        nulls = pa.Table.from_arrays(
            [pa.nulls(3, f.type) if f.nullable else table.column(f.name).slice(0, 3) for f in table.schema],
            schema=table.schema,
        )
        back = self.round_trip(tmp_path, nulls)
        for field in table.schema:
            if field.nullable:
                assert back.column(field.name).null_count == 3, field.name

    def test_empty_strings_are_not_nulls(self, tmp_path: Path) -> None:
        names = [c for c in ("string", "binary") if c in self.supported]
        table = self.prepare(
            pa.table(
                {n: pa.array(["", None] if n == "string" else [b"", None], TYPE_CASES[n][0]) for n in names}
            )
        )
        back = self.round_trip(tmp_path, table)
        for name in names:
            assert back.column(name).to_pylist() == [table.column(name)[0].as_py(), None]

    def test_unicode_text(self, tmp_path: Path) -> None:
        table = self.prepare(pa.table({"string": pa.array(_STRINGS)}))
        back = self.round_trip(tmp_path, table)
        assert back.column("string").to_pylist() == _STRINGS

    def test_random_floats_round_trip_bit_for_bit(self, tmp_path: Path) -> None:
        if "float64" not in self.supported:
            pytest.skip("no floats")
        rng = np.random.default_rng(7)
        doubles = rng.integers(0, 2**64, size=2000, dtype="uint64").view("float64")
        singles = rng.integers(0, 2**32, size=2000, dtype="uint32").view("float32")
        table = self.prepare(pa.table({"float64": pa.array(doubles), "float32": pa.array(singles)}))
        self.round_trip(tmp_path, table)

    # --------------------------------------------------------------------------------------- shape

    def test_zero_row_shard(self, tmp_path: Path) -> None:
        table = self.table_of(sorted(self.supported & set(FILLABLE)), rows=0)
        path = self.write(self.shard_path(tmp_path), table, batches=[])
        assert path.stat().st_size >= 0
        assert self.read(path, table.schema).num_rows == 0
        with open(path, "rb") as handle:
            assert self.make_format().count_rows(handle, shard=path.name, schema=table.schema) == 0

    def test_large_value(self, tmp_path: Path) -> None:
        size = 20 * 1024 * 1024
        value: Any = ("é" * (size // 2)) if pa.types.is_string(self.large_value_type) else os.urandom(size)
        name = "string" if pa.types.is_string(self.large_value_type) else "binary"
        table = self.prepare(
            pa.table(
                {name: pa.array([value, "x" if isinstance(value, str) else b"x"], self.large_value_type)}
            )
        )
        back = self.round_trip(tmp_path, table)
        assert back.column(name)[0].as_py() == value

    def test_projection_by_columns(self, tmp_path: Path) -> None:
        names = [c for c in ("int64", "string", "float64", "binary") if c in self.supported]
        table = self.table_of(names, rows=10)
        path = self.write(self.shard_path(tmp_path), table)
        wanted = [table.schema.names[-1], table.schema.names[0]]
        back = self.read(path, table.schema, columns=wanted)
        assert back.schema.names == wanted
        assert_same_rows(back, table.select(wanted))

    def test_unknown_projected_column_is_refused(self, tmp_path: Path) -> None:
        table = self.table_of(["string"], rows=2)
        path = self.write(self.shard_path(tmp_path), table)
        with pytest.raises(SchemaError, match="nope"):
            self.read(path, table.schema, columns=["nope"])

    def test_batches_are_bounded(self, tmp_path: Path) -> None:
        table = self.table_of(["string"], rows=5000)
        path = self.write(self.shard_path(tmp_path), table)
        fmt = self.make_format()
        with open(path, "rb") as handle:
            sizes = [
                b.num_rows
                for b in fmt.iter_batches(handle, shard=path.name, schema=table.schema, batch_rows=1000)
            ]
        assert sum(sizes) == 5000 and max(sizes) <= 1000

    def test_count_rows(self, tmp_path: Path) -> None:
        table = self.table_of(["string"], rows=123)
        path = self.write(self.shard_path(tmp_path), table)
        with open(path, "rb") as handle:
            assert self.make_format().count_rows(handle, shard=path.name, schema=table.schema) == 123

    def test_read_schema(self, tmp_path: Path) -> None:
        table = self.table_of(["int64", "string"] if "int64" in self.supported else ["string"], rows=6)
        path = self.write(self.shard_path(tmp_path), table)
        fmt = self.make_format()
        with open(path, "rb") as handle:
            schema = fmt.read_schema(handle, shard=path.name)
        assert schema.names == table.schema.names
        if fmt.self_describing:
            assert schema.equals(table.schema)
        back = self.read(path, None)
        assert back.num_rows == 6

    # --------------------------------------------------------------------------------------- writing

    def test_deterministic_bytes(self, tmp_path: Path) -> None:
        table = self.table_of(sorted(self.supported & set(FILLABLE)), rows=50)
        first = self.write(tmp_path / f"a{self.shard_path(tmp_path).suffix}", table).read_bytes()
        second = self.write(tmp_path / f"b{self.shard_path(tmp_path).suffix}", table).read_bytes()
        assert first == second

    def test_writes_to_a_non_seekable_sink(self, tmp_path: Path) -> None:
        table = self.table_of(["string"], rows=20)
        sink = NonSeekableSink()
        with self.make_format().open_writer(sink, table.schema) as writer:  # type: ignore[arg-type]
            for batch in table.to_batches():
                writer.write_batch(batch)
        reference = self.write(self.shard_path(tmp_path), table).read_bytes()
        assert sink.buffer.getvalue() == reference

    def test_writer_refuses_a_batch_of_another_schema(self) -> None:
        table = self.table_of(["string"], rows=2)
        other = pa.record_batch({"other": pa.array([1, 2])})
        with pytest.raises(SchemaError), self.make_format().open_writer(io.BytesIO(), table.schema) as writer:
            writer.write_batch(other)

    def test_options_recreate_the_format(self) -> None:
        fmt = self.make_format()
        again = get_format(fmt.name, **fmt.options())
        assert again.options() == fmt.options()

    # --------------------------------------------------------------------------------------- bad bytes

    def test_garbage_bytes_name_the_shard(self, tmp_path: Path) -> None:
        table = self.table_of(["string"], rows=3)
        path = self.shard_path(tmp_path, "garbage")
        path.write_bytes(b"\xff\xfe\x00garbage" + os.urandom(3000))
        with pytest.raises((FormatError, SchemaError), match=path.name):
            self.read(path, table.schema)

    def test_truncated_file_names_the_shard(self, tmp_path: Path) -> None:
        table = self.table_of(["string", "int64"] if "int64" in self.supported else ["string"], rows=200)
        path = self.write(self.shard_path(tmp_path), table)
        data = path.read_bytes()
        cut = self.truncation_point(data)
        path.write_bytes(data[:cut])
        with pytest.raises(InputError, match=path.name) as info:
            self.read(path, table.schema)
        assert isinstance(info.value, FormatError | SchemaError)

    def truncation_point(self, data: bytes) -> int:
        return len(data) // 2

    # --------------------------------------------------------------------------------------- random access

    @settings(
        max_examples=12,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
    )
    @given(
        rows=st.integers(0, 400),
        batch=st.integers(1, 150),
        ranges=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=4),
    )
    def test_random_access_reads_equal_a_full_read(
        self, tmp_path: Path, rows: int, batch: int, ranges: list[tuple[float, float]]
    ) -> None:
        """Rows read through the shard index, for any range, equal the same rows of a full read: for every
        type the format holds, any batch or row-group size, any row count."""
        names = [c for c in sorted(self.supported) if c in FILLABLE]
        table = self.table_of(names, rows=rows)
        fmt = self.make_format()
        if fmt.name == "parquet":
            fmt = get_format("parquet", **{**self.options, "row_group_size": batch})
        path = self.shard_path(tmp_path, f"ra-{rows}-{batch}")
        with open(path, "wb") as handle, fmt.open_writer(handle, table.schema) as writer:
            for part in table.to_batches(max_chunksize=batch):
                writer.write_batch(part)
        with open(path, "rb") as handle:
            index = fmt.index_shard(handle, shard=path.name, schema=table.schema)
            assert index.rows == rows
            for a, b in ranges:
                start, stop = sorted((round(a * rows), round(b * rows)))
                got = list(
                    fmt.read_rows(handle, index, shard=path.name, start=start, stop=stop, schema=table.schema)
                )
                back = pa.Table.from_batches(got, schema=table.schema) if got else table.schema.empty_table()
                assert_same_rows(back, table.slice(start, stop - start))
        again, _ = type(index).from_bytes(index.to_bytes(), source="test")
        assert again.starts.tolist() == index.starts.tolist() and again.kind == index.kind


def iter_lines(data: bytes) -> Iterator[bytes]:
    yield from data.splitlines()
