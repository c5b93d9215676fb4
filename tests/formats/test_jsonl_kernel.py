"""The compiled JSON kernel: its scanner reads what it accepts exactly as pyarrow's parser reads it, and
its join writes the same bytes as Arrow's.

Reading:
Generated tokens (numbers of every shape, out-of-range integers, literals, strings with and without escapes,
timestamps valid and not, nested values) and generated lines (key order, missing, duplicate and unknown
keys, whitespace, blank lines, a last line without a newline) are read with the scanner and without it:
where the scanner accepts a line, pyarrow's parser accepts it too and gives the same values, bit for bit;
the JSONL reader gives the same table or the same error either way. Lines written by dsm, escapes and all,
are accepted.
Writing: batches of every type the format holds, sliced anywhere, with and without nulls, are written to
the same bytes with the kernel's join and with Arrow's; texts with every escape at every place around the
kernel's 16- and 64-byte steps are escaped to the same bytes as Arrow's replacements give, and read back.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pytest
from conformance import TYPE_CASES, assert_same_rows, column
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError
from dsm.formats import _flatjson, _lines
from dsm.formats._flatjson import FlatScanner
from dsm.formats._jsontext import (
    encode_lines,
    encode_lines_bytes,
    escape_json_strings,
    json_stored_type,
    text_buffer,
)
from dsm.formats._storage import convert_batch
from dsm.formats.jsonl import JsonlFormat, _ChunkParser

T = TypeVar("T")

built = pytest.mark.skipif(_flatjson._kernel() is None, reason="the JSON scanner is not built here")

SCALARS = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.string(),
    pa.large_string(),
    pa.timestamp("s"),
    pa.timestamp("ms", tz="UTC"),
    pa.timestamp("us"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ns", tz="Europe/Paris"),
    pa.timestamp("ns"),
]
# Read through the scanner as strings, then turned into their own type by the JSONL reader.
READER_ONLY = [pa.binary(), pa.dictionary(pa.int32(), pa.string())]

ODD_TOKENS = [
    "-0",
    "01",
    "-01",
    "1.",
    ".5",
    "1e",
    "1e+",
    "+1",
    "--1",
    "0x10",
    "1E+2",
    "1e2",
    "-1.5e-3",
    "2.50",
    "NaN",
    "Infinity",
    "-Infinity",
    '"NaN"',
    "true",
    "false",
    "null",
    "nul",
    "True",
    '"x"',
    '""',
    "1e400",
    "-1e400",
    "1e-400",
    "4.9e-324",
    "2.2250738585072014e-308",
    "1.17549435e-38",
    "3.4028236e38",
    "123456789012345678901234567890",
    "18446744073709551616",
    "-9223372036854775809",
    "9223372036854775808",
    "[1]",
    "[]",
    '{"a":1}',
    "{}",
    '"a\\"b"',
    '"\\u00e9"',
    '"tab\\there"',
    '"\t"',
    '"2024-01-01"',
    '"2024-01-01T00:00:00"',
    '"2024-01-01T00:00:00Z"',
    '"2024-02-30T00:00:00Z"',
    '"2024-01-01 00:00:00"',
    '"2024-01-01T00:00:00+01:00"',
    '"2024-01-01T24:00:00"',
    '"2024-01-01T00:00:60Z"',
    '"0000-01-01T00:00:00"',
    '"9999-12-31T23:59:59.999999999Z"',
    '"1677-09-21T00:12:43.145224192"',
    '"2262-04-11T23:47:16.854775807Z"',
    '"2262-04-11T23:47:16.854775808"',
    '"2024-01-01T00:00:00."',
    '"2024-01-01T00:00:00.1234567890"',
    '"2024-1-01T00:00:00"',
]


@contextmanager
def scanner_mode(mode: str) -> Iterator[None]:
    before = os.environ.get(_flatjson.ENV_VAR)
    os.environ[_flatjson.ENV_VAR] = mode
    try:
        yield
    finally:
        if before is None:
            del os.environ[_flatjson.ENV_VAR]
        else:
            os.environ[_flatjson.ENV_VAR] = before


def both(compute: Callable[[], T]) -> tuple[T | BaseException, T | BaseException]:
    """``compute()`` with the scanner and without it: its value or the exception it raised."""
    out: list[T | BaseException] = []
    for mode in ("auto", "python"):
        with scanner_mode(mode):
            try:
                out.append(compute())
            except (FormatError, pa.ArrowException) as exc:
                out.append(exc)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------- tokens


def _decimal_text() -> st.SearchStrategy[str]:
    """JSON numbers of every shape: up to 25 digits on either side of the point, exponents to +-400."""
    digits = st.text("0123456789", min_size=1, max_size=25)
    return st.builds(
        lambda sign, whole, frac, exp: sign + (whole.lstrip("0") or "0") + frac + exp,
        st.sampled_from(["", "-"]),
        digits,
        st.one_of(st.just(""), digits.map(lambda d: "." + d)),
        st.one_of(
            st.just(""),
            st.builds(
                lambda e, s, v: e + s + str(v),
                st.sampled_from("eE"),
                st.sampled_from(["", "+", "-"]),
                st.integers(0, 400),
            ),
        ),
    )


def _timestamp_text(zoned: bool) -> st.SearchStrategy[str]:
    """Instants in text: mostly valid in the field's form, some out of range or in other forms."""

    def text(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str, zone: str) -> str:
        return f'"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{frac}{zone}"'

    fraction = st.text("0123456789", min_size=0, max_size=10).map(lambda d: "." + d)
    valid = st.builds(
        text,
        st.integers(1678, 2261),
        st.integers(1, 12),
        st.integers(1, 31),
        st.integers(0, 23),
        st.integers(0, 59),
        st.integers(0, 59),
        st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=3).map(lambda d: "." + d)),
        st.just("Z" if zoned else ""),
    )
    anything = st.builds(
        text,
        st.integers(0, 9999),
        st.integers(0, 13),
        st.integers(0, 32),
        st.integers(0, 24),
        st.integers(0, 60),
        st.integers(0, 60),
        st.one_of(st.just(""), fraction),
        st.sampled_from(["", "Z", "+00:00", "z", "-01:30"]),
    )
    return st.one_of(valid, valid, anything)


