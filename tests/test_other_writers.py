"""Files other tools wrote (DuckDB, Polars, pandas, pyarrow with odd options) register to the same row
fingerprint as the table they hold, and every conversion of them publishes a version that verifies deep."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsm
from dsm.hashing.fingerprint import digest_batches

ROWS = 9


def _table(*, nested: bool) -> pa.Table:
    columns = {
        "id": pa.array(range(ROWS), pa.int64()),
        "name": pa.array([None if i == 4 else f'n{i} "q", é' for i in range(ROWS)]),
        "score": pa.array([i * 0.25 - 1 for i in range(ROWS)]),
        "flag": pa.array([i % 2 == 0 for i in range(ROWS)]),
        "day": pa.array(
            [datetime.date(2024, 1, 1) + datetime.timedelta(i) for i in range(ROWS)], pa.date32()
        ),
        "ts": pa.array([1_700_000_000_000_000 + i for i in range(ROWS)], pa.timestamp("us")),
    }
    if nested:
        columns["nums"] = pa.array([[i, i + 1] if i % 3 else [] for i in range(ROWS)], pa.list_(pa.int64()))
    return pa.table(columns)


def _duckdb(kind: str) -> Callable[[pa.Table, Path], None]:
    options = {
        "parquet": "(format parquet, row_group_size 2)",
        "csv": "(format csv, header)",
        "jsonl": "(format json)",
    }

    def write(table: pa.Table, path: Path) -> None:
        relation = duckdb.from_arrow(table)
        relation.create_view("source_rows")
        duckdb.sql(f"copy source_rows to '{path}' {options[kind]}")

    return write


def _polars(kind: str) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        {"parquet": frame.write_parquet, "csv": frame.write_csv, "jsonl": frame.write_ndjson}[kind](path)

    return write


def _pandas(kind: str) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        frame = table.to_pandas()
        if kind == "parquet":
            frame.to_parquet(path, index=False)
        elif kind == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_json(path, orient="records", lines=True, date_format="iso", date_unit="us")

    return write


def _pyarrow_odd(table: pa.Table, path: Path) -> None:
    pq.write_table(
        table,
        path,
        row_group_size=2,
        data_page_version="2.0",
        use_dictionary=False,
        compression="brotli",
        write_statistics=False,
        column_encoding={"score": "BYTE_STREAM_SPLIT"},
        write_page_checksum=True,
    )


WRITERS: dict[str, tuple[str, Callable[[pa.Table, Path], None]]] = {
    "duckdb-parquet": ("parquet", _duckdb("parquet")),
    "duckdb-csv": ("csv", _duckdb("csv")),
    "duckdb-jsonl": ("jsonl", _duckdb("jsonl")),
    "polars-parquet": ("parquet", _polars("parquet")),
    "polars-csv": ("csv", _polars("csv")),
    "polars-jsonl": ("jsonl", _polars("jsonl")),
    "pandas-parquet": ("parquet", _pandas("parquet")),
    "pandas-csv": ("csv", _pandas("csv")),
    "pandas-jsonl": ("jsonl", _pandas("jsonl")),
    "pyarrow-odd-parquet": ("parquet", _pyarrow_odd),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_files_other_tools_write_register_to_the_table_fingerprint(writer: str, tmp_path: Path) -> None:
    fmt, write = WRITERS[writer]
    table = _table(nested=fmt != "csv")
    if writer == "pandas-jsonl":
        table = table.drop_columns(["day"])  # pandas writes dates as datetimes
    registry = str(tmp_path / "registry")
    (tmp_path / "src").mkdir()
    write(table, tmp_path / "src" / f"part-0.{fmt}")
    schema = None if fmt == "parquet" else dsm.Schema.from_arrow(table.schema)
    contract = dsm.register(str(tmp_path / "src"), name="other", format=fmt, schema=schema, registry=registry)
    assert contract.fingerprint is not None
    assert contract.fingerprint.unordered == digest_batches(table.to_batches()).unordered
    assert contract.fingerprint.ordered == digest_batches(table.to_batches()).ordered
    for target in ("parquet", "arrow", "jsonl", "csv"):
        if target == "csv" and fmt != "csv":
            continue
        result = dsm.convert_format(contract.ref, str(tmp_path / target), format=target, registry=registry)
        report = dsm.verify(result.dataset, deep=True, registry=registry)
        assert report.ok, [(s.path, s.status, s.detail) for s in report.shards]
