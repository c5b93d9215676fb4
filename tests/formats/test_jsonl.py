"""JSONL passes the conformance suite; plus line-numbered errors, encodings and compression."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conformance import TYPE_CASES, FormatConformance, assert_same_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError
from dsm.formats.jsonl import JsonlFormat

JSON_TYPES = frozenset(TYPE_CASES) - {"float16", "time64", "time32_s", "duration"}


class TestJsonl(FormatConformance):
    format_name = "jsonl"
    supported = JSON_TYPES

    def truncation_point(self, data: bytes) -> int:
        return data.index(b'"', len(data) // 2) + 1  # inside a string value


class TestJsonlGzip(TestJsonl):
    options = {"compression": "gzip"}  # noqa: RUF012
    suffix = ".jsonl.gz"

    def truncation_point(self, data: bytes) -> int:
        return len(data) // 2


class TestJsonlZstd(TestJsonlGzip):
    options = {"compression": "zstd"}  # noqa: RUF012
    suffix = ".jsonl.zst"


SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("score", pa.float64()), ("name", pa.string())]
)


def _read(data: bytes, schema: pa.Schema | None = SCHEMA, **kwargs: object) -> pa.Table:
    batches = list(
        JsonlFormat().iter_batches(io.BytesIO(data), shard="part-1.jsonl", schema=schema, **kwargs)
    )  # type: ignore[arg-type]
    return (
        pa.Table.from_batches(batches, schema=schema)
        if schema is not None
        else pa.Table.from_batches(batches)
    )


def _lines(count: int, bad_line: int, bad: str) -> bytes:
    lines = [json.dumps({"id": i, "score": i / 2, "name": f"n{i}"}) for i in range(1, count + 1)]
    lines[bad_line - 1] = bad
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"id": 17, "score": 1.5', r"shard part-1.jsonl line 17: invalid JSON \("),
        (
            '{"id": 17, "score": "abc"}',
            r'shard part-1.jsonl line 17 field "score": expected double, got "abc"',
        ),
        ('{"id": 17, "foo": 1}', r'shard part-1.jsonl line 17: unexpected field "foo"'),
        ('{"id": null}', r'shard part-1.jsonl line 17 field "id": null, but the field is not nullable'),
        ('{"score": 1}', r'shard part-1.jsonl line 17 field "id": missing, but the field is not nullable'),
        ('{"id": 1.5}', r'line 17 field "id": expected int64, got 1.5'),
        ('{"id": NaN}', r'line 17 field "id": expected int64, got NaN'),
        ("[1, 2]", r"line 17: expected a JSON object, got an array"),
    ],
)
def test_errors_name_the_line_and_the_field(bad: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        _read(_lines(40, 17, bad))


def test_line_numbers_are_absolute_across_blocks_and_count_blank_lines() -> None:
    from dsm.formats import jsonl

    good = [json.dumps({"id": i, "score": 0.5, "name": "x" * 50}) for i in range(30_000)]
    text = "\n".join(good[:100]) + "\n\n" + "\n".join(good[100:]) + "\n" + '{"id": "oops"}\n'
    assert len(text) > 2 * 1024 * 1024
    original = jsonl._CHUNK_BYTES
    jsonl._CHUNK_BYTES = 1024 * 1024
    try:
        with pytest.raises(FormatError, match=r"line 30002 field \"id\""):
            _read(text.encode())
    finally:
        jsonl._CHUNK_BYTES = original


def test_invalid_utf8_names_the_line() -> None:
    with pytest.raises(FormatError, match="line 2: not valid UTF-8"):
        _read(b'{"id": 1}\n{"id": 2, "name": "\xff"}\n')


def test_missing_fields_are_null_and_blank_lines_are_skipped() -> None:
    table = _read(b'{"id": 1}\n\n{"id": 2, "score": 2.5, "name": "b"}\n')
    assert table.to_pylist() == [{"id": 1, "score": None, "name": None}, {"id": 2, "score": 2.5, "name": "b"}]


def test_no_trailing_newline() -> None:
    assert _read(b'{"id": 1}\n{"id": 2}').column("id").to_pylist() == [1, 2]


def test_numbers_are_not_guessed_from_strings() -> None:
    with pytest.raises(FormatError, match='field "id": expected int64, got "1"'):
        _read(b'{"id": "1"}\n')


def test_nested_errors_name_the_path() -> None:
    schema = pa.schema([("tags", pa.list_(pa.struct([("k", pa.int32())])))])
    with pytest.raises(FormatError, match=r'line 1 field "tags\[1\].k": expected int32, got "x"'):
        _read(b'{"tags": [{"k": 1}, {"k": "x"}]}\n', schema)


def test_bad_timestamp_names_line_and_field() -> None:
    schema = pa.schema([("t", pa.timestamp("ns"))])
    with pytest.raises(FormatError, match=r'line 2 field "t": expected timestamp\[ns\], got "yesterday"'):
        _read(b'{"t": "2024-01-01T00:00:00"}\n{"t": "yesterday"}\n', schema)


def test_bad_base64_names_line_and_field() -> None:
    schema = pa.schema([("b", pa.binary())])
    with pytest.raises(FormatError, match=r'line 2 field "b": not valid base64'):
        _read(b'{"b": "AA=="}\n{"b": "!!"}\n', schema)


def test_encoding_of_each_kind_of_value(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("b", pa.binary()),
            ("f", pa.float64()),
            ("t", pa.timestamp("ns", "Europe/Paris")),
            ("n", pa.timestamp("ms")),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("s", pa.string()),
        ]
    )
    table = pa.table(
        {
            "b": [b"\x00\xff"],
            "f": [float("-inf")],
            "t": pa.array([1], pa.timestamp("ns", "Europe/Paris")),
            "n": pa.array([1500], pa.timestamp("ms")),
            "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
            "s": ['é\n"\x01'],
        },
        schema=schema,
    )
    sink = io.BytesIO()
    with JsonlFormat().open_writer(sink, schema) as writer:  # type: ignore[arg-type]
        writer.write_batch(table.to_batches()[0])
    line = sink.getvalue().decode()
    assert line == (
        '{"b":"AP8=","f":"-Infinity","t":"1970-01-01T00:00:00.000000001Z","n":"1970-01-01T00:00:01.500",'
        '"m":[["k",1]],"s":"é\\n\\"\\u0001"}\n'
    )
    assert json.loads(line)["s"] == 'é\n"\x01'
    assert_same_rows(_read(sink.getvalue(), schema), table)


def test_offsets_in_timestamps_are_read_as_instants() -> None:
    schema = pa.schema([("t", pa.timestamp("s", "UTC"))])
    table = _read(b'{"t": "2024-01-01T01:00:00+01:00"}\n', schema)
    assert table.column("t").cast(pa.int64()).to_pylist() == [1704067200]


def test_schema_is_inferred_from_the_first_lines() -> None:
    table = _read(b'{"a": 1, "b": "x"}\n{"a": 2, "b": null}\n', None)
    assert table.schema == pa.schema([("a", pa.int64()), ("b", pa.string())])
    assert table.column("a").to_pylist() == [1, 2]


def test_compressed_output_is_smaller() -> None:
    schema = pa.schema([("s", pa.string())])
    batch = pa.record_batch({"s": ["abc" * 30] * 1000}, schema=schema)
    sizes = {}
    for codec in (None, "gzip", "zstd"):
        sink = io.BytesIO()
        with JsonlFormat(compression=codec).open_writer(sink, schema) as writer:  # type: ignore[arg-type]
            writer.write_batch(batch)
        sizes[codec] = len(sink.getvalue())
    assert sizes["gzip"] < sizes[None] // 10 and sizes["zstd"] < sizes[None] // 10


class _ReadOnly:
    """A stream with ``read`` only (no ``readinto``), as some file objects are."""

    def __init__(self, data: bytes) -> None:
        self._file = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)


class _Trickle(io.BytesIO):
    """A stream whose ``readinto`` fills at most ``most`` bytes a call, as a socket or a pipe may."""

    def __init__(self, data: bytes, most: int) -> None:
        super().__init__(data)
        self._most = most

    def readinto(self, buffer: Any) -> int:
        return super().readinto(memoryview(buffer)[: self._most])


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ")), max_size=30),
    trailing_newline=st.booleans(),
    chunk_bytes=st.integers(1, 64),
    readinto=st.booleans(),
    most=st.none() | st.integers(1, 9),
)
def test_chunks_are_whole_lines_that_add_up_to_the_file(
    lines: list[bytes], trailing_newline: bool, chunk_bytes: int, readinto: bool, most: int | None
) -> None:
    """Chunks are read into memory whose bytes are not set first (``read_room``): each byte a chunk holds
    is one the file gave, however short the reads."""
    from dsm.formats._lines import count_newlines
    from dsm.formats.jsonl import _iter_chunks

    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    if not readinto:
        stream: Any = _ReadOnly(data)
    else:
        stream = io.BytesIO(data) if most is None else _Trickle(data, most)
    chunks = list(_iter_chunks(stream, chunk_bytes))
    assert b"".join(bytes(c) for _, c, _ in chunks) == data
    line = 1
    for index, (first_line, chunk, newlines) in enumerate(chunks):
        assert first_line == line and chunk
        assert chunk.endswith(b"\n") or index == len(chunks) - 1
        assert count_newlines(chunk) == newlines == chunk.count(b"\n")
        line += chunk.count(b"\n")


def _reference_depth(line: str) -> int:
    """How deep a JSON line nests, outside strings: written from the JSON grammar, not from dsm."""
    depth = deepest = 0
    in_string = escaped = False
    for char in line:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


@settings(max_examples=60, deadline=None)
@given(
    depths=st.lists(st.integers(0, 300), min_size=1, max_size=40),
    decoys=st.lists(st.integers(0, 400), min_size=1, max_size=40),
)
def test_the_nesting_check_refuses_exactly_the_first_line_too_deep(
    depths: list[int], decoys: list[int]
) -> None:
    """Brackets inside strings do not count; the line named is the first that nests past the limit."""
    from dsm.formats.jsonl import _MAX_NESTING, _check_nesting

    lines = []
    for i, depth in enumerate(depths):
        text = json.dumps("[{" * decoys[i % len(decoys)])  # brackets in a string: not nesting
        lines.append(f'{{"s": {text}, "v": {"[" * depth}1{"]" * depth}}}')
    chunk = ("\n".join(lines) + "\n").encode()
    too_deep = [i for i, line in enumerate(lines) if _reference_depth(line) > _MAX_NESTING]
    if not too_deep:
        _check_nesting(chunk, 10, "s.jsonl")
        return
    with pytest.raises(FormatError, match=rf"shard s\.jsonl line {10 + too_deep[0]}: values nest deeper"):
        _check_nesting(chunk, 10, "s.jsonl")
