"""Row indexes of shards, kept in dsm's cache directory so that the next look at a shard is instant.

Formats whose files say where their pieces are (Parquet row groups, Arrow record batches: their footers)
are asked every time; formats that need a scan of the whole file (JSONL and CSV line offsets, WebDataset
member offsets) are scanned once per shard version and the index is stored as
``<cache>/index/<format>-<key>.npz``, where the key covers the shard's contract checksum and size and the
format's options.

An index is trusted only for the bytes it was built from:

- while it is built, every byte of the file passes through the checksum named in the contract; a file whose
  checksum differs is refused (:class:`dsm.errors.CheckFailed`) and no index is stored;
- a stored index records the file's size and its storage version (modification time, ETag); a file whose
  size differs from the contract is refused, and one whose version changed is indexed again.

The cache directory is ``cache_dir`` when given, else ``DSM_CACHE_DIR``, else the user's cache directory.
A cache that cannot be written is not an error: the index is then kept in memory only.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import xxhash

from dsm.contract import Shard
from dsm.errors import CheckFailed, FormatError
from dsm.formats import Format, ShardIndex
from dsm.formats.index import INDEX_VERSION
from dsm.hashing.checksum import READ_BLOCK, algorithm_of, known_algorithms, new_hasher
from dsm.storage import Location, redact, storage_errors

__all__ = ["IndexCache", "default_cache_dir", "storage_version"]


def default_cache_dir() -> Path:
    """``DSM_CACHE_DIR``, else the user's cache directory for dsm."""
    env = os.environ.get("DSM_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("dsm"))


def storage_version(info: Mapping[str, Any]) -> str:
    """What tells one version of a stored file from the next: its ETag or modification time, and size."""
    for name in (
        "ETag",
        "etag",
        "version_id",
        "VersionId",
        "mtime",
        "LastModified",
        "last_modified",
        "created",
    ):
        value = info.get(name)
        if value is not None:
            return f"{name}={value}:{info.get('size')}"
    return f"size={info.get('size')}"


class _HashingReader:
    """A read-only file over ``raw`` that feeds every byte read, in file order, to a checksum.

    Reads may seek back over bytes already hashed (formats peek at a file's start); a read that skips
    ahead leaves a gap, and :meth:`checksum` then reads the file again from its start.
    """

    def __init__(self, raw: IO[bytes], algorithm: str) -> None:
        self._raw = raw
        self._algorithm = algorithm
        self._hasher = new_hasher(algorithm)
        self._position = 0
        self._hashed = 0
        self._gap = False
        self.closed = False

    def _feed(self, data: bytes) -> None:
        end = self._position + len(data)
        if self._position > self._hashed:
            self._gap = True
        elif end > self._hashed:
            self._hasher.update(memoryview(data)[self._hashed - self._position :])
            self._hashed = end
        self._position = end

    def read(self, size: int = -1) -> bytes:
        data = bytes(self._raw.read(size))
        self._feed(data)
        return data

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        self._position = int(self._raw.seek(offset, whence))
        return self._position

    def tell(self) -> int:
        return self._position

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True

    def checksum(self) -> str:
        """The checksum of the whole file: the rest after what was read, or all of it again after a gap."""
        if self._gap:
            self._hasher, self._hashed, self._gap = new_hasher(self._algorithm), 0, False
        self._raw.seek(self._hashed)
        while True:
            block = self._raw.read(READ_BLOCK)
            if not block:
                break
            self._hasher.update(block)
        return f"{self._algorithm}:{self._hasher.hexdigest()}"


def _counted(index: ShardIndex, shard: Shard, url: str) -> ShardIndex:
    """``index``, if it finds the rows the contract records (a file that says otherwise changed)."""
    if shard.rows is not None and index.rows != shard.rows:
        raise CheckFailed(
            f"shard {url}: it holds {index.rows:,} rows, the contract records {shard.rows:,}: the file "
            "changed after registration; run `dsm verify --deep`"
        )
    return index


class IndexCache:
    """Row indexes by shard, in memory for this object's life and on disk under ``directory``."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._memory: dict[str, ShardIndex] = {}
        # One build per shard when several threads look at once (a viewer's requests, a prefetch worker).
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}
        self.built = 0
        """Indexes this cache built by scanning a file (not found stored)."""
        self.notes: list[str] = []

    def __repr__(self) -> str:
        return f"IndexCache({str(self.directory)!r})"

    def _key(self, fmt: Format, shard: Shard, url: str, version: str) -> str:
        identity = {
            "index": INDEX_VERSION,
            "url": url,
            "format": fmt.name,
            "options": fmt.options(),
            "checksum": shard.checksum,
            "bytes": shard.bytes,
            # Without a checksum, the file's storage version is all that tells two files apart.
            "version": None if shard.checksum else version,
        }
        return xxhash.xxh3_128_hexdigest(json.dumps(identity, sort_keys=True, default=str).encode("utf-8"))

    def get(
        self, loc: Location, shard: Shard, fmt: Format, open_file: Any, *, schema: Any = None
    ) -> ShardIndex:
        """The index of ``shard``; ``open_file()`` is a context manager opening it for reading."""
        url = redact(loc.url_of(shard.path))
        with storage_errors(url):
            info = loc.fs.info(loc.path(shard.path))
        size = int(info.get("size") or 0)
        if size != shard.bytes:
            raise CheckFailed(
                f"shard {url}: {size} bytes, the contract records {shard.bytes}: the file changed after "
                "registration; run `dsm verify` and restore it or re-register"
            )
        version = storage_version(info)
        key = self._key(fmt, shard, url, version)
        found = self._memory.get(key)
        if found is not None:
            return found
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        with building:
            found = self._memory.get(key)
            if found is None:
                found = self._index(shard, fmt, open_file, schema, url, key, version)
                self._memory[key] = found
        return found

    def _index(
        self,
        shard: Shard,
        fmt: Format,
        open_file: Any,
        schema: Any,
        url: str,
        key: str,
        version: str,
    ) -> ShardIndex:
        if not fmt.index_by_scan:
            # The footer says where the pieces are: read it (once for this object), never store it.
            with open_file() as handle:
                found = _counted(fmt.index_shard(handle, shard=shard.path, schema=schema), shard, url)
        else:
            path = self.directory / "index" / f"{fmt.name}-{key}.npz"
            stored = self._load(path, version)
            if stored is not None:
                return stored
            with open_file() as handle:
                found = _counted(self._build(handle, shard, fmt, url, schema), shard, url)
            self._store(path, found, version, shard)
        return found

    def _load(self, path: Path, version: str) -> ShardIndex | None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            index, header = ShardIndex.from_bytes(data, source=str(path))
        except FormatError:
            return None
        if header.get("storage_version") != version:
            return None  # the file was replaced (same checksum recorded, other bytes possible): index again
        return index

    def _build(self, handle: IO[bytes], shard: Shard, fmt: Format, url: str, schema: Any) -> ShardIndex:
        algorithm = algorithm_of(shard.checksum) if shard.checksum else None
        if algorithm is None or algorithm not in known_algorithms():
            self.built += 1
            return fmt.index_shard(handle, shard=shard.path, schema=schema)
        reader = _HashingReader(handle, algorithm)
        index = fmt.index_shard(reader, shard=shard.path, schema=schema)  # type: ignore[arg-type]
        found = reader.checksum()
        if found != shard.checksum:
            raise CheckFailed(
                f"shard {url}: checksum {found} expected {shard.checksum}: the file changed after "
                "registration; run `dsm verify` and restore it or re-register"
            )
        self.built += 1
        return index

    def _store(self, path: Path, index: ShardIndex, version: str, shard: Shard) -> None:
        header = {"storage_version": version, "checksum": shard.checksum, "bytes": shard.bytes}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".dsm-tmp-", delete=False) as tmp:
                tmp.write(index.to_bytes(header))
            os.replace(tmp.name, path)
        except OSError as exc:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp.name)
            self.notes.append(
                f"row index cache {self.directory} is not writable ({exc.strerror}); kept in memory"
            )

    def entries(self) -> Iterator[Path]:
        """The stored index files."""
        yield from sorted((self.directory / "index").glob("*.npz"))
