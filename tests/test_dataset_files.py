"""register and verify agree on what belongs to a dataset (one function, ``dsm.shards.dataset_files``): files
that are not data are ignored by both and listed; a single file registers as itself; Hive partition folders
are refused, never dropped; and what dsm publishes is a folder other readers take as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.shards import dataset_files, not_data
from dsm.storage import FileInfo
from tests.conftest import StorageRoot, write_parquet_shards

from .servers import raw_put

runner = CliRunner()

SIDECARS = {
    "_SUCCESS": b"",
    "_common_metadata": b"x",
    ".part-00000.parquet.crc": b"crc",
    "part-00001.parquet.crc": b"crc",
    "README.md": b"# about",
    "LICENSE": b"MIT",
    "_dsm_rewrite.json": b"{}",
    "notes/.ipynb_checkpoints/a.parquet": b"junk",
}


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def small(sample_table: pa.Table) -> pa.Table:
    return sample_table.slice(0, 300)


def test_register_and_verify_ignore_the_same_files_and_list_them(
    storage: StorageRoot, small: pa.Table, registry_url: str
) -> None:
    write_parquet_shards(storage, small, 2)
    for name, data in SIDECARS.items():
        raw_put(storage, name, data)
    contract = dsm.register(storage.url, name="ds", registry=registry_url, storage_options=storage.options)
    assert [s.path for s in contract.shards] == ["part-00000.parquet", "part-00001.parquet"]
    ignored = {f["path"] for f in contract.metadata["ignored_files"]}
    assert ignored == set(SIDECARS)
    given = dsm.register(  # the format given: README.md and the rest are still not parquet shards
        storage.url, name="ds2", format="parquet", registry=registry_url, storage_options=storage.options
    )
    assert (
        given.shards == contract.shards
        and given.metadata["ignored_files"] == contract.metadata["ignored_files"]
    )
    report = dsm.verify("ds", registry=registry_url, storage_options=storage.options)
    assert report.ok and report.summary == {"ok": 2}
    assert {f.path for f in report.ignored} == ignored
    out = cli("verify", "ds", "--registry", registry_url, "--json", *_options(storage))
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert {f["path"] for f in body["ignored"]} == ignored and "not data" in " ".join(body["notes"])
    raw_put(storage, "part-00002.parquet", b"added behind dsm's back")  # data: extra, not ignored
    raw_put(storage, "more/_SUCCESS", b"")
    again = dsm.verify("ds", registry=registry_url, storage_options=storage.options)
    assert [s.path for s in again.failures] == ["part-00002.parquet"] and again.failures[0].status == "extra"


def _options(root: StorageRoot) -> list[str]:
    return [arg for key, value in root.options.items() for arg in ("--storage-option", f"{key}={value}")]


def test_a_single_file_registers_as_that_file(tmp_path: Path, small: pa.Table) -> None:
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "d", small, 3)
    (tmp_path / "d" / "other.csv").write_text("a\n1\n")
    one = dsm.register(str(tmp_path / "d" / "part-00001.parquet"), name="one", registry=registry)
    assert [s.path for s in one.shards] == ["part-00001.parquet"] and one.total_rows == 100
    report = dsm.verify("one", deep=True, registry=registry)
    assert report.ok and report.summary == {"ok": 1}, report.to_dict()  # the siblings are not "extra"
    assert report.ignored == ()
    every = dsm.register(str(tmp_path / "d"), name="all", format="parquet", registry=registry)
    assert every.total_rows == 300 and every.metadata["ignored_files"][0]["path"] == "other.csv"


def test_hive_partition_folders_are_refused_naming_the_column(tmp_path: Path, small: pa.Table) -> None:
    table = small.append_column("part", pa.array(["en", "fr", "de"] * 100))
    by_lang = pads.partitioning(pa.schema([("part", pa.string())]), flavor="hive")
    pads.write_dataset(table, tmp_path / "hive", format="parquet", partitioning=by_lang)
    registry = str(tmp_path / "registry")
    out = cli("register", str(tmp_path / "hive"), "--name", "hive", "--registry", registry)
    assert out.exit_code == 2, out.output
    assert "Hive-style partition folders (part=de|en|fr)" in out.stderr and "column(s) part" in out.stderr
    assert not (tmp_path / "registry").exists()
    part = dsm.register(str(tmp_path / "hive" / "part=en"), name="hive-en", registry=registry)
    assert part.total_rows == 100 and "part" not in part.schema.names  # that folder is one dataset


def test_what_dsm_publishes_is_only_data_for_pandas_pyarrow_polars_and_datasets(
    tmp_path: Path, small: pa.Table
) -> None:
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "src", small, 2)
    dsm.register(str(tmp_path / "src"), name="web", registry=registry)
    parquet = dsm.reshard("web", str(tmp_path / "pq"), num_shards=3, shuffle=True, registry=registry)
    jsonl = dsm.convert_format("web@1", str(tmp_path / "jl"), format="jsonl", registry=registry)
    for result in (parquet, jsonl):
        folder = Path(result.location)
        assert sorted(p.name for p in folder.iterdir()) == [s.path for s in result.contract.shards]
    ids = sorted(small.column("id").to_pylist())
    assert sorted(pads.dataset(tmp_path / "pq", format="parquet").to_table().column("id").to_pylist()) == ids
    assert sorted(pads.dataset(tmp_path / "jl", format="json").to_table().column("id").to_pylist()) == ids
    pd = pytest.importorskip("pandas")
    assert sorted(pd.read_parquet(tmp_path / "pq")["id"].tolist()) == ids
    pl = pytest.importorskip("polars")
    assert sorted(pl.read_parquet(tmp_path / "pq")["id"].to_list()) == ids
    hf = pytest.importorskip("datasets")
    for kind, folder in (("parquet", "pq"), ("json", "jl")):
        loaded = hf.load_dataset(kind, data_dir=str(tmp_path / folder), cache_dir=str(tmp_path / "hf"))
        assert sorted(loaded["train"]["id"]) == ids


NAMES = ["part-0.parquet", "x.jsonl", "_SUCCESS", ".crc", "a.crc", "README.md", "k=v", "d", "e.bin"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(
                ["part-0.parquet", "x.jsonl", "_SUCCESS", ".crc", "a.crc", "README.md", "k=v", "d"]
            ),
            min_size=1,
            max_size=3,
        ).map("/".join),
        min_size=1,
        max_size=12,
        unique=True,
    )
)
def test_verify_finds_extra_exactly_the_files_register_would_take(paths: list[str]) -> None:
    """Register takes ``shards``; a file verify does not know is extra exactly when register would take it."""
    files = [FileInfo(path=p, size=1) for p in paths]
    found = dataset_files(files, format="parquet")
    taken = {f.path for f in found.shards}
    assert taken | {f.path for f in found.ignored} == set(paths)
    for path in paths:
        alone = dataset_files([FileInfo(path=path, size=1)], format="parquet")
        assert (path in taken) == bool(alone.shards)
        assert (not_data(path) is None) or path not in taken
        if any(p == "k=v" for p in path.split("/")[:-1]) and path in taken:
            assert found.partitions == {"k": ("v",)} or "k" in found.partitions
