"""register and verify on every store (local, memory://, S3 on moto, Azure Blob on Azurite), one test body.

Changes behind dsm's back go through the store's own API (boto3, azure-storage-blob, the OS), never
through fsspec, so that dsm sees them the way it would see another writer's.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.registry import Registry

from .conftest import StorageRoot, write_parquet_shards
from .servers import raw_delete, raw_put, raw_read

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def option_args(root: StorageRoot) -> list[str]:
    """The root's storage options as --storage-option KEY=VALUE arguments."""
    args = []
    for key, value in root.options.items():
        args += ["--storage-option", f"{key}={value}"]
    return args


@pytest.fixture
def small_table(sample_table: pa.Table) -> pa.Table:
    return sample_table.slice(0, 600)


def flip_one_byte(data: bytes) -> bytes:
    """Same size, different bytes: what silent corruption looks like."""
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


def test_register_verify_corrupt_missing_extra(
    storage: StorageRoot, small_table: pa.Table, registry_url: str
) -> None:
    write_parquet_shards(storage, small_table, 3)
    contract = dsm.register(storage.url, name="ds", registry=registry_url, storage_options=storage.options)
    assert [s.path for s in contract.shards] == [
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    assert contract.fingerprint is not None and contract.fingerprint.rows == 600
    assert contract.location.rstrip("/").endswith("root") or storage.kind in ("local", "memory")

    ok = cli("verify", "ds", "--registry", registry_url, "--json", *option_args(storage))
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["summary"] == {"ok": 3}

    # Corrupt one object through the store's own API: same size, one byte flipped.
    raw_put(storage, "part-00001.parquet", flip_one_byte(raw_read(storage, "part-00001.parquet")))
    bad = cli("verify", "ds", "--registry", registry_url, *option_args(storage))
    assert bad.exit_code == 1
    assert "part-00001.parquet" in bad.stdout and "corrupt" in bad.stdout
    report = dsm.verify("ds", registry=registry_url, storage_options=storage.options)
    assert {s.path: s.status for s in report.shards} == {
        "part-00000.parquet": "ok",
        "part-00001.parquet": "corrupt",
        "part-00002.parquet": "ok",
    }

    raw_delete(storage, "part-00002.parquet")
    raw_put(storage, "part-00009.parquet", raw_read(storage, "part-00000.parquet"))
    report = dsm.verify("ds", registry=registry_url, storage_options=storage.options)
    assert {s.path: s.status for s in report.shards} == {
        "part-00000.parquet": "ok",
        "part-00001.parquet": "corrupt",
        "part-00002.parquet": "missing",
        "part-00009.parquet": "extra",
    }
    assert not report.ok


def test_deep_verify_on_every_store(storage: StorageRoot, small_table: pa.Table, registry_url: str) -> None:
    write_parquet_shards(storage, small_table, 2)
    dsm.register(storage.url, name="ds", registry=registry_url, storage_options=storage.options)
    report = dsm.verify("ds", deep=True, registry=registry_url, storage_options=storage.options)
    assert report.ok and report.fingerprint_match is True
    assert {s.verified_by for s in report.shards} == {"bytes+rows"}


def upload_with_store_api(root: StorageRoot, table: pa.Table, shards: int) -> None:
    """Shards uploaded in one request each by the store's own client (what most pipelines do)."""
    per = -(-table.num_rows // shards)
    for i in range(shards):
        buffer = io.BytesIO()
        pq.write_table(table.slice(i * per, per), buffer)
        raw_put(root, f"part-{i:05d}.parquet", buffer.getvalue())


def test_fast_verify_uses_server_checksums_where_the_store_has_them(
    storage: StorageRoot, small_table: pa.Table, registry_url: str
) -> None:
    upload_with_store_api(storage, small_table, 3)
    contract = dsm.register(storage.url, name="ds", registry=registry_url, storage_options=storage.options)
    recorded = {s.path: s.server_checksum for s in contract.shards}
    if storage.kind == "s3":
        # botocore sends a CRC32 with every PutObject and S3 (moto too) keeps it: a full-object checksum.
        assert all(v is not None and v.startswith("crc32:") for v in recorded.values()), recorded
    elif storage.kind == "azure":
        # A single Put Blob gets a server-computed Content-MD5; dsm recorded it after hashing the bytes.
        assert all(v is not None and v.startswith("md5:") for v in recorded.values()), recorded
    else:
        assert set(recorded.values()) == {None}

    report = dsm.verify("ds", fast=True, registry=registry_url, storage_options=storage.options)
    assert report.ok
    expected_by = "server" if storage.kind in ("s3", "azure") else "bytes"
    assert {s.verified_by for s in report.shards} == {expected_by}
    assert any(n.startswith("--fast:") for n in report.notes)

    # Replaced behind dsm's back: the store's checksum changes, so --fast reads the bytes and finds it.
    raw_put(storage, "part-00001.parquet", flip_one_byte(raw_read(storage, "part-00001.parquet")))
    report = dsm.verify("ds", fast=True, registry=registry_url, storage_options=storage.options)
    by_path = {s.path: s for s in report.shards}
    assert by_path["part-00001.parquet"].status == "corrupt"
    assert by_path["part-00001.parquet"].verified_by == "bytes"
    assert by_path["part-00000.parquet"].verified_by == expected_by


def test_fast_and_deep_exclude_each_other(registry_url: str) -> None:
    with pytest.raises(dsm.InputError, match="--fast and --deep"):
        dsm.verify("ds", fast=True, deep=True, registry=registry_url)


def test_registry_on_the_store(storage: StorageRoot, small_table: pa.Table, tmp_path: Any) -> None:
    """The registry itself on every store: versions never overwritten, aliases moved and reported."""
    data = tmp_path / "data"
    write_parquet_shards(data, small_table, 2)
    registry = storage.join("registry")
    first = dsm.register(str(data), name="ds", registry=registry, storage_options=storage.options)
    # The same shards with something new to say (the same shards alone return the version that has them).
    second = dsm.register(
        str(data), name="ds", registry=registry, storage_options=storage.options, description="again"
    )
    assert (first.version, second.version) == (1, 2)
    moved = dsm.alias("ds", "prod", 1, registry=registry, storage_options=storage.options)
    assert (moved.previous, moved.atomic) == (None, True)
    moved = dsm.alias("ds", "prod", 2, registry=registry, storage_options=storage.options)
    assert (moved.previous, moved.version) == (1, 2)
    reg = Registry(registry, storage_options=storage.options)
    assert reg.versions("ds") == [1, 2] and reg.aliases("ds") == {"prod": 2}
    assert reg.resolve("ds@prod").version == 2
    assert dsm.verify("ds@prod", registry=registry, storage_options=storage.options).ok
    listed = cli("ls", "--registry", registry, "--json", *option_args(storage))
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)[0]["aliases"] == {"prod": 2}
