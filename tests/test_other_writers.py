"""Files other tools wrote (DuckDB, Polars, pandas, pyarrow with odd options, Hugging Face ``datasets``,
the ``webdataset`` library) register to the same row fingerprint as the table they hold, and every
conversion of them publishes a version that verifies deep."""

from __future__ import annotations

import datetime
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsm
from dsm.formats import contract_format, get_format
from dsm.hashing.fingerprint import digest_batches
from dsm.shards import iter_shard
from dsm.storage import location

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


# ----------------------------------------------------------------------------- webdataset and datasets


def _samples() -> list[dict[str, Any]]:
    return [
        {
            "__key__": f"shard/s{i:03d}",
            "txt": f"caption {i} é",
            "cls": i % 4,
            "jpg": bytes([i]) * (i % 5),
            **({"json": {"i": i}} if i % 3 else {}),  # a member some samples lack
        }
        for i in range(ROWS * 3)
    ]


@pytest.mark.parametrize("name", ["part-0.tar", "part-0.tar.gz"])
def test_tars_the_webdataset_library_writes_read_as_it_reads_them(name: str, tmp_path: Path) -> None:
    """What ``webdataset.TarWriter`` writes (plain and gzip) registers with every sample, each member
    equal to what ``webdataset.WebDataset`` yields for it, and converts to versions that verify deep."""
    import webdataset as wds

    (tmp_path / "src").mkdir()
    path = tmp_path / "src" / name
    with wds.TarWriter(str(path), compress=name.endswith(".gz")) as sink:
        for sample in _samples():
            sink.write(sample)
    registry = str(tmp_path / "registry")
    contract = dsm.register(str(tmp_path / "src"), name="wds", registry=registry)
    theirs = {s["__key__"]: s for s in wds.WebDataset(str(path), shardshuffle=False, empty_check=False)}
    assert contract.total_rows == len(theirs) == ROWS * 3
    schema = contract.schema.to_arrow()
    batches = iter_shard(location(contract.location), name, contract_format(contract), schema=schema)
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert sorted(row["__key__"] for row in rows) == sorted(theirs)
    for row in rows:
        sample = theirs[row["__key__"]]
        members = {k: v for k, v in row.items() if k != "__key__" and v is not None}
        assert set(members) == {k for k in sample if not k.startswith("__")}
        for extension, value in members.items():
            assert (value.encode() if isinstance(value, str) else value) == sample[extension]
    for target in ("parquet", "webdataset"):
        result = dsm.convert_format(contract.ref, str(tmp_path / target), format=target, registry=registry)
        report = dsm.verify(result.dataset, deep=True, registry=registry)
        assert report.ok, [(s.path, s.status, s.detail) for s in report.shards]


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "csv"])
def test_files_hugging_face_datasets_writes_register_to_the_table_fingerprint(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets  # after the environment: it reads it at import

    table = _table(nested=kind != "csv").drop_columns(["day", "ts"])  # text holds dates as strings
    frame = datasets.Dataset(table)
    (tmp_path / "src").mkdir()
    path = tmp_path / "src" / f"part-0.{kind}"
    if kind == "parquet":
        frame.to_parquet(str(path), batch_size=4)
    elif kind == "jsonl":
        frame.to_json(str(path), batch_size=4)
    else:
        frame.to_csv(str(path), index=False, batch_size=4)
    registry = str(tmp_path / "registry")
    schema = None if kind == "parquet" else dsm.Schema.from_arrow(table.schema)
    contract = dsm.register(str(tmp_path / "src"), name="hf", format=kind, schema=schema, registry=registry)
    assert contract.fingerprint is not None
    assert contract.fingerprint.ordered == digest_batches(table.to_batches()).ordered
    result = dsm.convert_format(contract.ref, str(tmp_path / "arrow"), format="arrow", registry=registry)
    assert dsm.verify(result.dataset, deep=True, registry=registry).ok


# ------------------------------------------------------------------------------------ long texts in JSONL

_TEXTS = st.lists(
    st.one_of(
        st.text(max_size=40),  # any character: quotes, backslashes, controls, beyond ASCII
        st.integers(1, 300).map(lambda n: "w" * n),  # runs that fill the scanner's 64-byte blocks
        st.sampled_from(['"', "\\", "\n", "\t", "é", "名", "😀", "\u2028"]),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.one_of(st.none(), _TEXTS), min_size=1, max_size=6))
def test_long_texts_in_jsonl_other_tools_write_read_back_as_written(texts: list[str | None]) -> None:
    """Texts of any length and characters, in JSONL that DuckDB, Polars and pandas write (raw UTF-8 or
    escaped, as each does), read back as the texts written: whichever of dsm's readers takes a block (the
    compiled scanner for lines without escapes, pyarrow's parser for the others)."""
    table = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())})
    schema = dsm.Schema.from_arrow(table.schema)
    fmt = get_format("jsonl")
    with tempfile.TemporaryDirectory() as folder:
        for writer in ("duckdb-jsonl", "polars-jsonl", "pandas-jsonl"):
            path = Path(folder) / f"{writer}.jsonl"
            WRITERS[writer][1](table, path)
            with path.open("rb") as file:
                batches = list(fmt.iter_batches(file, shard=path.name, schema=schema.to_arrow()))
            got = (
                pa.Table.from_batches(batches, schema=table.schema) if batches else table.schema.empty_table()
            )
            assert got.equals(table), (writer, path.read_bytes()[:300])
