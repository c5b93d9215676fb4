"""Conditional writes, races, options, listing and retries against real stores (moto, Azurite)."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.errors import ConflictError, InputError
from dsm.registry import Registry
from dsm.storage import compare_and_swap, location, options_for
from dsm.storage.failures import DEFAULT_ATTEMPTS
from dsm.storage.s3 import S3Store, s3_full_object_checksum
from dsm.storage.stores import NonAtomicWriteWarning, request_stats, store_for

from .conftest import StorageRoot, write_parquet_shards
from .servers import AzuriteServer, MotoServer, raw_put

runner = CliRunner()


def race(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` in ``n`` threads released together; each result or exception, in thread order."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def body(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_create_exclusive_race_has_one_winner(storage: StorageRoot) -> None:
    loc = location(storage.url, storage.options)
    results = race(4, lambda i: loc.create_exclusive("ds/versions/1.yaml", f"writer {i}".encode()))
    winners = [i for i, r in enumerate(results) if r is None]
    losers = [r for r in results if r is not None]
    assert len(winners) == 1, results
    assert all(isinstance(r, ConflictError) and "already exists" in str(r) for r in losers), losers
    assert loc.read_bytes("ds/versions/1.yaml") == f"writer {winners[0]}".encode()


def test_compare_and_swap_refuses_a_stale_expectation(storage: StorageRoot) -> None:
    loc = location(storage.url, storage.options)
    assert compare_and_swap(loc, "ds/aliases.yaml", None, b"prod: 1\n") is True
    with pytest.raises(ConflictError, match="another writer"):
        compare_and_swap(loc, "ds/aliases.yaml", None, b"prod: 2\n")  # expected absent, it exists
    compare_and_swap(loc, "ds/aliases.yaml", b"prod: 1\n", b"prod: 2\n")
    with pytest.raises(ConflictError):
        compare_and_swap(loc, "ds/aliases.yaml", b"prod: 1\n", b"prod: 3\n")
    assert loc.read_bytes("ds/aliases.yaml") == b"prod: 2\n"


def _registry_with_versions(storage: StorageRoot, tmp_path: Path, table: pa.Table, n: int) -> Registry:
    data = tmp_path / "data"
    write_parquet_shards(data, table.slice(0, 200), 1)
    registry = Registry(storage.join("registry"), storage_options=storage.options)
    for i in range(n):  # each says something new (the same shards alone would return the version there)
        dsm.register(str(data), name="ds", registry=registry, description=f"version {i + 1}")
    return registry


def test_two_alias_moves_racing_leave_one_winner(
    storage: StorageRoot, tmp_path: Path, sample_table: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _registry_with_versions(storage, tmp_path, sample_table, 2)
    registry.set_alias("ds", "prod", 1)
    # Both writers read the aliases, wait for each other, then both swap: a real read-modify-write race.
    barrier = threading.Barrier(2)
    original = Registry._read_aliases

    def read_then_wait(self: Registry, name: str) -> Any:
        found = original(self, name)
        barrier.wait(timeout=30)
        return found

    monkeypatch.setattr(Registry, "_read_aliases", read_then_wait)
    results = race(2, lambda i: registry.set_alias("ds", "prod" if i == 0 else "staging", 2))
    monkeypatch.setattr(Registry, "_read_aliases", original)
    errors = [r for r in results if isinstance(r, Exception)]
    moves = [r for r in results if not isinstance(r, Exception)]
    assert len(moves) == 1 and len(errors) == 1, results
    assert isinstance(errors[0], ConflictError) and "retry" in str(errors[0])
    # The winner's move is the whole state; the loser changed nothing and can retry.
    winner = moves[0]
    expected = {"prod": 2} if winner.alias == "prod" else {"prod": 1, "staging": 2}
    assert registry.aliases("ds") == expected
    loser_alias = "staging" if winner.alias == "prod" else "prod"
    registry.set_alias("ds", loser_alias, 2)
    assert registry.aliases("ds")[loser_alias] == 2


def test_publish_race_never_overwrites(storage: StorageRoot, tmp_path: Path, sample_table: pa.Table) -> None:
    registry = _registry_with_versions(storage, tmp_path, sample_table, 1)
    contract = registry.get("ds", 1)
    published = race(3, lambda i: registry.publish(contract.evolve(description=f"writer {i}")))
    assert not [p for p in published if isinstance(p, Exception)], published
    assert sorted(p.version for p in published) == [2, 3, 4]
    for p in published:
        assert registry.get("ds", p.version).description == p.description


def test_alias_conflict_is_exit_3_with_a_clear_message(
    storage: StorageRoot, tmp_path: Path, sample_table: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _registry_with_versions(storage, tmp_path, sample_table, 2)
    import dsm.registry as registry_module

    real_swap = registry_module.compare_and_swap

    def another_writer_first(loc: Any, rel: str, expected: bytes | None, new: bytes) -> bool:
        real_swap(loc, rel, expected, b"prod: 1\n")  # someone else moved it between our read and our write
        return real_swap(loc, rel, expected, new)

    monkeypatch.setattr(registry_module, "compare_and_swap", another_writer_first)
    args = ["alias", "ds", "prod", "2", "--registry", registry.url]
    for key, value in storage.options.items():
        args += ["--storage-option", f"{key}={value}"]
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 3
    message = " ".join(result.stderr.split())  # rich wraps long lines
    assert "changed by another writer; retry" in message or "lost a race" in message
    assert "aliases.yaml" in message


def test_registry_and_data_on_different_stores_with_keyed_options(
    s3_storage: StorageRoot,
    azure_storage: StorageRoot,
    sample_table: pa.Table,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Registry on Azure, data on S3: one DSM_STORAGE_OPTIONS keyed by protocol serves both."""
    write_parquet_shards(s3_storage, sample_table.slice(0, 300), 2)
    keyed = {"s3": s3_storage.options, "az": azure_storage.options}
    monkeypatch.setenv("DSM_STORAGE_OPTIONS", json.dumps(keyed))
    registry = azure_storage.join("registry")
    contract = dsm.register(s3_storage.url, name="cross", registry=registry)
    assert contract.location == s3_storage.url
    assert dsm.verify("cross", registry=registry).ok
    # The same through the CLI, with per-protocol --storage-option PROTOCOL:KEY=VALUE and no environment.
    monkeypatch.delenv("DSM_STORAGE_OPTIONS")
    args = ["verify", "cross", "--registry", registry, "--json"]
    for protocol, options in keyed.items():
        for key, value in options.items():
            args += ["--storage-option", f"{protocol}:{key}={value}"]
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"] == {"ok": 2}


