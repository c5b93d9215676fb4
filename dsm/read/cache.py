"""A local cache of remote shards, shared by every process that points at the same folder.

Layout of a cache folder::

    objects/<key>            one verified shard; <key> is its checksum (``xxh3-128-5f2c...``), so a shard
                             that changed is a new entry and two datasets sharing a shard share the file
    objects/.dsm-tmp-*       downloads in progress, sized to the full shard up front (a reservation)
    locks/<key>.lock         held while that shard is downloaded: a second process waits, then finds it
    locks/cache.lock         held while space is reserved or freed

Promises:

- A file under ``objects/`` is whole and matches the contract's checksum: downloads are written under a
  temporary name, checked, then renamed. A download that fails its check is tried once more; the second
  failure raises :class:`dsm.errors.CheckFailed` naming the shard.
- A cached file is checked again the first time each :class:`ShardCache` opens it; a file that no longer
  matches is replaced by a fresh download.
- Eviction is least recently used (a file's mtime is its last use) and never removes a file that a reader
  holds open: readers hold a shared ``flock`` on the file, the evictor needs an exclusive one.
- With a limit, the bytes under ``objects/`` (downloads in progress included) never exceed it; a shard that
  cannot fit until readers release theirs waits, then raises :class:`dsm.errors.StorageError`.
- ``prefetch`` downloads the next shards in a background thread, at most ``prefetch`` ahead, and only into
  free or evictable space.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import xxhash

from dsm.contract import Shard
from dsm.errors import CheckFailed, InputError, StorageError
from dsm.hashing.checksum import (
    READ_BLOCK,
    HashingWriter,
    algorithm_of,
    file_checksum,
    known_algorithms,
    short_checksum,
)
from dsm.storage import TEMP_MARKER, Location, redact

__all__ = ["CacheStats", "ShardCache"]

_POLL = 0.1


_LIVE: weakref.WeakSet[ShardCache] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker) has none of its parent's threads: start its caches afresh."""
    for cache in list(_LIVE):
        cache._reset_threads()


os.register_at_fork(after_in_child=_after_fork_in_child)


@dataclass(frozen=True, kw_only=True)
class CacheStats:
    """What one :class:`ShardCache` did: shards downloaded (and re-downloaded after a failed check),
    hits, files evicted, cached files found corrupt and replaced."""

    downloads: int
    retries: int
    hits: int
    evictions: int
    replaced: int
    downloaded_bytes: int

    def to_dict(self) -> dict[str, int]:
        return {
            "downloads": self.downloads,
            "retries": self.retries,
            "hits": self.hits,
            "evictions": self.evictions,
            "replaced": self.replaced,
            "downloaded_bytes": self.downloaded_bytes,
        }


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), mode)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _release(handle: IO[bytes]) -> None:
    """Unlock, then close. The unlock is explicit: a forked child (a DataLoader worker) shares this open
    file description, and closing our descriptor alone would leave the lock held while the child lives."""
    with contextlib.suppress(OSError, ValueError):
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    handle.close()


