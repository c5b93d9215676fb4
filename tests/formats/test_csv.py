"""CSV passes the conformance suite; plus null vs empty string, headers and line-numbered errors."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest
from conformance import TYPE_CASES, FormatConformance, assert_same_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError, InputError, SchemaError
from dsm.formats.csv import CsvFormat

CSV_TYPES = frozenset(
    {*(n for n in TYPE_CASES if n.startswith(("int", "uint", "timestamp"))), "float32", "float64", "bool"}
    | {
        "string",
        "large_string",
        "binary",
        "large_binary",
        "date32",
        "decimal128",
        "decimal256",
        "fixed_size_binary",
        "decimal32",
        "decimal64",
        # Held as their values (text has no dictionaries and no views):
        "dictionary",
        "dictionary_int8_large_string",
        "dictionary_of_ints",
        "dictionary_null_value",
        "string_view",
    }
)


class TestCsv(FormatConformance):
    format_name = "csv"
    supported = CSV_TYPES

    def truncation_point(self, data: bytes) -> int:
        return data.index(b'"', len(data) // 2) + 2  # inside a quoted string: the row is cut short


class TestCsvTabNoHeaderGzip(TestCsv):
    options = {"delimiter": "\t", "header": False, "compression": "gzip"}  # noqa: RUF012
    suffix = ".csv.gz"

    def truncation_point(self, data: bytes) -> int:
        return len(data) // 2

    def test_read_schema(self) -> None:  # type: ignore[override]
        pytest.skip("without a header the inferred names are f0, f1, ...")


SCHEMA = pa.schema([pa.field("a", pa.int64(), nullable=False), ("b", pa.float64()), ("c", pa.string())])


def _read(data: bytes, schema: pa.Schema | None = SCHEMA, fmt: CsvFormat | None = None) -> pa.Table:
    batches = list((fmt or CsvFormat()).iter_batches(io.BytesIO(data), shard="x.csv", schema=schema))
    return (
        pa.Table.from_batches(batches, schema=schema)
        if schema is not None
        else pa.Table.from_batches(batches)
    )


def test_null_is_an_empty_field_and_the_empty_string_is_quoted() -> None:
    table = pa.table({"a": [1, 2], "b": [None, 1.5], "c": [None, ""]}, schema=SCHEMA)
    sink = io.BytesIO()
    with CsvFormat().open_writer(sink, SCHEMA) as writer:  # type: ignore[arg-type]
        writer.write_batch(table.to_batches()[0])
    assert sink.getvalue() == b'"a","b","c"\n1,,\n2,1.5,""\n'
    assert_same_rows(_read(sink.getvalue()), table)


def test_missing_column_names_the_line() -> None:
    with pytest.raises(FormatError, match=r"shard x.csv line 5: expected 3 columns, got 2"):
        _read(b'a,b,c\n1,2,"x"\n2,3,"multi\nline"\n4,5\n')


def test_bad_value_names_the_line_and_field() -> None:
    with pytest.raises(FormatError, match=r'shard x.csv line 3 field "b": expected double, got "abc"'):
        _read(b"a,b,c\n1,2,x\n2,abc,y\n")


def test_null_in_a_non_nullable_field_names_the_line() -> None:
    with pytest.raises(FormatError, match=r'line 4 field "a": null'):
        _read(b"a,b,c\n1,2,x\n2,3,y\n,4,z\n")


def test_header_must_match_the_schema() -> None:
    with pytest.raises(SchemaError, match=r'no column "c".*column "d" is not in the schema'):
        _read(b"a,b,d\n1,2,3\n")


def test_header_order_may_differ() -> None:
    assert _read(b"c,a,b\nx,1,2.5\n").to_pylist() == [{"a": 1, "b": 2.5, "c": "x"}]


def test_bool_accepts_only_true_and_false() -> None:
    schema = pa.schema([("f", pa.bool_())])
    assert _read(b"f\ntrue\nfalse\n", schema).column("f").to_pylist() == [True, False]
    with pytest.raises(FormatError, match=r'line 2 field "f"'):
        _read(b"f\n1\n", schema)


def test_empty_file_has_no_rows() -> None:
    assert _read(b"").num_rows == 0


def test_nested_types_are_refused_by_name() -> None:
    schema = pa.schema([("l", pa.list_(pa.int64())), ("s", pa.struct([("x", pa.int8())])), ("ok", pa.int8())])
    reasons = CsvFormat().unsupported(schema)
    assert len(reasons) == 2 and '"l"' in reasons[0] and '"s"' in reasons[1]


def test_bad_delimiter_is_refused() -> None:
    with pytest.raises(InputError):
        CsvFormat(delimiter=";;")


def test_inferred_schema_uses_the_header() -> None:
    table = _read(b'a,b\n1,"x"\n2,""\n', None)
    assert table.schema.names == ["a", "b"] and table.column("b").to_pylist() == ["x", ""]


def test_in_a_one_column_file_an_empty_line_is_a_null() -> None:
    schema = pa.schema([("s", pa.string())])
    assert _read(b's\n"a"\n\n""\n', schema).column("s").to_pylist() == ["a", None, ""]


def test_time_zones_are_written_in_utc_and_read_back_exactly() -> None:
    schema = pa.schema([("t", pa.timestamp("s", "Asia/Kolkata"))])
    table = pa.table({"t": pa.array([-2208988800], pa.timestamp("s", "Asia/Kolkata"))}, schema=schema)
    sink = io.BytesIO()
    with CsvFormat().open_writer(sink, schema) as writer:  # type: ignore[arg-type]
        writer.write_batch(table.to_batches()[0])
    assert sink.getvalue() == b'"t"\n1900-01-01 00:00:00Z\n'
    assert_same_rows(_read(sink.getvalue(), schema), table)


@settings(max_examples=200, deadline=None)
@given(
    blank=st.lists(st.sampled_from(["\n", "\r\n"]), max_size=6),
    eol=st.sampled_from(["\n", "\r\n"]),
    good_rows=st.integers(0, 4),
    bad_header=st.booleans(),
)
def test_errors_name_the_line_in_the_file_when_blank_lines_come_first(
    blank: list[str], eol: str, good_rows: int, bad_header: bool
) -> None:
    """Blank lines before the header are lines of the file: an error names the line a text editor shows."""
    header = "a,b,d" if bad_header else "a,b,c"
    rows = [f"{i},{i}.5,x{i}" for i in range(good_rows)] + ["9,abc,y"]
    data = ("".join(blank) + eol.join([header, *rows]) + eol).encode()
    header_line = len(blank) + 1
    if bad_header:
        with pytest.raises(SchemaError, match=rf"shard x.csv line {header_line}: header \['a', 'b', 'd'\]"):
            _read(data)
    else:
        bad_line = header_line + 1 + good_rows
        with pytest.raises(FormatError, match=rf'shard x.csv line {bad_line} field "b": expected double'):
            _read(data)