def test_options_for_layers_protocols_and_prefixes() -> None:
    layer = {
        "anon": False,
        "s3": {"endpoint_url": "http://a", "config_kwargs": {"retries": {"max_attempts": 3}}},
        "s3://special-bucket": {"endpoint_url": "http://b"},
        "az": {"account_name": "acct"},
    }
    assert options_for("s3://other/x", layer) == {
        "anon": False,
        "endpoint_url": "http://a",
        "config_kwargs": {"retries": {"max_attempts": 3}},
    }
    assert options_for("s3://special-bucket/x", layer)["endpoint_url"] == "http://b"
    assert options_for("s3://special-bucket-2/x", layer)["endpoint_url"] == "http://a"
    assert options_for("abfs://c/x", layer) == {"anon": False, "account_name": "acct"}
    assert options_for("/local/path", layer) == {}  # flat options never reach local paths
    # Later layers win, and nested options merge instead of replacing.
    merged = options_for("s3://b/x", layer, {"s3": {"config_kwargs": {"connect_timeout": 2}}})
    assert merged["config_kwargs"] == {"retries": {"max_attempts": 3}, "connect_timeout": 2}


def test_dsm_defaults_reach_s3fs_and_user_options_win(s3_storage: StorageRoot) -> None:
    # botocore counts the first attempt: max_attempts N (retries) is total_max_attempts N + 1.
    loc = location(s3_storage.url, {**s3_storage.options, "config_kwargs": {"retries": {"max_attempts": 2}}})
    assert loc.fs.s3.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}
    default = location(s3_storage.url, s3_storage.options)
    # dsm's default: DEFAULT_ATTEMPTS in all, so that an unreachable endpoint is given up on in seconds.
    assert default.fs.s3.meta.config.retries == {"mode": "standard", "total_max_attempts": DEFAULT_ATTEMPTS}
    assert default.fs.dircache.use_listings_cache is False


