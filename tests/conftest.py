"""Shared fixtures: small datasets in tmp_path, a registry, and storage roots.

``storage`` is parametrized over the places dsm stores data. Tests written against it run on every
backend: local disk, ``memory://``, S3 (a moto server) and Azure Blob (Azurite), both started once per
session by ``tests/servers.py`` (a server that cannot start fails those tests; see that module for the
developer opt-out).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsm.demo import make_sample_table

if TYPE_CHECKING:
    from .web_data import WebRegistry


@dataclass
class StorageRoot:
    """A fresh folder on one backend: its URL and the storage options that reach it."""

    kind: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    def join(self, *parts: str) -> str:
        return "/".join([self.url.rstrip("/"), *parts])

    def fs(self) -> Any:
        from dsm.storage import location

        return location(self.url, self.options).fs


STORAGE_KINDS = ["local", "memory", "s3", "azure"]

# Session fixtures that start moto (S3) and Azurite (Azure Blob), and the s3_storage / azure_storage roots.
pytest_plugins = ["tests.servers", "tests.ray_support"]


@pytest.fixture(params=STORAGE_KINDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StorageRoot]:
    """A fresh, empty folder on each storage backend in turn."""
    kind = request.param
    if kind == "local":
        yield StorageRoot(kind="local", url=str(tmp_path / "store"))
    elif kind == "memory":
        yield StorageRoot(kind="memory", url=f"memory://dsm-test-{uuid.uuid4().hex}")
    else:  # backends added by tests/servers.py
        yield request.getfixturevalue(f"{kind}_storage")


@pytest.fixture
def registry_url(tmp_path: Path) -> str:
    return str(tmp_path / "registry")


@pytest.fixture(scope="session")
def sample_table() -> pa.Table:
    """3,000 rows: int id, text, double score, nullable string, UTC timestamp, PNG bytes."""
    return make_sample_table(3000)


def write_parquet_shards(
    root: StorageRoot | Path, table: pa.Table, shards: int, prefix: str = "part"
) -> list[str]:
    """Write ``table`` as ``shards`` Parquet files under ``root``; returns their URLs."""
    per = -(-table.num_rows // shards)
    urls = []
    for i in range(shards):
        piece = table.slice(i * per, per)
        if isinstance(root, Path):
            root.mkdir(parents=True, exist_ok=True)
            path = str(root / f"{prefix}-{i:05d}.parquet")
            pq.write_table(piece, path)
        else:
            path = root.join(f"{prefix}-{i:05d}.parquet")
            fs = root.fs()
            fs.makedirs(root.url, exist_ok=True)
            with fs.open(path, "wb") as handle:
                pq.write_table(piece, handle)
        urls.append(path)
    return urls


@pytest.fixture(scope="session")
def web(tmp_path_factory: pytest.TempPathFactory) -> WebRegistry:
    """The web viewer's registry (tests/web_data.py), built once for its TestClient and browser tests."""
    from .web_data import build_web_registry

    return build_web_registry(tmp_path_factory.mktemp("web"))