def token_for(type_: pa.DataType) -> st.SearchStrategy[str]:
    """Tokens for a field of ``type_``: mostly values of its kind, sometimes any odd token."""
    if pa.types.is_integer(type_):
        bits = type_.bit_width
        low, high = (
            (0, 2**bits - 1)
            if pa.types.is_unsigned_integer(type_)
            else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        )
        kind = st.one_of(
            st.integers(low, high).map(str),
            st.sampled_from([low, high, low - 1, high + 1, 0]).map(str),
            st.integers(-(2**70), 2**70).map(str),
        )
    elif pa.types.is_floating(type_):
        single = pa.types.is_float32(type_)
        values = st.floats(allow_nan=False, allow_infinity=False, width=32 if single else 64)
        kind = st.one_of(
            values.map(repr),
            values.map(lambda v: f"{v:.17g}"),
            values.map(lambda v: str(np.float32(v)) if single else f"{v:.15g}"),  # float32's shortest text
            st.integers(-(2**70), 2**70).map(str),
            _decimal_text(),
        )
    elif pa.types.is_boolean(type_):
        kind = st.sampled_from(["true", "false"])
    elif pa.types.is_timestamp(type_):
        kind = _timestamp_text(type_.tz is not None)
    else:
        kind = st.builds(
            lambda text, ascii_only: json.dumps(text, ensure_ascii=ascii_only),
            st.text(max_size=30),
            st.booleans(),
        )
    return st.one_of(kind, kind, kind, st.just("null"), st.sampled_from(ODD_TOKENS))


