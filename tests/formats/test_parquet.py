"""Parquet passes the conformance suite; plus row groups, footer counts and schema casting."""

from __future__ import annotations

import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conformance import TYPE_CASES, FormatConformance, assert_same_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    """A column of mostly distinct numbers, instants, text or bytes is written plain (a dictionary as large
    as its values costs the hashing of every value and saves nothing); repeated values, nested leaves and
    small files keep pyarrow's choice; the choice depends on the rows, not on how they came in batches."""
    rows = 5000
    rng = np.random.default_rng(3)
    table = pa.table(
        {
            "id": pa.array(np.arange(rows)),
            "score": pa.array(rng.random(rows)),
            "at": pa.array(np.arange(rows) * 1_000_000, pa.timestamp("us", "UTC")),
            "text": pa.array([f"row {i} of many" for i in range(rows)]),
            "blob": pa.array([i.to_bytes(4, "little") for i in range(rows)], pa.binary()),
            "label": pa.array(rng.choice(["cat", "dog", "fish"], rows)),
            "later": pa.array(["same"] * 2048 + [f"t{i}" for i in range(rows - 2048)]),  # judged by the first
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
        "text": False,
        "blob": False,
        "label": True,
        "later": True,
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


_PLAIN_CANDIDATES = [
    pa.string(),
    pa.binary(),
    pa.int8(),
    pa.int64(),
    pa.uint32(),
    pa.float32(),
    pa.float64(),
    pa.timestamp("ms", "UTC"),
    pa.date32(),
    pa.time64("us"),
    pa.duration("s"),
    pa.decimal128(12, 3),
]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kinds=st.lists(st.sampled_from(_PLAIN_CANDIDATES), min_size=1, max_size=4),
    distinct=st.lists(st.sampled_from([1, 3, 4, 5, 50, 3000]), min_size=4, max_size=4),
    nulls=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_files_written_with_either_dictionary_choice_are_published_verified(
    tmp_path_factory: pytest.TempPathFactory,
    kinds: list[pa.DataType],
    distinct: list[int],
    nulls: bool,
    seed: int,
) -> None:
    """Columns of 3,000 rows of 1 to 3,000 distinct values each (so both choices are made) through a
    reshard: the new version verifies deep, re-registers to the same fingerprint and reads back as the
    source's rows without dsm."""
    import dsm
    from tests.trust_support import check_published, register_table, write_shards

    rows = 3000
    rng = np.random.default_rng(seed)
    columns = {}
    for i, kind in enumerate(kinds):
        codes = rng.integers(0, distinct[i], rows) % (100 if kind == pa.int8() else rows)
        mask = (codes % 7 == 0) if nulls else None
        if pa.types.is_decimal(kind):
            column = pa.array([decimal.Decimal(int(c)).scaleb(-3) for c in codes], kind)
        elif kind in (pa.string(), pa.binary()):
            column = pa.array([f"value {c}" for c in codes]).cast(kind)
        elif pa.types.is_floating(kind):
            column = pa.array(codes * 0.5).cast(kind)
        elif pa.types.is_date(kind):
            column = pa.array(codes.astype(np.int32)).cast(kind)
        else:
            column = pa.array(codes).cast(kind)
        if mask is not None:
            column = pc.if_else(pa.array(mask), pa.nulls(rows, kind), column)
        columns[f"c{i}"] = column
    table = pa.table(columns)
    folder = tmp_path_factory.mktemp("dictionary")
    registry = str(folder / "registry")
    write_shards(folder / "src", table, "parquet", 2)
    source = register_table(folder / "src", "parquet", table.schema, registry, "src")
    result = dsm.reshard(source.ref, str(folder / "out"), num_shards=2, registry=registry)
    check_published(result.contract, table, registry, ordered=True)
    for shard in result.contract.shards:  # 1,500 rows each: enough values to judge
        pages = _dictionary_pages(folder / "out" / shard.path)
        for i, kind in enumerate(kinds):
            if distinct[i] == 3000 and kind != pa.int8():
                assert not pages[f"c{i}"], (kind, "mostly distinct: plain")
            elif distinct[i] <= 50 and table.column(f"c{i}").null_count < rows:
                # (a column of nulls alone may be taken from the source's pages: nothing to choose)
                assert pages[f"c{i}"], (kind, "repeated: a dictionary")
