"""Parquet passes the conformance suite; plus row groups, footer counts and schema casting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conformance import TYPE_CASES, FormatConformance, assert_same_rows

from dsm.errors import InputError, SchemaError
from dsm.formats.parquet import ParquetFormat


class TestParquet(FormatConformance):
    format_name = "parquet"
    supported = frozenset(TYPE_CASES)


def _write(path: Path, table: pa.Table, **options: object) -> None:
    with open(path, "wb") as handle, ParquetFormat(**options).open_writer(handle, table.schema) as writer:  # type: ignore[arg-type]
        for batch in table.to_batches(max_chunksize=1000):
            writer.write_batch(batch)


def test_row_groups_have_the_configured_size_whatever_the_batches(tmp_path: Path) -> None:
    table = pa.table({"x": pa.array(range(2500))})
    _write(tmp_path / "a.parquet", table, row_group_size=1024)
    meta = pq.ParquetFile(tmp_path / "a.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [1024, 1024, 452]


def test_options_reach_the_file(tmp_path: Path) -> None:
    table = pa.table({"x": pa.array(range(10))})
    _write(tmp_path / "a.parquet", table, compression="gzip", write_statistics=False)
    column = pq.ParquetFile(tmp_path / "a.parquet").metadata.row_group(0).column(0)
    assert column.compression == "GZIP"
    assert not column.is_stats_set


def test_reading_with_a_wider_schema_casts_and_a_lossy_one_names_the_field(tmp_path: Path) -> None:
    table = pa.table({"x": pa.array([1, 300], pa.int32())})
    _write(tmp_path / "a.parquet", table)
    fmt = ParquetFormat()
    with open(tmp_path / "a.parquet", "rb") as handle:
        wide = pa.schema([("x", pa.int64())])
        assert_same_rows(
            pa.Table.from_batches(fmt.iter_batches(handle, shard="a.parquet", schema=wide)), table.cast(wide)
        )
    with (
        open(tmp_path / "a.parquet", "rb") as handle,
        pytest.raises(SchemaError, match=r'a.parquet field "x"'),
    ):
        list(fmt.iter_batches(handle, shard="a.parquet", schema=pa.schema([("x", pa.int8())])))


def test_a_field_missing_from_the_file_is_named(tmp_path: Path) -> None:
    _write(tmp_path / "a.parquet", pa.table({"x": [1]}))
    with open(tmp_path / "a.parquet", "rb") as handle, pytest.raises(SchemaError, match='"y"'):
        list(ParquetFormat().iter_batches(handle, shard="a.parquet", schema=pa.schema([("y", pa.int64())])))


def test_nulls_in_a_non_nullable_field_are_refused(tmp_path: Path) -> None:
    _write(tmp_path / "a.parquet", pa.table({"x": [1, None]}))
    schema = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    with open(tmp_path / "a.parquet", "rb") as handle, pytest.raises(SchemaError, match="not nullable"):
        list(ParquetFormat().iter_batches(handle, shard="a.parquet", schema=schema))


def test_unknown_compression_is_refused() -> None:
    with pytest.raises(InputError, match="compression"):
        ParquetFormat(compression="rar")


def _dictionary_pages(path: Path) -> dict[str, bool]:
    meta = pq.ParquetFile(path).metadata
    return {
        meta.row_group(0).column(c).path_in_schema: meta.row_group(0).column(c).has_dictionary_page
        for c in range(meta.num_columns)
    }


def test_use_dictionary_leaves_out_the_columns_of_mostly_distinct_values(tmp_path: Path) -> None:
    """A column of mostly distinct numbers or instants is written plain (a dictionary as large as its
    values costs the hashing of every value and saves nothing); repeated values, text, nested leaves and
    small files keep pyarrow's choice; the choice depends on the rows, not on how they came in batches."""
    rows = 5000
    rng = np.random.default_rng(3)
    table = pa.table(
        {
            "id": pa.array(np.arange(rows)),
            "score": pa.array(rng.random(rows)),
            "at": pa.array(np.arange(rows) * 1_000_000, pa.timestamp("us", "UTC")),
            "text": pa.array([f"row {i} of many" for i in range(rows)]),
            "label": pa.array(rng.choice(["cat", "dog", "fish"], rows)),
            "bucket": pa.array(rng.integers(0, 100, rows)),
            "half": pa.array(np.arange(rows) // 2),  # half distinct: plain
            "quarter": pa.array(np.arange(rows) // 4),  # exactly a quarter distinct: a dictionary
            "nested": pa.array([{"x": float(i)} for i in range(rows)]),
        }
    )
    _write(tmp_path / "a.parquet", table)
    assert _dictionary_pages(tmp_path / "a.parquet") == {
        "id": False,
        "score": False,
        "at": False,
        "text": True,
        "label": True,
        "bucket": True,
        "half": False,
        "quarter": True,
        "nested.x": True,
    }
    assert pq.read_table(tmp_path / "a.parquet").equals(table)
    with open(tmp_path / "b.parquet", "wb") as handle, ParquetFormat().open_writer(handle, table.schema) as w:  # type: ignore[arg-type]
        for batch in table.to_batches(max_chunksize=333):
            w.write_batch(batch)
    assert (tmp_path / "b.parquet").read_bytes() == (tmp_path / "a.parquet").read_bytes()

    _write(tmp_path / "small.parquet", table.slice(0, 500))  # too few values to judge: pyarrow's default
    assert all(_dictionary_pages(tmp_path / "small.parquet").values())
    _write(tmp_path / "none.parquet", table, use_dictionary=False)
    assert not any(_dictionary_pages(tmp_path / "none.parquet").values())
    _write(tmp_path / "empty.parquet", table.slice(0, 0))
    assert pq.read_table(tmp_path / "empty.parquet").schema.equals(table.schema)