def _pyarrow_reads(line: bytes, schema: pa.Schema) -> pa.Table | None:
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    try:
        return pj.read_json(pa.BufferReader(line), parse_options=parse)
    except pa.ArrowException:
        return None


def _check_token(scanner: FlatScanner, schema: pa.Schema, token: str, space: str) -> None:
    line = f'{space}{{{space}"f"{space}:{space}{token}{space}}}{space}\n'.encode()
    got = scanner.scan(line)
    if got is not None:
        want = _pyarrow_reads(line, schema)
        assert want is not None, f"the scanner accepts {line!r}, pyarrow does not"
        assert_same_rows(got, want)


@built
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), type_=st.sampled_from(SCALARS), space=st.sampled_from(["", " ", "\t", " \t "]))
def test_a_token_the_scanner_accepts_is_read_as_pyarrow_reads_it(
    data: st.DataObject, type_: pa.DataType, space: str
) -> None:
    schema = pa.schema([("f", type_)])
    scanner = FlatScanner.of(schema)
    assert scanner is not None
    _check_token(scanner, schema, data.draw(token_for(type_)), space)


@built
def test_floats_are_rounded_once_to_their_own_width() -> None:
    # 1 + 2**-24 + 2**-60: through double it rounds to 1.0, directly to float32 to 1 + 2**-23 (as pyarrow)
    token = "1.000000059604644776257986737988403547205962240695953369140625"
    scanner = FlatScanner.of(pa.schema([("f", pa.float32())]))
    assert scanner is not None
    got = scanner.scan(f'{{"f":{token}}}'.encode())
    assert got is not None
    assert got["f"].to_numpy()[0] == np.float32(1 + 2**-23)
    for token in ["16777217", "0.1", "3.4028235e38", "1e10", "123456.789e-3", "0.000001234", "1.5e-10"]:
        for type_ in (pa.float32(), pa.float64()):
            schema = pa.schema([("f", type_)])
            _check_token(FlatScanner.of(schema), schema, token, "")  # type: ignore[arg-type]
            assert FlatScanner.of(schema).scan(f'{{"f":{token}}}'.encode()) is not None  # type: ignore[union-attr]


# ----------------------------------------------------------------------------------------------- lines


