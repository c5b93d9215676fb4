"""Row groups assembled from the pages of their source (``dsm.formats._stored_pages``): runs of consecutive
groups, or parts of one group cut at any rows, that pyarrow wrote with any options (dictionaries that fall
back to plain pages or hold repeated values, pages of either version, nulls, codecs, CRCs or none) become
groups that every reader decodes to the source's rows, with the statistics pyarrow's writer gives the same
values, and with the text and bytes columns taken from the source's pages wherever their layout allows."""

from __future__ import annotations

import io
import itertools
import random
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dsm.formats._stored_groups import read_footer, read_schema, template_footer
from dsm.formats._stored_pages import Assembler, with_statistics
from dsm.formats._thrift import value_of
from dsm.formats.parquet import ParquetFormat
from tests.formats.test_stored_groups import _check_layout, _pyarrow_file, _rows, _same_rows

OUTCOMES: Counter[str] = Counter()
"""Of the generated text and bytes columns: assembled from their pages, or encoded again."""

_TYPES = [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]
_ALPHABET = "abcdefgh é中\u00ff\U0001f600\x00"


def _texts(rng: random.Random, rows: int, kind: str, nulls: float, long: bool) -> list[str | None]:
    """Values of one column: distinct (as most text is), drawn from a few (a real dictionary), or both."""
    pool = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 5))) for _ in range(3)]
    out: list[str | None] = []
    for i in range(rows):
        if rng.random() < nulls:
            out.append(None)
        elif kind == "repeated" or (kind == "mixed" and rng.random() < 0.3):
            out.append(rng.choice(pool))
        else:
            size = rng.randint(0, 5000 if long and rng.random() < 0.05 else 40)
            out.append(f"{i}:" + "".join(rng.choice(_ALPHABET) for _ in range(size)))
    return out


def _table(data: st.DataObject) -> pa.Table:
    rows = data.draw(st.integers(0, 300), label="rows")
    rng = random.Random(data.draw(st.integers(0, 1 << 30), label="seed"))
    columns: dict[str, pa.Array] = {"id": pa.array(range(rows), pa.int64())}
    fields = [pa.field("id", pa.int64(), nullable=data.draw(st.booleans(), label="id nullable"))]
    for n in range(data.draw(st.integers(1, 3), label="text columns")):
        kind = data.draw(st.sampled_from(["distinct", "repeated", "mixed"]), label=f"t{n} values")
        type_ = data.draw(st.sampled_from(_TYPES), label=f"t{n} type")
        nullable = data.draw(st.booleans(), label=f"t{n} nullable")
        nulls = data.draw(st.sampled_from([0.0, 0.1, 0.9, 1.0]), label=f"t{n} nulls") if nullable else 0.0
        values = _texts(rng, rows, kind, nulls, long=data.draw(st.booleans(), label=f"t{n} long"))
        encoded = [v.encode("utf-8") if v is not None and pa.types.is_binary(type_) else v for v in values]
        if pa.types.is_large_binary(type_):
            encoded = [v.encode("utf-8") if v is not None else None for v in values]
        columns[f"t{n}"] = pa.array(encoded, type_)
        fields.append(pa.field(f"t{n}", type_, nullable=nullable))
    if data.draw(st.booleans(), label="nested columns"):
        columns["tags"] = pa.array([[f"x{i % 3}"] * (i % 3) for i in range(rows)], pa.list_(pa.string()))
        columns["pair"] = pa.array([{"a": f"p{i}", "b": i} for i in range(rows)])
        fields += [pa.field("tags", columns["tags"].type), pa.field("pair", columns["pair"].type)]
    order = data.draw(st.permutations(list(range(len(fields)))), label="column order")
    schema = pa.schema([fields[i] for i in order])
    return pa.table({f.name: columns[f.name] for f in schema}, schema=schema)


def _options(data: st.DataObject) -> dict[str, Any]:
    options: dict[str, Any] = {
        "row_group_size": data.draw(st.integers(1, 120), label="group rows"),
        "compression": data.draw(st.sampled_from(["zstd", "snappy", "none"]), label="codec"),
        "use_dictionary": data.draw(st.booleans(), label="dictionary"),
        "data_page_version": data.draw(st.sampled_from(["1.0", "2.0"]), label="page version"),
        "write_page_checksum": data.draw(st.booleans(), label="crcs"),
        "write_statistics": data.draw(st.sampled_from([True, True, True, False]), label="statistics"),
    }
    limit = data.draw(st.sampled_from([None, 16, 300, 1 << 20]), label="dictionary limit")
    if limit is not None:
        options["dictionary_pagesize_limit"] = limit
    page = data.draw(st.sampled_from([None, 1, 200]), label="page bytes")
    if page is not None:
        options["data_page_size"] = page
    return options