def _try_exclusive(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


class ShardCache:
    """Shards of remote datasets on local disk, under ``directory``, at most ``limit`` bytes (None: no limit).

    >>> cache = ShardCache("/tmp/dsm-cache", limit=50 * 10**9)  # doctest: +SKIP
    >>> with cache.open(location, shard) as handle:  # doctest: +SKIP
    ...     header = handle.read(4)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        limit: int | None = None,
        prefetch: int = 2,
        wait_for_space: float = 120.0,
    ) -> None:
        if limit is not None and limit < 1:
            raise InputError(f"cache_limit must be at least 1 byte, got {limit}")
        if prefetch < 0:
            raise InputError(f"prefetch must be at least 0, got {prefetch}")
        self.directory = Path(directory).expanduser().absolute()
        self.limit = limit
        self.prefetch_depth = prefetch
        self.wait_for_space = wait_for_space
        self._objects = self.directory / "objects"
        self._locks = self.directory / "locks"
        try:
            self._objects.mkdir(parents=True, exist_ok=True)
            self._locks.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cache folder {self.directory}: cannot be created ({exc.strerror})") from None
        self._verified: dict[str, int] = {}  # key -> inode checked by this cache object
        self._counts = {"downloads": 0, "retries": 0, "hits": 0, "evictions": 0, "replaced": 0, "bytes": 0}
        self._prefetch_errors: dict[str, str] = {}
        self._reset_threads()
        _LIVE.add(self)

    def _reset_threads(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending: list[tuple[Location, Shard]] = []

    def __getstate__(self) -> dict[str, Any]:
        # Sent to other processes (DataLoader workers) as its settings; each process has its own threads.
        return {
            "directory": str(self.directory),
            "limit": self.limit,
            "prefetch": self.prefetch_depth,
            "wait_for_space": self.wait_for_space,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["directory"],
            limit=state["limit"],
            prefetch=state["prefetch"],
            wait_for_space=state["wait_for_space"],
        )

    def __repr__(self) -> str:
        return f"ShardCache({str(self.directory)!r}, limit={self.limit})"

    # ------------------------------------------------------------------------------------------ public

    @property
    def stats(self) -> CacheStats:
        with self._lock:
            c = dict(self._counts)
        return CacheStats(
            downloads=c["downloads"],
            retries=c["retries"],
            hits=c["hits"],
            evictions=c["evictions"],
            replaced=c["replaced"],
            downloaded_bytes=c["bytes"],
        )

    def key(self, loc: Location, shard: Shard) -> str:
        """The file name of ``shard`` in the cache: its checksum, or (no checksum) a hash of URL and size."""
        if shard.checksum:
            algorithm, _, digest = shard.checksum.partition(":")
            return f"{algorithm}-{digest}"
        where = f"{redact(loc.url_of(shard.path))}\0{shard.bytes}".encode()
        return f"unverified-{xxhash.xxh3_128_hexdigest(where)}"

    def usage(self) -> int:
        """Bytes under ``objects/``, downloads in progress included."""
        total = 0
        with contextlib.suppress(FileNotFoundError), os.scandir(self._objects) as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):
                    total += entry.stat(follow_symlinks=False).st_size
        return total

    def contains(self, loc: Location, shard: Shard) -> bool:
        """True when the shard is in the cache (not checked here)."""
        return (self._objects / self.key(loc, shard)).exists()

    @contextlib.contextmanager
    def open(self, loc: Location, shard: Shard) -> Iterator[IO[bytes]]:
        """The cached, verified file of ``shard`` (downloaded first if needed), open for reading.

        While the block runs the file is marked in use and is never evicted.
        """
        handle = self._acquire(loc, shard)
        try:
            yield handle
        finally:
            _release(handle)

    def fetch(self, loc: Location, shard: Shard) -> Path:
        """Make sure ``shard`` is in the cache and verified; its path (not held open: it may be evicted)."""
        with self.open(loc, shard):
            pass
        return self._objects / self.key(loc, shard)

    def prefetch(self, loc: Location, shards: Sequence[Shard]) -> None:
        """Download the first ``prefetch`` of ``shards`` in the background (replacing any earlier request).

        One thread per cache object does it, and ends as soon as nothing is pending."""
        wanted = [(loc, s) for s in shards[: self.prefetch_depth]]
        if not wanted:
            return
        with self._lock:
            self._pending = wanted
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._prefetch_loop, name="dsm-cache-prefetch", daemon=True
                )
                self._thread.start()

    def close(self) -> None:
        """Stop prefetching (a download in progress finishes first)."""
        with self._lock:
            thread = self._thread
            self._pending = []
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    # ---------------------------------------------------------------------------------------- internals

    def _prefetch_loop(self) -> None:
        while True:
            with self._lock:
                todo = [p for p in self._pending if not (self._objects / self.key(*p)).exists()]
                if not todo:
                    self._pending = []
                    self._thread = None
                    return
                loc, shard = todo[0]
                self._pending = todo[1:]
            try:
                self._ensure(loc, shard, demand=False)
            except Exception as exc:  # a prefetch failure is reported by the read that needs the shard
                self._prefetch_errors[shard.path] = str(exc)

    def _acquire(self, loc: Location, shard: Shard) -> IO[bytes]:
        key = self._check_key(loc, shard)
        path = self._objects / key
        for _ in range(100):
            self._ensure(loc, shard, demand=True)
            try:
                handle = open(path, "rb")  # noqa: SIM115 - returned to the caller, closed by open()
            except FileNotFoundError:
                continue  # evicted between download and open: fetch again
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
            try:
                same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # evicted or replaced before our lock: start again
                _release(handle)
                continue
            with contextlib.suppress(OSError):
                os.utime(path)
            inode = os.fstat(handle.fileno()).st_ino
            with self._lock:
                checked = self._verified.get(key) == inode
            if not checked:
                if not self._matches(handle, shard):
                    _release(handle)
                    self._replace_corrupt(loc, shard)
                    continue
                with self._lock:
                    self._verified[key] = inode
            handle.seek(0)
            return handle
        raise StorageError(f"cache {self.directory}: shard {shard.path} kept vanishing while being opened")

    def _check_key(self, loc: Location, shard: Shard) -> str:
        if shard.checksum and algorithm_of(shard.checksum) not in known_algorithms():
            raise InputError(
                f"shard {shard.path}: checksum algorithm {algorithm_of(shard.checksum)!r} is not known to "
                "this dsm, so the cache cannot verify it; upgrade dsm or read without cache_dir"
            )
        return self.key(loc, shard)

    def _matches(self, handle: IO[bytes], shard: Shard) -> bool:
        size = os.fstat(handle.fileno()).st_size
        if size != shard.bytes:
            return False
        if not shard.checksum:
            return True
        handle.seek(0)
        return file_checksum(handle, algorithm_of(shard.checksum)) == shard.checksum

    def _replace_corrupt(self, loc: Location, shard: Shard) -> None:
        key = self.key(loc, shard)
        path = self._objects / key
        with _flock(self._locks / f"{key}.lock", fcntl.LOCK_EX):
            try:
                handle = open(path, "rb")  # noqa: SIM115 - released below
            except FileNotFoundError:
                return
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # wait for readers of the bad file
                if self._matches(handle, shard):
                    return  # another process replaced it already
                os.unlink(path)
            finally:
                _release(handle)
            with self._lock:
                self._counts["replaced"] += 1
                self._verified.pop(key, None)

    def _ensure(self, loc: Location, shard: Shard, *, demand: bool) -> bool:
        """Download ``shard`` unless present; False when a prefetch found no room."""
        key = self.key(loc, shard)
        path = self._objects / key
        if path.exists():
            if demand:
                with self._lock:
                    self._counts["hits"] += 1
            return True
        with _flock(self._locks / f"{key}.lock", fcntl.LOCK_EX):
            if path.exists():  # another process or thread downloaded it while we waited
                if demand:
                    with self._lock:
                        self._counts["hits"] += 1
                return True
            failures: list[str] = []
            for attempt in range(2):
                reserved = self._reserve(shard, demand=demand)
                if reserved is None:
                    return False
                temp, out = reserved
                try:
                    problem = self._download(loc, shard, out)
                    if problem is None:
                        os.replace(temp, path)
                        with self._lock:
                            self._counts["downloads"] += 1
                            self._counts["retries"] += attempt
                            self._counts["bytes"] += shard.bytes
                        return True
                    failures.append(problem)
                finally:
                    _release(out)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(temp)
            with self._lock:
                self._counts["retries"] += 1
        raise CheckFailed(
            f"shard {redact(loc.url_of(shard.path))}: downloaded twice and failed its check both times "
            f"({failures[-1]}): the stored file changed after registration; run `dsm verify` on the dataset "
            "and restore the shard or re-register"
        )

    def _download(self, loc: Location, shard: Shard, out: IO[bytes]) -> str | None:
        """Copy the shard into ``out`` (a reserved download file); the problem found, or None if it checks.

        The bytes are hashed as they are written (:class:`~dsm.hashing.checksum.HashingWriter`)."""
        sink = HashingWriter(out, algorithm_of(shard.checksum)) if shard.checksum else None
        written = 0
        with loc.open(shard.path) as source:
            while True:
                block = source.read(READ_BLOCK)
                if not block:
                    break
                (sink or out).write(block)
                written += len(block)
                if written > shard.bytes:
                    return f"more than the {shard.bytes} bytes the contract records"
        out.truncate(written)
        out.flush()
        os.fsync(out.fileno())
        if written != shard.bytes:
            return f"{written} bytes, the contract records {shard.bytes}"
        if sink is not None and shard.checksum and sink.checksum != shard.checksum:
            return f"checksum {short_checksum(sink.checksum)} expected {short_checksum(shard.checksum)}"
        return None

    def _reserve(self, shard: Shard, *, demand: bool) -> tuple[Path, IO[bytes]] | None:
        """A download file sized to the shard, created once there is room and held locked (so no evictor
        takes it for abandoned); None when a prefetch finds no room."""
        if self.limit is not None and shard.bytes > self.limit:
            raise InputError(
                f"shard {shard.path} ({shard.bytes} bytes) is larger than cache_limit ({self.limit} bytes); "
                "raise cache_limit above the largest shard"
            )
        deadline = time.monotonic() + self.wait_for_space
        while True:
            with _flock(self._locks / "cache.lock", fcntl.LOCK_EX):
                if self._make_room(shard.bytes):
                    temp = self._objects / f"{TEMP_MARKER}{uuid.uuid4().hex[:12]}"
                    handle = open(temp, "w+b")  # noqa: SIM115 - closed by _ensure
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                    handle.truncate(shard.bytes)
                    return temp, handle
            if not demand:
                return None
            if time.monotonic() > deadline:
                raise StorageError(
                    f"cache {self.directory}: no room for shard {shard.path} ({shard.bytes} bytes) under "
                    f"cache_limit {self.limit}: the rest is held open by readers; raise cache_limit"
                )
            time.sleep(_POLL)

    def _make_room(self, size: int) -> bool:
        """Evict least recently used files not in use until ``size`` more bytes fit (cache lock held)."""
        if self.limit is None:
            return True
        entries = []
        used = 0
        with os.scandir(self._objects) as scan:
            for entry in scan:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                used += info.st_size
                entries.append((info.st_mtime_ns, entry.name, info.st_size))
        if used + size <= self.limit:
            return True
        # Abandoned downloads (their process died) go first, then the least recently used files.
        entries.sort(key=lambda e: (TEMP_MARKER not in e[1], e[0]))
        for _, name, nbytes in entries:
            if self._evict(self._objects / name):
                used -= nbytes
                if used + size <= self.limit:
                    return True
        return False

    def _evict(self, path: Path) -> bool:
        try:
            handle = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return True
        with handle:
            if not _try_exclusive(handle.fileno()):
                return False  # in use by a reader, or a download in progress
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        if TEMP_MARKER not in path.name:
            with self._lock:
                self._counts["evictions"] += 1
                self._verified.pop(path.name, None)
        return True