@st.composite
def lines_of(draw: st.DrawFn, schema: pa.Schema) -> bytes:
    """1 to 4 lines of objects of ``schema``'s fields, in any order, some missing, sometimes odd."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        names = draw(st.permutations(schema.names))
        kept = [n for n in names if draw(st.integers(0, 9)) > 0]
        parts = []
        for name in kept:
            type_ = schema.field(name).type
            token = draw(token_for(pa.string() if type_ in READER_ONLY else type_))
            if pa.types.is_binary(type_) and draw(st.booleans()):
                token = json.dumps(draw(st.sampled_from(["aGk=", "", "AAEC/w==", "not base64"])))
            parts.append((name, token))
        extra = draw(st.integers(0, 30))
        if extra == 0 and parts:
            parts.append(parts[0])  # a duplicate key
        elif extra == 1:
            parts.append(("unknown", "1"))
        space = draw(st.sampled_from(["", " ", "\t", "\r"]))
        body = ("," + space).join(f"{json.dumps(n, ensure_ascii=False)}:{space}{t}" for n, t in parts)
        out.append("{" + body + "}" + draw(st.sampled_from(["", "", " ", "\r"])))
        if draw(st.integers(0, 20)) == 0:
            out.append(draw(st.sampled_from(["", " ", "\t"])))  # a blank line
    text = "\n".join(out) + draw(st.sampled_from(["\n", "\n", ""]))
    return text.encode("utf-8")


@st.composite
def schemas(draw: st.DrawFn) -> pa.Schema:
    types = draw(st.lists(st.sampled_from(SCALARS + READER_ONLY), min_size=1, max_size=5))
    names = draw(
        st.lists(
            st.sampled_from(["a", "b", "id", "é", "名前", "x y", "c"]),
            min_size=len(types),
            max_size=len(types),
            unique=True,
        )
    )
    return pa.schema(
        [pa.field(n, t, nullable=draw(st.integers(0, 4)) > 0) for n, t in zip(names, types, strict=True)]
    )


@built
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), schema=schemas())
def test_the_reader_gives_the_same_table_or_error_with_and_without_the_scanner(
    data: st.DataObject, schema: pa.Schema
) -> None:
    chunk = data.draw(lines_of(schema))
    parser = _ChunkParser(schema, "part-0.jsonl")
    with_scanner, without = both(lambda: parser.parse(chunk, 1))
    if isinstance(without, BaseException):
        assert isinstance(with_scanner, type(without)), f"{with_scanner!r} != {without!r}"
        assert str(with_scanner) == str(without)
    else:
        assert isinstance(with_scanner, pa.Table), with_scanner
        assert_same_rows(with_scanner, without)


# -------------------------------------------------------------------------------------- what dsm writes


_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def _random_column(rng: np.random.Generator, type_: pa.DataType, rows: int) -> pa.Array:
    nulls = rng.random(rows) < 0.2
    if pa.types.is_timestamp(type_):  # 1906 to 2191: within what every unit holds
        unit = _PER_SECOND[type_.unit]
        values = rng.integers(-2 * 10**9, 7 * 10**9, rows) * unit + rng.integers(0, unit, rows)
        return pa.array(values, pa.int64(), mask=nulls).cast(type_)
    if pa.types.is_integer(type_):
        info = np.iinfo(type_.to_pandas_dtype())
        return pa.array(
            rng.integers(info.min, info.max, rows, dtype=info.dtype, endpoint=True), type_, mask=nulls
        )
    if pa.types.is_floating(type_):
        values = rng.standard_normal(rows) * 10.0 ** rng.integers(-30, 30, rows)
        return pa.array(values.astype(type_.to_pandas_dtype()), type_, mask=nulls)
    if pa.types.is_boolean(type_):
        return pa.array(rng.random(rows) < 0.5, type_, mask=nulls)
    words = ["", "plain", "héllo wörld", "漢字", "🦀", "a,b:c{d}[e]", "line one\nline two", 'say "hi"']
    return pa.array([words[i] for i in rng.integers(0, len(words), rows)], type_, mask=nulls)


@built
@pytest.mark.parametrize("seed", range(8))
def test_lines_dsm_writes_are_read_by_the_scanner(seed: int) -> None:
    rng = np.random.default_rng(seed)
    flat = [t for t in SCALARS if not (pa.types.is_string(t) or pa.types.is_large_string(t))]
    types = [flat[i] for i in rng.choice(len(flat), 6, replace=False)] + [pa.string()]
    schema = pa.schema([pa.field(f"f{i}", t) for i, t in enumerate(types)])
    table = pa.table([_random_column(rng, t, 2000) for t in types], schema=schema)
    sink = io.BytesIO()
    writer = JsonlFormat().open_writer(sink, schema)  # type: ignore[arg-type]
    for batch in table.to_batches(700):
        writer.write_batch(batch)
    writer.close()
    lines = sink.getvalue()
    assert b"\\" in lines  # escapes included: the scanner decodes them
    scanner = FlatScanner.of(schema)
    assert scanner is not None
    scanned = scanner.scan(lines)
    assert scanned is not None, "the scanner refused lines dsm wrote"
    with scanner_mode("python"):
        expected = _ChunkParser(schema, "x").parse(lines, 1)
    assert_same_rows(scanned, expected)
    assert scanned.num_rows == 2000
    # and the whole file reads as written
    read = pa.Table.from_batches(
        list(JsonlFormat().iter_batches(io.BytesIO(lines), shard="x", schema=schema)), schema=schema
    )
    assert_same_rows(read, table)


def test_the_scanner_is_built_where_a_compiler_is_present() -> None:
    # The build is optional (no compiler: pyarrow's parser alone), so a C error would otherwise pass unseen.
    compiler = shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0])
    if compiler is None:
        pytest.skip("no C compiler here")
    assert _flatjson._kernel() is not None
    assert FlatScanner.of(pa.schema([("a", pa.int64())])) is not None


@built
def test_the_scanner_can_be_turned_off_and_leaves_other_types_to_pyarrow() -> None:
    with scanner_mode("python"):
        assert FlatScanner.of(pa.schema([("a", pa.int64())])) is None
    assert FlatScanner.of(pa.schema([("a", pa.list_(pa.int64()))])) is None
    assert FlatScanner.of(pa.schema([("a", pa.date32())])) is None
    scanner = FlatScanner.of(pa.schema([("a", pa.int64())]))
    assert scanner is not None
    with scanner_mode("python"):
        assert scanner.scan(b'{"a":1}\n') is None
    scanned = scanner.scan(b'{"a":1}\n')
    assert scanned is not None
    assert scanned.to_pylist() == [{"a": 1}]


# ------------------------------------------------------------------------------------------------ writing

JSON_CASES = sorted(set(TYPE_CASES) - {"float16", "time64", "time32_s", "duration"})


@built
@settings(max_examples=150, deadline=None)
@given(
    names=st.lists(st.sampled_from(JSON_CASES), min_size=0, max_size=6),
    rows=st.integers(0, 40),
    start=st.integers(0, 10),
    keys=st.sampled_from(["c{}", 'é "{}"', "名{}"]),
)
def test_lines_are_joined_to_the_same_bytes_as_arrow_joins_them(
    names: list[str], rows: int, start: int, keys: str
) -> None:
    columns = [column(name, rows + start).slice(start) for name in names]
    if names and rows % 3 == 0:  # and a column of text without nulls, which the join quotes itself
        columns.append(pa.array([f"t{i}\n" for i in range(rows + start)]).slice(start))
    batch = pa.RecordBatch.from_arrays(columns, names=[keys.format(i) for i in range(len(columns))])
    stored = pa.schema([pa.field(f.name, json_stored_type(f.type)) for f in batch.schema])
    batch = convert_batch(batch, stored)  # as the writer is given it
    joined, arrow = both(lambda: encode_lines_bytes(batch).to_pybytes())
    assert joined == arrow == text_buffer(encode_lines(batch)).to_pybytes()
    assert joined.count(b"\n") == batch.num_rows


@st.composite
def _mostly_plain_bytes(draw: st.DrawFn) -> bytes:
    """Bytes that need no escape (ASCII and UTF-8 alike), with a few that do at drawn places: the kernel
    skips blocks of plain bytes, so the ones that matter sit at every place in and across its blocks."""
    size = draw(st.integers(0, 200))
    plain = draw(st.binary(min_size=size, max_size=size))
    out = bytearray(c if c >= 0x20 and c not in b'"\\' else 0x61 for c in plain)
    for _ in range(draw(st.integers(0, 3))):
        special = draw(st.sampled_from([0x22, 0x5C]) | st.integers(0, 0x1F))
        out.insert(draw(st.integers(0, len(out))), special)
    return bytes(out)


_SHORT_ESCAPES = {0x22, 0x5C, 0x0A, 0x0D, 0x09}
"""A quote, a backslash, \\n, \\r and \\t: escaped as two bytes; other control characters as six (\\u00XX)."""


@built
@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=300)
    | st.text(max_size=100).map(lambda t: t.encode("utf-8"))
    | _mostly_plain_bytes(),
    skip=st.integers(0, 7),
)
def test_what_escaping_adds_is_counted_byte_by_byte(data: bytes, skip: int) -> None:
    data = data[min(skip, len(data)) :]  # and from every alignment of the buffer
    raw = np.frombuffer(b"\x00" * skip + data, np.uint8)[skip:]
    expected = sum(1 if c in _SHORT_ESCAPES else 5 for c in data if c < 0x20 or c in _SHORT_ESCAPES)
    assert _flatjson.escape_growth(raw) == expected
    with scanner_mode("python"):
        assert _flatjson.escape_growth(raw) is None


_TEXT_PIECES = [
    "a" * 15,
    "b" * 16,
    "c" * 17,
    "d" * 31,
    "e" * 64,
    " ",
    '"',
    "\\",
    "\n",
    "\r",
    "\t",
    "\x08",
    "\x0c",
    "\x7f",
    "é",
    "名",
    "\u2028",
    "😀",
]


def _escapable_text() -> st.SearchStrategy[str]:
    """Text of plain runs of every length around the kernel's 16-byte steps, and bytes JSON escapes (every
    control character) at drawn places in and across them."""
    piece = st.sampled_from(_TEXT_PIECES) | st.integers(0, 0x1F).map(chr)
    return st.lists(piece, max_size=40).map("".join)


@built
@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.none() | _escapable_text(), max_size=25),
    start=st.integers(0, 5),
    large=st.booleans(),
)
def test_texts_are_escaped_by_the_kernel_as_arrows_replacements_escape_them(
    values: list[str | None], start: int, large: bool
) -> None:
    array = pa.array(values, pa.large_string() if large else pa.string()).slice(min(start, len(values)))
    kernel, arrow = both(lambda: escape_json_strings(array))
    assert isinstance(kernel, pa.Array) and isinstance(arrow, pa.Array)
    kernel.validate(full=True)
    assert kernel.equals(arrow)
    for value, text in zip(array.to_pylist(), kernel.to_pylist(), strict=True):
        assert (text is None) if value is None else json.loads(f'"{text}"') == value
    # a text column without nulls is escaped by the join itself, next to one the join copies as it is
    texts = array.fill_null("")
    batch = pa.RecordBatch.from_arrays(
        [texts, pa.array(["plain"] * len(texts)), pa.array(range(len(texts)))], names=["t", "p", "i"]
    )
    joined, arrow_joined = both(lambda: encode_lines_bytes(batch).to_pybytes())
    assert joined == arrow_joined == text_buffer(encode_lines(batch)).to_pybytes()
    assert [json.loads(line) for line in joined.split(b"\n")[:-1]] == batch.to_pylist()


_NEWLINE_BLOCK = 255 * 32
"""The kernel's count adds 255 blocks of 32 bytes in byte-wide counters: the edges are drawn around it."""