def test_bad_storage_options_json_is_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSM_STORAGE_OPTIONS", "{not json")
    with pytest.raises(InputError, match="DSM_STORAGE_OPTIONS"):
        location("memory://x")


def test_missing_backend_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from fsspec.registry import _registry

    for protocol, module, hint in (("s3", "s3fs", "dsm[s3]"), ("az", "adlfs", "dsm[azure]")):
        monkeypatch.delitem(_registry, protocol, raising=False)
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
        expected = rf"no filesystem for {protocol}:// is installed.*{re.escape(hint)}"
        with pytest.raises(InputError, match=expected) as err:
            location(f"{protocol}://bucket/data")
        assert "pip install" in str(err.value)
    result = runner.invoke(app, ["ls", "--registry", "s3://bucket/registry"], catch_exceptions=False)
    assert result.exit_code == 2 and "dsm[s3]" in result.stderr


def test_generic_store_says_it_is_not_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A protocol without conditional writes in dsm: the write happens, with a warning and atomic=False.
    import dsm.storage.stores as object_store

    loc = location(f"memory://generic-{time.monotonic_ns()}")
    monkeypatch.setitem(object_store._INSTANCES, "memory", object_store.GenericStore())
    with pytest.warns(NonAtomicWriteWarning, match="no conditional writes"):
        loc.create_exclusive("a.yaml", b"1")
    with pytest.warns(NonAtomicWriteWarning):
        assert compare_and_swap(loc, "a.yaml", b"1", b"2") is False
    assert loc.read_bytes("a.yaml") == b"2"
    with pytest.warns(NonAtomicWriteWarning), pytest.raises(ConflictError):
        loc.create_exclusive("a.yaml", b"3")


def test_atomic_writer_on_failure_leaves_nothing(storage: StorageRoot) -> None:
    loc = location(storage.url, storage.options)
    with loc.atomic_writer("out/done.bin") as handle:
        handle.write(b"x" * 1000)
    with pytest.raises(RuntimeError), loc.atomic_writer("out/half.bin") as handle:
        handle.write(b"y" * 1000)
        raise RuntimeError("writer died")
    assert [f.path for f in loc.list_files()] == ["out/done.bin"]
    assert loc.read_bytes("out/done.bin") == b"x" * 1000


def test_s3_checksums_count_only_when_full_object() -> None:
    head = {"ETag": '"abc"', "ChecksumCRC32": "DUoRhQ==", "ContentLength": 11}
    found = s3_full_object_checksum(head)
    assert found is not None and found.value == "crc32:0d4a1185" and found.size == 11
    assert s3_full_object_checksum({**head, "ETag": '"abc-2"'}) is None  # multipart, type unknown
    assert s3_full_object_checksum({**head, "ETag": '"abc-2"', "ChecksumType": "FULL_OBJECT"}) is not None
    assert s3_full_object_checksum({**head, "ChecksumType": "COMPOSITE"}) is None
    sha256 = "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="
    strongest = s3_full_object_checksum({**head, "ChecksumSHA256": sha256})
    assert strongest is not None and strongest.algorithm == "sha256"
    assert s3_full_object_checksum({"ETag": '"abc"'}) is None  # an ETag alone is never a checksum


def test_s3_multipart_full_object_checksum_from_moto(
    moto_server: MotoServer, s3_storage: StorageRoot
) -> None:
    """moto keeps FULL_OBJECT CRC32 for multipart uploads and says so: dsm records it."""
    import zlib

    client = moto_server.client()
    bucket, prefix = s3_storage.url.removeprefix("s3://").split("/", 1)
    key = f"{prefix}/big.bin"
    parts_data = [b"a" * (5 << 20), b"b" * 100]
    upload = client.create_multipart_upload(
        Bucket=bucket, Key=key, ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT"
    )
    parts = []
    for number, body in enumerate(parts_data, start=1):
        out = client.upload_part(
            Bucket=bucket,
            Key=key,
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=body,
            ChecksumAlgorithm="CRC32",
        )
        parts.append({"PartNumber": number, "ETag": out["ETag"], "ChecksumCRC32": out["ChecksumCRC32"]})
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    loc = location(s3_storage.url, s3_storage.options)
    found = store_for("s3").server_checksum(loc, "big.bin")
    assert found is not None and found.algorithm == "crc32"
    assert found.digest == f"{zlib.crc32(b''.join(parts_data)):08x}"  # the checksum of the bytes, verified


def test_listing_thousands_of_objects_is_one_paged_listing(
    moto_server: MotoServer, s3_storage: StorageRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    """1,500 objects in 30 folders: dsm lists them with ListObjectsV2 pages, not a walk per folder."""
    from concurrent.futures import ThreadPoolExecutor

    client = moto_server.client()
    bucket, prefix = s3_storage.url.removeprefix("s3://").split("/", 1)
    keys = [f"{prefix}/folder-{i % 30:02d}/obj-{i:05d}.bin" for i in range(1500)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))
    loc = location(s3_storage.url, s3_storage.options)
    stats = request_stats(loc)
    assert stats is not None
    before = dict(stats.requests)
    started = time.perf_counter()
    files = loc.list_files()
    elapsed = time.perf_counter() - started
    listed = stats.requests["ListObjectsV2"] - before.get("ListObjectsV2", 0)
    assert len(files) == 1500 and files[0].path == "folder-00/obj-00000.bin"
    # 1,000 keys a page: 2 pages, plus the few calls that find out whether the root is a folder.
    assert listed <= 5, stats.requests
    with capsys.disabled():
        print(f"\n[listing] 1,500 objects on moto: {elapsed:.2f}s, {listed} ListObjectsV2 requests")


def test_stores_by_protocol() -> None:
    assert S3Store.atomic and store_for("s3a") is store_for("s3")
    assert store_for("gs").atomic is False


def test_azurite_put_blob_md5_is_recorded_only_when_it_matches(azurite_server: AzuriteServer) -> None:
    """A Content-MD5 set by a client that does not match the bytes is never recorded."""
    from azure.storage.blob import ContentSettings

    from dsm.shards import measure_object

    service = azurite_server.service()
    container = f"md5-{time.monotonic_ns()}"
    service.create_container(container)
    blob = service.get_blob_client(container, "x.bin")
    blob.upload_blob(b"hello world")
    root = StorageRoot(kind="azure", url=f"az://{container}", options=azurite_server.options())
    loc = location(root.url, root.options)
    measured = measure_object(loc, "x.bin")
    assert measured.server_checksum == "md5:5eb63bbbe01eeed093cb22bb8f5acdc3"
    blob.set_http_headers(ContentSettings(content_md5=bytearray(b"\x00" * 16)))  # a wrong, client-set MD5
    assert measure_object(loc, "x.bin").server_checksum is None
    raw_put(root, "y.bin", b"other")
    assert measure_object(loc, "y.bin").checksum.startswith("xxh3-128:")


def test_objects_dsm_writes_carry_a_store_checksum(storage: StorageRoot) -> None:
    """What the rewrites write through atomic_writer gets a full-object store checksum where one exists:
    S3 keeps botocore's CRC32; on Azure dsm sets the Content-MD5 of the bytes it wrote."""
    import hashlib
    import zlib

    from dsm.shards import measure_object

    loc = location(storage.url, storage.options)
    data = bytes(range(256)) * (5 * 4096 + 17)  # about 5 MiB, written in 1 MiB pieces
    with loc.atomic_writer("out/shard.bin") as handle:
        for start in range(0, len(data), 1 << 20):
            handle.write(data[start : start + (1 << 20)])
    measured = measure_object(loc, "out/shard.bin")
    expected = {
        "s3": f"crc32:{zlib.crc32(data):08x}",
        "azure": f"md5:{hashlib.md5(data).hexdigest()}",
    }.get(storage.kind)
    assert measured.server_checksum == expected


def test_abfs_urls_reach_the_same_blobs_with_az_options(azure_storage: StorageRoot) -> None:
    """``abfs://`` is the same store as ``az://``, and options keyed "az" serve it."""
    raw_put(azure_storage, "a/x.bin", b"12345")
    abfs_url = azure_storage.url.replace("az://", "abfs://", 1)
    loc = location(abfs_url, {"az": azure_storage.options})
    assert [(f.path, f.size) for f in loc.list_files()] == [("a/x.bin", 5)]
    assert loc.store is store_for("az") and loc.atomic_writes
