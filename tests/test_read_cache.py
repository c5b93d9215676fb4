"""The shard cache of dsm.open: verified downloads, sharing between processes, LRU within a limit, repair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import dsm
from dsm.cache import ShardCache
from dsm.dataset import Dataset
from dsm.errors import CheckFailed, StorageError
from tests.conftest import StorageRoot
from tests.read_data import ROWS, SIZES, ids, write_shards

REMOTE_KINDS = ["memory", "s3", "azure"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=REMOTE_KINDS)
def remote(request: pytest.FixtureRequest) -> StorageRoot:
    """A fresh folder on a store that is not local disk (memory://, S3 on moto, Azure Blob on Azurite)."""
    if request.param == "memory":
        import uuid

        return StorageRoot(kind="memory", url=f"memory://dsm-cache-test-{uuid.uuid4().hex}")
    return request.getfixturevalue(f"{request.param}_storage")  # type: ignore[no-any-return]


def _register(root: StorageRoot, tmp_path: Path, fmt: str = "parquet") -> tuple[str, str]:
    write_shards(root.fs(), root.join("data"), fmt)
    registry = str(tmp_path / "registry")
    contract = dsm.register(root.join("data"), name="cached", registry=registry, storage_options=root.options)
    return contract.ref, registry


def _open(root: StorageRoot, ref: str, registry: str, cache: Path, **kw: Any) -> Dataset:
    return dsm.open(ref, registry=registry, cache_dir=str(cache), storage_options=root.options, **kw)


def _objects(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "objects").iterdir() if ".dsm-tmp-" not in p.name)


def test_each_shard_is_downloaded_once_and_verified(remote: StorageRoot, tmp_path: Path) -> None:
    ref, registry = _register(remote, tmp_path)
    cache_dir = tmp_path / "cache"
    first = _open(remote, ref, registry, cache_dir)
    assert ids(first.iterator(300, shuffle=True, seed=1)) != list(range(ROWS))
    assert sorted(ids(first.iterator(300, shuffle=True, seed=1))) == list(range(ROWS))
    first.close()
    assert first.cache is not None and first.cache.stats.downloads == len(SIZES)
    names = {p.name for p in _objects(cache_dir)}
    assert names == {s.checksum.replace(":", "-") for s in first.shards if s.checksum}
    second = _open(remote, ref, registry, cache_dir)
    assert ids(second.iterator(1000)) == list(range(ROWS))
    assert second.cache is not None and second.cache.stats.downloads == 0 and second.cache.stats.hits >= 5


def test_a_limit_smaller_than_the_dataset_keeps_the_folder_under_it(
    remote: StorageRoot, tmp_path: Path
) -> None:
    ref, registry = _register(remote, tmp_path)
    cache_dir = tmp_path / "cache"
    probe = _open(remote, ref, registry, cache_dir)
    sizes = sorted(s.bytes for s in probe.shards)
    limit = sizes[-1] + sizes[-2] + sizes[0] // 2  # room for about two shards of five
    ds = _open(remote, ref, registry, cache_dir, cache_limit=limit)
    cache = ds.cache
    assert cache is not None and cache.limit == limit
    got = []
    for batch in ds.iterator(100):
        got.extend(batch.column("id").to_pylist())
        assert cache.usage() <= limit
    ds.close()
    assert got == list(range(ROWS))
    assert cache.stats.evictions >= 2 and cache.usage() <= limit
    with pytest.raises(dsm.InputError, match="larger than cache_limit"):
        ids(_open(remote, ref, registry, tmp_path / "tiny", cache_limit=sizes[0] - 1).iterator(100))