@built
@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(0, 3 * _NEWLINE_BLOCK + 64)
    | st.sampled_from([_NEWLINE_BLOCK - 1, _NEWLINE_BLOCK, _NEWLINE_BLOCK + 1, 2 * _NEWLINE_BLOCK]),
    share=st.sampled_from([0.0, 0.001, 0.1, 0.5, 1.0]),
    seed=st.integers(0, 2**32 - 1),
    skip=st.integers(0, 31),
)
def test_newlines_are_counted_as_numpy_and_bytes_count_them(
    size: int, share: float, seed: int, skip: int
) -> None:
    rng = np.random.default_rng(seed)
    raw = np.where(rng.random(size + skip) < share, 10, rng.integers(0, 256, size + skip)).astype(np.uint8)
    data = raw.tobytes()[skip:]  # from every alignment, the count of every lane up to all 255 blocks
    expected = data.count(b"\n")
    assert _lines.count_newlines(data) == _lines.numpy_newlines(data) == expected
    assert _lines.count_newlines(bytearray(data)) == _lines.count_newlines(memoryview(raw)[skip:]) == expected


def _json_cast(arr: pa.Array) -> pa.Array:
    """Arrow's cast of floats to text, negative zero as JSON needs it: -0.0, not -0."""
    cast = arr.cast(pa.large_string())
    return pc.if_else(pc.equal(cast, "-0"), pa.scalar("-0.0", pa.large_string()), cast)