def _pieces(data: st.DataObject, group_rows: list[int]) -> list[list[tuple[int, int, int]]]:
    """The source's rows as the pieces of each group to assemble (source group, first and stop rows of
    it): runs of consecutive whole groups, or one group cut at any rows into parts."""
    out, index = [], 0
    while index < len(group_rows):
        rows = group_rows[index]
        if rows > 1 and data.draw(st.booleans(), label="parts"):
            cuts = data.draw(st.sets(st.integers(1, rows - 1), max_size=4), label="cuts")
            edges = [0, *sorted(cuts), rows]
            out += [[(index, a, b)] for a, b in itertools.pairwise(edges)]
            index += 1
            continue
        length = data.draw(st.integers(1, len(group_rows) - index), label="run")
        out.append([(i, 0, group_rows[i]) for i in range(index, index + length)])
        index += length
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_groups_assembled_from_pages_hold_the_rows_and_their_statistics(
    data: st.DataObject,
) -> None:
    table = _table(data)
    options = _options(data)
    written_source = _pyarrow_file(table, **options)
    assume(written_source is not None)
    source = io.BytesIO(written_source)
    fmt = ParquetFormat(compression=options["compression"])
    storage = fmt.storage(table.schema)
    template, _ = template_footer(storage.schema, options["compression"])
    footer = read_footer(io.BytesIO(source.getvalue()))
    assert read_schema(io.BytesIO(source.getvalue())) == footer.schema
    assume(footer.schema == template.schema)
    handle = pa.BufferReader(source.getvalue())
    out = io.BytesIO()
    writer = fmt.open_writer(out, storage.schema)
    texts = [f.name for f in storage.schema if f.name.startswith("t")]
    codec = value_of(value_of(value_of(footer.row_groups[0], 1).values[0], 3), 4) if footer.row_groups else 0
    assembler = Assembler(handle, footer, template, storage.schema, fmt.options(), codec, where="source")
    starts = [0]
    for group in footer.row_groups:
        starts.append(starts[-1] + value_of(group, 3))
    expected = pa.Table.from_batches([storage.convert(b) for b in table.to_batches()], schema=storage.schema)
    for pieces in _pieces(data, [value_of(group, 3) for group in footer.row_groups]):
        groups = sorted({index for index, _, _ in pieces})
        first = starts[pieces[0][0]] + pieces[0][1]
        rows = sum(stop - start for _, start, stop in pieces)
        columns = assembler.columns(groups)
        OUTCOMES["text columns"] += len(texts)
        names = assembler.others(columns)
        others = expected.select(names).slice(first, rows) if names else None
        built = assembler.assemble(pieces, columns, others) if columns else None
        if built is None:
            for batch in table.slice(first, rows).to_batches():
                writer.write_batch(storage.convert(batch))
            continue
        stored, observed = built
        OUTCOMES["assembled"] += len(observed)
        assert stored.rows == rows
        for batch in pq.read_table(io.BytesIO(stored.alone(template).to_pybytes())).to_batches():
            for column in observed:
                column.add(batch)
        stored = with_statistics(stored, observed)
        _check_as_pyarrow_writes(stored, observed, expected.slice(first, rows), options["compression"])
        writer.write_stored(stored)
    writer.close()
    written = out.getvalue()

    _check_layout(written)
    assert _same_rows(_rows(written), expected)
    _check_statistics(written, storage.schema)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.parquet"
        path.write_bytes(written)
        with duckdb.connect() as con:
            for name in texts:
                got = con.sql(f"SELECT \"{name}\" FROM read_parquet('{path}') ORDER BY id").fetchall()
                assert [_bytes(v) for (v,) in got] == [_bytes(v) for v in expected.column(name).to_pylist()]


def _check_as_pyarrow_writes(stored: Any, observed: list[Any], rows: pa.Table, compression: str) -> None:
    """Each assembled chunk's statistics and size statistics are those pyarrow's writer gives its values."""
    for column in observed:
        sink = pa.BufferOutputStream()
        values = rows.select([column.name])
        pq.write_table(values, sink, compression=compression, use_dictionary=False)
        footer = read_footer(pa.BufferReader(sink.getvalue()))
        meta = value_of(value_of(footer.row_groups[0], 1).values[0], 3)
        ours = stored.columns[column.chunk][1]
        for id_ in (5, 12, 16):
            assert value_of(ours, id_) == value_of(meta, id_), (column.name, id_)


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode("utf-8") if isinstance(value, str) else value


def _check_statistics(written: bytes, schema: pa.Schema) -> None:
    """Every text or bytes chunk's statistics are its values' least and greatest (bytewise) and nulls."""
    read = pq.ParquetFile(io.BytesIO(written))
    for index in range(read.metadata.num_row_groups):
        rows = read.read_row_group(index)
        group = read.metadata.row_group(index)
        for column in range(group.num_columns):
            chunk = group.column(column)
            name = chunk.path_in_schema
            if name not in schema.names or not chunk.is_stats_set:
                continue
            values = rows.column(name)
            stats = chunk.statistics
            assert stats.null_count == values.null_count, (index, name)
            if not (pa.types.is_string(values.type) or pa.types.is_binary(values.type)):
                continue
            if values.null_count == len(values):
                assert not stats.has_min_max
                continue
            low, high = (_bytes(v.as_py()) for v in pc.min_max(values).values())
            assert low is not None and high is not None
            if not stats.has_min_max:  # pyarrow's writer drops a minimum or maximum of over 4,096 bytes
                assert max(len(low), len(high)) > 4096, (index, name)
                continue
            assert (_bytes(stats.min), _bytes(stats.max)) == (low, high), (index, name)


def test_most_generated_text_columns_are_assembled() -> None:
    if not OUTCOMES["text columns"]:
        test_generated_groups_assembled_from_pages_hold_the_rows_and_their_statistics()
    assert OUTCOMES["assembled"] >= OUTCOMES["text columns"] // 4, dict(OUTCOMES)
