"""CSV quotes follow RFC 4180 strictly: the files other tools write read back exactly, whole and by row
position, and any text with a quote RFC 4180 does not allow is refused naming the line, never read the
lenient way pyarrow's parser would. The oracle is a byte-at-a-time state machine written here, which shares
nothing with dsm's numpy scan of the quotes.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError, SchemaError
from dsm.formats._quotes import MisplacedQuote, QuoteCheck
from dsm.formats.csv import CsvFormat
from tests.independent import comparable, read_rows

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("text", pa.string())])
_SHARD = "part-0.csv"


def quote_problem(data: bytes, delimiter: int = ord(",")) -> tuple[int, str, int | None] | None:
    """The first quote RFC 4180 does not allow: (its offset, what is wrong, where the value it closes
    opened), or None. One byte at a time through the grammar's states."""
    start, unquoted, quoted, after_quote = range(4)
    state, opened = start, 0
    bounds = (delimiter, ord("\n"), ord("\r"))
    i = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    while i < len(data):
        byte = data[i]
        if state == start:
            if byte == ord('"'):
                state, opened = quoted, i
            elif byte not in bounds:
                state = unquoted
        elif state == unquoted:
            if byte == ord('"'):
                return i, "opening", None
            if byte in bounds:
                state = start
        elif state == quoted:
            if byte == ord('"'):
                state = after_quote
        elif byte == ord('"'):
            state = quoted  # a doubled quote
        elif byte in bounds:
            state = start
        else:
            return i - 1, "closing", opened
        i += 1
    if state == quoted:
        return opened, "unclosed", None
    return None


def _line(data: bytes, offset: int) -> int:
    """Lines end at \\n, \\r\\n or a lone \\r, as Python's csv module counts them."""
    return len(re.findall(rb"\r\n|\r|\n", data[:offset])) + 1


_TEXT = st.text(
    alphabet=st.sampled_from(['"', ",", "\n", "\r", " ", "a", "é", "\t", "'"])
    | st.characters(blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)


def _rows(texts: list[str]) -> pa.Table:
    return pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts)}, schema=_SCHEMA)


def _write_pandas(table: pa.Table, path: Path) -> None:
    table.to_pandas().to_csv(path, index=False)


def _write_polars(table: pa.Table, path: Path) -> None:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    frame.write_csv(path)


def _write_duckdb(table: pa.Table, path: Path) -> None:
    connection = duckdb.connect()
    connection.register("source_rows", table)
    connection.execute(f"copy source_rows to '{path}' (format csv, header)")


def _python_csv(quoting: int) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out, quoting=quoting)
            writer.writerow(table.column_names)
            writer.writerows([row["id"], row["text"]] for row in table.to_pylist())

    return write


def _write_pyarrow(table: pa.Table, path: Path) -> None:
    pcsv.write_csv(table, path, pcsv.WriteOptions(quoting_style="needed"))


WRITERS: dict[str, Callable[[pa.Table, Path], None]] = {
    "pandas": _write_pandas,
    "polars": _write_polars,
    "duckdb": _write_duckdb,
    "python-minimal": _python_csv(csv.QUOTE_MINIMAL),
    "python-all": _python_csv(csv.QUOTE_ALL),
    "pyarrow": _write_pyarrow,
}


def _read(data: bytes) -> pa.Table:
    batches = list(CsvFormat().iter_batches(io.BytesIO(data), shard=_SHARD, schema=_SCHEMA, batch_rows=3))
    return pa.Table.from_batches(batches, schema=_SCHEMA)


def _read_by_position(data: bytes, start: int, stop: int) -> pa.Table:
    fmt = CsvFormat()
    index = fmt.index_shard(io.BytesIO(data), shard=_SHARD, schema=_SCHEMA)
    batches = fmt.read_rows(io.BytesIO(data), index, shard=_SHARD, start=start, stop=stop, schema=_SCHEMA)
    return pa.Table.from_batches(list(batches), schema=_SCHEMA)