_EDGE_FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.1, 0.3, 1e-6, 1.5e-6, 9.99999e-7, 1e-7, 1e9, 1e10, 9999999999.5,
    9999999999.999998, 123456789.25, 2.0**49, 2.0**52 - 1, 2.0**52, 2.0**53, 0.30000000000000004, 1 / 3,
    5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, float("nan"), float("inf"), float("-inf"),
    16777216.0, 16777217.0, 8388607.5, 3.4028235e38,
]  # fmt: skip


def _decimals(scale: int) -> st.SearchStrategy[float]:
    """Values with at most ``scale`` fraction digits, as rounded features and prices are."""
    return st.integers(-(10**12), 10**12).map(lambda n: n / 10**scale)


@built
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.one_of(
            st.floats(width=64),
            st.floats(width=32),
            st.integers(0, 12).flatmap(_decimals),
            st.sampled_from(_EDGE_FLOATS),
            st.none(),
        ),
        max_size=40,
    ),
    type_=st.sampled_from([pa.float32(), pa.float64()]),
    start=st.integers(0, 9),
)
def test_the_kernel_writes_floats_as_arrows_cast_does(
    values: list[float | None], type_: pa.DataType, start: int
) -> None:
    """The kernel's float texts are byte for byte Arrow's (the shortest digits that read back), where it
    writes them, but for negative zero (-0.0, not Arrow's -0); every value of an array it writes reads back
    as the same value, negative zero included."""
    with np.errstate(over="ignore"):
        arr = pa.array([1.0] * start + values, type=type_, from_pandas=False).slice(start)
    texts = _flatjson.float_texts(arr)
    if texts is None:  # the caller casts: only for a value not finite, in exponential notation or long
        wide = 7 if type_ == pa.float32() else 16
        assert any(
            "e" in text or "n" in text or len(text.lstrip("-0.").replace(".", "")) >= wide
            for text in arr.cast(pa.large_string()).drop_null().to_pylist()
        )
        return
    assert texts.equals(_json_cast(arr))
    for value, text in zip(arr.to_pylist(), texts.to_pylist(), strict=True):
        assert (value is None) == (text is None)
        if value is not None:
            read = float(text)
            assert (np.float32(read) if type_ == pa.float32() else read) == value or value != value
            assert math.copysign(1, read) == math.copysign(1, value)


