"""Row groups assembled from the pages of small source groups (``dsm.formats._stored_pages``): runs of
consecutive groups that pyarrow wrote with any options (dictionaries that fall back to plain pages or hold
repeated values, pages of either version, nulls, codecs, CRCs or none) become groups that every reader
decodes to the source's rows, with a footer whose statistics are those of the values, and with the text
and bytes columns taken from the source's pages wherever their dictionaries allow it."""

from __future__ import annotations

import io
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
from dsm.formats._stored_pages import assemble_group
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


def _runs(data: st.DataObject, groups: int) -> list[list[int]]:
    """The source's groups cut into runs of consecutive ones, each to be assembled into one group."""
    runs, index = [], 0
    while index < groups:
        length = data.draw(st.integers(1, max(1, groups - index)), label="run")
        runs.append(list(range(index, index + length)))
        index += length
    return runs


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
    parquet = pq.ParquetFile(handle)
    out = io.BytesIO()
    writer = fmt.open_writer(out, storage.schema)
    first = 0
    texts = [f.name for f in storage.schema if f.name.startswith("t")]
    for run in _runs(data, len(footer.row_groups)):
        rows = sum(value_of(footer.row_groups[i], 3) for i in run)
        built = assemble_group(
            handle, parquet, footer, run, template, storage.schema, fmt.options(), where="source"
        )
        OUTCOMES["text columns"] += len(texts)
        if built is None:
            for batch in table.slice(first, rows).to_batches():
                writer.write_batch(storage.convert(batch))
        else:
            stored, bounds = built
            OUTCOMES["assembled"] += len(bounds)
            assert stored.rows == rows
            # the bounds the rewrite checks hold for the group decoded alone
            for batch in pq.read_table(io.BytesIO(stored.alone(template).to_pybytes())).to_batches():
                for column in bounds:
                    column.add(batch)
            assert all(column.holds() for column in bounds)
            writer.write_stored(stored)
        first += rows
    writer.close()
    written = out.getvalue()

    _check_layout(written)
    expected = pa.Table.from_batches([storage.convert(b) for b in table.to_batches()], schema=storage.schema)
    assert _same_rows(_rows(written), expected)
    _check_statistics(written, storage.schema)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.parquet"
        path.write_bytes(written)
        with duckdb.connect() as con:
            for name in texts:
                got = con.sql(f"SELECT \"{name}\" FROM read_parquet('{path}') ORDER BY id").fetchall()
                assert [_bytes(v) for (v,) in got] == [_bytes(v) for v in expected.column(name).to_pylist()]


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