@pytest.mark.parametrize("writer", sorted(WRITERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_TEXT, min_size=1, max_size=12), data=st.data())
def test_text_other_tools_quote_reads_back_exactly(
    writer: str, texts: list[str], data: st.DataObject, tmp_path: Path
) -> None:
    if writer == "pandas":
        # pandas ends lines with \n and leaves a \r unquoted, which every CSV reader (pandas' own too)
        # takes for the end of a line: such text does not round-trip through pandas.
        assume(not any("\r" in text for text in texts))
    table = _rows(texts)
    path = tmp_path / _SHARD
    WRITERS[writer](table, path)
    raw = path.read_bytes()
    assert quote_problem(raw) is None, raw  # what the tool wrote is RFC 4180
    assert comparable(_read(raw)) == comparable(table)
    start = data.draw(st.integers(0, len(texts) - 1))
    stop = data.draw(st.integers(start + 1, len(texts)))
    assert comparable(_read_by_position(raw, start, stop)) == comparable(table.slice(start, stop - start))


_EDITS = st.lists(
    st.tuples(st.sampled_from(["insert", "replace", "delete"]), st.floats(0, 1), st.sampled_from(b'",\n\rx')),
    min_size=1,
    max_size=3,
)


def _edited(data: bytes, edits: list[tuple[str, float, int]]) -> bytes:
    out = bytearray(data)
    for kind, where, byte in edits:
        at = min(int(where * len(out)), len(out) - 1)
        if kind == "insert":
            out.insert(at, byte)
        elif kind == "replace":
            out[at] = byte
        elif len(out) > 1:
            del out[at]
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=8), edits=_EDITS)
def test_a_quote_rfc_4180_does_not_allow_is_refused_naming_its_line(
    texts: list[str], edits: list[tuple[str, float, int]]
) -> None:
    sink = io.BytesIO()
    table = _rows(texts)
    with CsvFormat().open_writer(sink, _SCHEMA) as writer:
        writer.write_batch(table.to_batches()[0])
    data = _edited(sink.getvalue(), edits)
    problem = quote_problem(data)
    try:
        read = _read(data)
    except (FormatError, SchemaError) as exc:
        if problem is not None:
            offset, kind, opened = problem
            where = f"shard {_SHARD} line {_line(data, offset)}"
            if opened is not None and _line(data, opened) != _line(data, offset):
                where += f" (a quoted value opened on line {_line(data, opened)})"
            words = {"opening": "a quote inside an unquoted value", "closing": "text after the closing quote"}
            quote_error = f"{where}: {words.get(kind, 'a quoted value is never closed')}"
            # That error, or one about a line before it (a header that is not the schema's, say).
            named = re.match(rf"shard {_SHARD} line (\d+)", str(exc))
            earlier = named is not None and int(named.group(1)) < _line(data, offset)
            assert str(exc).startswith(quote_error) or earlier, (str(exc), quote_error, data)
        return
    assert problem is None, (problem, data, read.to_pylist())
    # RFC 4180 text: dsm's rows are the independent parser's, and a read by position gives the same rows.
    path_rows = read_rows_of(data)
    assert comparable(read) == path_rows
    if read.num_rows:
        assert comparable(_read_by_position(data, 0, read.num_rows)) == path_rows


def read_rows_of(data: bytes) -> list[object]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / _SHARD
        path.write_bytes(data)
        return read_rows(path, "csv", _SCHEMA, {})


def test_a_quote_in_an_unquoted_value_is_refused_by_every_read() -> None:
    """pyarrow reads `5" disk` as the text it is, but the record scan would count its quote as opening a
    value: the two would disagree on where the next record starts. Every read path refuses it alike."""
    data = b'id,text\n0,"a"\n1,5" disk\n2,"b\nc"\n'
    fmt = CsvFormat()
    message = f"shard {_SHARD} line 3: a quote inside an unquoted value"
    with pytest.raises(FormatError, match=message):
        _read(data)
    with pytest.raises(FormatError, match=message):
        fmt.index_shard(io.BytesIO(data), shard=_SHARD, schema=_SCHEMA)
    with pytest.raises(FormatError, match=message):
        fmt.read_schema(io.BytesIO(data), shard=_SHARD)