@built
@pytest.mark.parametrize(
    ("type_", "scale"),
    [(pa.float64(), 0), (pa.float64(), 3), (pa.float64(), 6), (pa.float32(), 0), (pa.float32(), 3)],
)
def test_rounded_numbers_are_written_by_the_kernel(type_: pa.DataType, scale: int) -> None:
    """Numbers with a few fraction digits (up to 7 digits in all for a float32, which keeps about as many),
    the most common floats of a dataset, take the kernel's path."""
    values = np.round(np.random.default_rng(scale).normal(0, 100, 5000), scale)
    arr = pa.array(values, type=pa.float64()).cast(type_)
    texts = _flatjson.float_texts(arr)
    assert texts is not None and texts.equals(_json_cast(arr))
    assert _flatjson.float_texts(arr.cast(pa.float16())) is None  # not a width the kernel writes


_INT_TYPES = [type_ for type_ in SCALARS if pa.types.is_integer(type_)]


@st.composite
def _int_arrays(draw: st.DrawFn) -> pa.Array:
    """An integer array of any width and sign, sliced, with nulls now and then: values from the whole range,
    its ends, and the numbers of digits around each power of ten (where a digit is added)."""
    type_ = draw(st.sampled_from(_INT_TYPES))
    info = np.iinfo(type_.to_pandas_dtype())
    edges = [int(info.min), int(info.max), 0, 1]
    edges += [sign * 10**k + d for k in range(20) for d in (-1, 0) for sign in (1, -1)]
    value = st.one_of(
        st.integers(int(info.min), int(info.max)),
        st.sampled_from([v for v in edges if info.min <= v <= info.max]),
        st.none(),
    )
    start = draw(st.integers(0, 9))
    values = draw(st.lists(value, max_size=60))
    return pa.array([0] * start + values, type=type_).slice(start)