def test_a_corrupted_cached_file_is_replaced(remote: StorageRoot, tmp_path: Path) -> None:
    ref, registry = _register(remote, tmp_path)
    cache_dir = tmp_path / "cache"
    ids(_open(remote, ref, registry, cache_dir).iterator(1000))
    victim = _objects(cache_dir)[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    ds = _open(remote, ref, registry, cache_dir)
    assert sorted(ids(ds.iterator(1000))) == list(range(ROWS))
    assert ds.cache is not None and ds.cache.stats.replaced == 1 and ds.cache.stats.downloads == 1
    assert victim.read_bytes() != bytes(data)


def test_a_corrupt_remote_shard_is_downloaded_twice_then_named(remote: StorageRoot, tmp_path: Path) -> None:
    ref, registry = _register(remote, tmp_path, "jsonl")
    ds = _open(remote, ref, registry, tmp_path / "cache")
    bad = ds.shards[1].path
    fs = remote.fs()
    path = remote.join("data", bad)
    data = bytearray(fs.cat_file(path))
    data[10] = ord("#")
    fs.pipe_file(path, bytes(data))
    with pytest.raises(CheckFailed, match=rf"{bad}: downloaded twice and failed its check both times"):
        ids(ds.iterator(500))
    skipping = ds.iterator(500, on_error="skip")
    got = ids(skipping)
    assert got == list(range(SIZES[0])) + list(range(SIZES[0] + SIZES[1], ROWS))
    (skipped,) = skipping.report().skipped
    assert skipped.shard == bad and skipped.rows == SIZES[1] and "checksum" in skipped.error
    assert not [p for p in _objects(tmp_path / "cache") if p.name == ds.shards[1].checksum]


def test_a_shard_in_use_is_never_evicted(tmp_path: Path) -> None:
    root = StorageRoot(kind="memory", url=f"memory://dsm-cache-inuse-{os.getpid()}-{time.time_ns()}")
    ref, registry = _register(root, tmp_path)
    ds = _open(root, ref, registry, tmp_path / "cache")
    shards = sorted(ds.shards, key=lambda s: s.bytes)
    cache = ShardCache(tmp_path / "small", limit=shards[-1].bytes + shards[-2].bytes, wait_for_space=0.3)
    loc = ds.location
    largest, second, third = shards[-1], shards[-2], shards[-3]
    with cache.open(loc, largest) as held:
        cache.fetch(loc, third)
        cache.fetch(loc, second)  # room is made by evicting the third, not the held largest
        assert cache.contains(loc, largest) and not cache.contains(loc, third)
        with cache.open(loc, second):
            with pytest.raises(StorageError, match="held open by readers"):
                cache.fetch(loc, third)  # both files are in use: nothing can go
            assert cache.contains(loc, largest) and cache.contains(loc, second)
        assert held.read(4) == b"PAR1"
    cache.fetch(loc, third)  # released: now the least recently used one goes
    assert cache.contains(loc, third) and cache.contains(loc, second) and not cache.contains(loc, largest)
    assert cache.usage() <= cache.limit  # type: ignore[operator]


def test_prefetch_downloads_the_next_shards(tmp_path: Path) -> None:
    root = StorageRoot(kind="memory", url=f"memory://dsm-cache-prefetch-{os.getpid()}-{time.time_ns()}")
    ref, registry = _register(root, tmp_path)
    ds = _open(root, ref, registry, tmp_path / "cache")
    it = ds.iterator(10)
    next(it)  # reading shard 0 asks for shards 1 and 2 in the background
    cache = ds.cache
    assert cache is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(cache.contains(ds.location, s) for s in ds.shards[1:3]):
        time.sleep(0.05)
    assert all(cache.contains(ds.location, s) for s in ds.shards[1:3])
    assert not cache.contains(ds.location, ds.shards[4]), "prefetch is bounded"
    ds.close()


_READER = """
import json, sys
import dsm
ds = dsm.open(sys.argv[1], registry=sys.argv[2], cache_dir=sys.argv[3])
rows = sum(b.num_rows for b in ds.iterator(200, shuffle=True, seed=int(sys.argv[4])))
ds.close()
print(json.dumps({"rows": rows, **ds.cache.stats.to_dict()}))
"""


def test_two_processes_share_one_cache_and_download_each_shard_once(
    s3_storage: StorageRoot, tmp_path: Path
) -> None:
    ref, registry = _register(s3_storage, tmp_path)
    cache_dir = tmp_path / "shared-cache"
    env = {**os.environ, "DSM_STORAGE_OPTIONS": json.dumps(s3_storage.options), "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _READER, ref, registry, str(cache_dir), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
        )
        for seed in (1, 2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        results.append(json.loads(out))
    assert [r["rows"] for r in results] == [ROWS, ROWS]
    assert sum(r["downloads"] for r in results) == len(SIZES), results
    assert len(_objects(cache_dir)) == len(SIZES)