def test_a_file_that_ends_inside_a_quoted_value_is_refused() -> None:
    """pyarrow's parser would read the rest of the file into the value."""
    with pytest.raises(FormatError, match=f"shard {_SHARD} line 2: a quoted value is never closed"):
        _read(b'id,text\n0,"a\n1,b\n')


def _checked(data: bytes, cuts: list[int]) -> tuple[int, str, int | None] | None:
    check = QuoteCheck(delimiter=ord(","))
    try:
        for lo, hi in zip([0, *cuts], [*cuts, len(data)], strict=True):
            check.feed(data[lo:hi])
        check.finish()
    except MisplacedQuote as exc:
        return exc.offset, exc.kind, exc.opened
    return None


@settings(max_examples=300, deadline=None)
@given(
    data=st.builds(
        bytes.__add__,
        st.sampled_from([b"", b"\xef\xbb\xbf"]),
        st.binary(max_size=40).map(lambda b: bytes(b'",\n\rx\xef\xbb\xbf'[v % 8] for v in b)),
    ),
    cuts=st.lists(st.floats(0, 1), max_size=4),
)
@example(data=b'\xef\xbb\xbf"', cuts=[0.5])  # a byte-order mark cut between the first two chunks
def test_the_quote_scan_finds_what_the_grammar_finds_however_the_text_is_cut(
    data: bytes, cuts: list[float]
) -> None:
    """Any bytes of quotes, delimiters, newlines and byte-order marks, the text starting with one half the
    time, fed in chunks cut anywhere (inside the leading mark too)."""
    at = sorted({int(c * len(data)) for c in cuts})
    found = _checked(data, at)
    expected = quote_problem(data)
    if expected is not None and expected[1] != "closing":
        found = found if found is None else (found[0], found[1], None)
    assert found == expected, (data, at)


def test_pandas_reads_what_dsm_writes_with_quotes() -> None:
    """The other direction: dsm's quoting is what pandas parses back."""
    table = _rows(['say "hi"', "a,b", "two\nlines", 'ends with a quote"'])
    sink = io.BytesIO()
    with CsvFormat().open_writer(sink, _SCHEMA) as writer:
        writer.write_batch(table.to_batches()[0])
    frame = pd.read_csv(io.BytesIO(sink.getvalue()), keep_default_na=False)
    assert frame["text"].tolist() == table.column("text").to_pylist()


@pytest.mark.parametrize("shift", [-2, -1, 0, 1, 2])
def test_a_quoted_crlf_and_a_long_value_where_a_read_block_ends_come_back_whole(shift: int) -> None:
    """pyarrow's streaming reader drops the ``\\n`` of a quoted ``\\r\\n`` split by one of its block
    boundaries, and has read a value longer than a block short. dsm hands it only whole records: the
    value holding ``\\r\\n`` sits across the first 4 MiB read, for each of five shifts, and another value is
    longer than a read."""
    block = 4 * 1024 * 1024
    head = b'id,text\n0,"' + b"a" * (block - len(b'id,text\n0,"') - 1 + shift)
    data = head + b'\r\nb"\n1,"' + b"z" * (block + 12_345) + b'"\n2,"c"\n'
    assert data.index(b"\r\n") in range(block - 3, block + 2)
    assert comparable(_read(data)) == comparable(
        _rows(["a" * (len(head) - len(b'id,text\n0,"')) + "\r\nb", "z" * (block + 12_345), "c"])
    )
    assert comparable(_read_by_position(data, 1, 3)) == comparable(
        _rows(["", "z" * (block + 12_345), "c"]).slice(1)
    )