@built
@settings(max_examples=300, deadline=None)
@given(arr=_int_arrays())
def test_the_kernel_writes_integers_as_arrows_cast_does(arr: pa.Array) -> None:
    """Every integer of every width and sign is written byte for byte as Arrow's cast writes it, a null
    slot null, in a sliced array too; each text reads back as the value."""
    texts = _flatjson.int_texts(arr)
    assert texts is not None
    assert texts.equals(arr.cast(pa.large_string()))
    assert [None if t is None else int(t) for t in texts.to_pylist()] == arr.to_pylist()


@built
@pytest.mark.parametrize("type_", [pa.float32(), pa.float64()])
def test_negative_zero_is_written_as_a_float_with_and_without_the_kernel(type_: pa.DataType) -> None:
    """Where the kernel writes a column (every value finite and positional), negative zero is -0.0 as on the
    cast's path, not the -0 that many JSON readers take for the integer 0."""
    batch = pa.record_batch({"x": pa.array([-0.0, 0.0, 1.5, -2.25], type_)})
    assert _flatjson.float_texts(batch.column(0)) is not None  # the kernel's path
    joined, arrow = both(lambda: encode_lines_bytes(batch).to_pybytes())
    assert joined == arrow == b'{"x":-0.0}\n{"x":0}\n{"x":1.5}\n{"x":-2.25}\n'


# ------------------------------------------------------------------------------------------ long texts

_TEXT_PIECES = st.one_of(
    st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'), max_size=90
    ).map(str.encode),
    st.text(min_size=1, max_size=12).map(lambda t: t.encode("utf-8", "surrogatepass")),  # any character
    st.sampled_from([b'"', b"\\", b"\\n", b"\x00", b"\x1f", b"\t", b"\x7f"]),  # ends, escapes, controls
    st.sampled_from([b"\x80", b"\xc3", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]),
    st.binary(min_size=1, max_size=4),
    st.integers(1, 200).map(lambda n: b"a" * n),  # runs that fill whole blocks
)


@built
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.lists(_TEXT_PIECES, max_size=12).map(b"".join), min_size=1, max_size=4),
    wide=st.booleans(),
    last_newline=st.booleans(),
)
def test_long_texts_are_scanned_as_json_reads_them_and_never_accepted_unless_utf8(
    texts: list[bytes], wide: bool, last_newline: bool
) -> None:
    """Texts of any length, their closing quote, an escape, a control character or a byte that is not
    ASCII anywhere (on either side of the 64-byte blocks the scanner looks at), valid UTF-8 or not: what the
    scanner accepts is what a strict JSON reader reads from the same lines, it never accepts a text that is
    not UTF-8, and it accepts every line of plain texts."""
    schema = pa.schema([("f", pa.large_string() if wide else pa.string())])
    scanner = FlatScanner.of(schema)
    assert scanner is not None
    chunk = b"\n".join(b'{"f":"' + text + b'"}' for text in texts) + (b"\n" if last_newline else b"")
    got = scanner.scan(chunk)
    try:
        want = [json.loads(line.decode("utf-8"))["f"] for line in chunk.split(b"\n")[: len(texts)]]
    except (UnicodeDecodeError, ValueError, TypeError, KeyError):
        want = None
    if got is not None:
        assert want is not None, f"the scanner accepts {chunk[:200]!r}, a strict JSON reader does not"
        assert got.column("f").to_pylist() == want
    plain = all(not set(text) & set(b'"\\' + bytes(range(0x20))) for text in texts)
    if plain and want is not None:
        assert got is not None, f"the scanner refuses plain texts: {chunk[:200]!r}"
