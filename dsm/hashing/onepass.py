"""A file a decoder reads while the checksum of the stored bytes is taken from the same reads: one read per
shard, for ``register``, ``verify --deep`` and anything else that both decodes a file and checksums it.

The object is fetched in blocks of :data:`BLOCK` bytes, each by one ranged read, and every block is hashed
once, in file order, whatever order the decoder asks for them in:

- a decoder that reads front to back (JSONL, CSV, tar) gets each block as it is hashed;
- one that starts at the end (Parquet and Arrow footers) gets those blocks fetched and held until the hash
  reaches them, so the row groups that follow are read from the start and the footer is not fetched again;
- :meth:`OnePassFile.finish` hashes what the decoder did not ask for (bytes between row groups, an index
  after them, the rest of a file whose decoding failed) and returns the checksums.

Memory is bounded: at most :data:`MAX_BLOCKS` blocks, :data:`HOLD_BLOCKS` of them held ahead of the hash
and the others the ones read last. A block
dropped for that bound (or read again after it was hashed) is fetched again; :attr:`OnePassFile.fetched`
counts every byte fetched, so a caller can see that it equals the file's size.

>>> from dsm.hashing.checksum import file_checksum
>>> data = bytes(range(256)) * 100
>>> f = OnePassFile(lambda a, b: data[a:b], len(data), ["xxh3-128"], block=4096)
>>> _ = f.seek(-10, 2); tail = f.read()
>>> _ = f.seek(0); head = f.read(5000)
>>> f.finish() == {"xxh3-128": file_checksum(io.BytesIO(data))}, f.fetched == len(data)
(True, True)

A file on local disk is read by :class:`LocalOnce` instead: the decoder reads it through pyarrow's own file
(no Python between the disk and the decoder, no copies of the bytes in Python). A decoder that reads from
the first byte to the last (the line and tar formats) has each read hashed as it returns, the bytes the
decoder was given; for any other (Parquet and Arrow start at the footer), and for whatever a decoder left
unread, the checksum is taken from the same pages of the page cache right after, continuing the hash from
the first byte not hashed. That the two saw the same bytes is checked: the file is the one opened (same
inode), and its size and modification time did not change while it was read.
"""

from __future__ import annotations

import io
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from dsm.hashing.checksum import READ_BLOCK, hash_from, new_hasher

__all__ = ["BLOCK", "HOLD_BLOCKS", "InOrder", "LocalOnce", "OnePassFile", "ShortRead"]

BLOCK = READ_BLOCK
"""Bytes per fetch (one ranged read on an object store)."""
HOLD_BLOCKS = 2
"""Blocks kept ahead of the hash at most (a Parquet or Arrow footer takes one or two)."""
MAX_BLOCKS = 4
"""Blocks kept in memory at most: those held ahead of the hash, and the ones read last."""


class ShortRead(OSError):
    """The object held fewer bytes than its size said: it changed (or was cut) while being read."""


class OnePassFile(io.RawIOBase):
    """A read-only, seekable file over ``fetch(start, stop) -> bytes`` of an object of ``size`` bytes that
    hashes every byte once, in order, with each of ``algorithms``; ``on_bytes`` hears of each block hashed.
    ``block`` is the bytes per fetch (None: :data:`BLOCK`)."""

    def __init__(
        self,
        fetch: Callable[[int, int], Any],
        size: int,
        algorithms: Sequence[str],
        *,
        block: int | None = None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__()
        self._fetch = fetch
        self._size = size
        self._block = block or BLOCK
        self._hashers = {algorithm: new_hasher(algorithm) for algorithm in dict.fromkeys(algorithms)}
        self._on_bytes = on_bytes
        self._count = -(-size // self._block)
        self._next = 0  # the first block not hashed yet
        self._held: dict[int, bytes] = {}  # fetched ahead of the hash
        self._recent: OrderedDict[int, bytes] = OrderedDict()  # hashed, kept for the reads that follow
        self._pos = 0
        self.fetched = 0
        """Bytes fetched so far (equal to the size when every block was fetched once)."""

    # --- the blocks -----------------------------------------------------------------------------------

    def _load(self, index: int) -> bytes:
        start = index * self._block
        stop = min(self._size, start + self._block)
        data = bytes(self._fetch(start, stop))
        self.fetched += len(data)
        if len(data) != stop - start:
            raise ShortRead(
                f"bytes {start}-{stop} of a {self._size}-byte object returned {len(data)} bytes: it changed "
                "while being read"
            )
        return data

    def _hash(self, data: bytes) -> None:
        for hasher in self._hashers.values():
            hasher.update(data)
        if self._on_bytes is not None:
            self._on_bytes(len(data))

    def _advance(self) -> None:
        """Hash the held blocks that the hash has reached."""
        while self._next in self._held:
            data = self._held.pop(self._next)
            self._hash(data)
            self._keep(self._next, data)
            self._next += 1

    def _keep(self, index: int, data: bytes) -> None:
        self._recent[index] = data
        self._recent.move_to_end(index)
        while self._recent and len(self._recent) + len(self._held) > MAX_BLOCKS:
            self._recent.popitem(last=False)

    def _get(self, index: int) -> bytes:
        if index in self._recent:
            self._recent.move_to_end(index)
            return self._recent[index]
        if index in self._held:
            return self._held[index]
        data = self._load(index)
        if index == self._next:
            self._hash(data)
            self._next += 1
            self._keep(index, data)
            self._advance()
        elif index > self._next:
            if len(self._held) >= HOLD_BLOCKS:
                self._held.pop(max(self._held))  # the farthest ahead is fetched again when reached
            self._held[index] = data
        else:
            self._keep(index, data)  # read again after it was hashed (evicted): not hashed twice
        return data

    # --- the file -------------------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def size(self) -> int:
        return self._size

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        stop = min(self._size, self._pos + len(view))
        done = 0
        while self._pos < stop:
            index, within = divmod(self._pos, self._block)
            data = self._get(index)
            n = min(len(data) - within, stop - self._pos)
            view[done : done + n] = data[within : within + n]
            done += n
            self._pos += n
        return done

    def read(self, size: int | None = -1) -> bytes:
        stop = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if stop <= self._pos:
            return b""
        first, within = divmod(self._pos, self._block)
        data = self._get(first)
        n = stop - self._pos
        if within + n <= len(data):
            self._pos = stop
            return data[within : within + n]
        # Several blocks: joined with one copy (no zero-filled buffer, no second copy).
        parts = [memoryview(data)[within:]]
        self._pos += len(data) - within
        while self._pos < stop:
            index, _ = divmod(self._pos, self._block)
            data = self._get(index)
            take = min(len(data), stop - self._pos)
            parts.append(memoryview(data)[:take])
            self._pos += take
        return b"".join(parts)

    def finish(self) -> dict[str, str]:
        """Hash every block not hashed yet, in order (fetching those not held), and return the checksums:
        ``{algorithm: "ALGORITHM:HEX"}`` of the whole object."""
        while self._next < self._count:
            index = self._next
            data = self._held.pop(index) if index in self._held else self._load(index)
            self._hash(data)
            self._next += 1
            self._advance()
        self._recent.clear()
        return {algorithm: f"{algorithm}:{hasher.hexdigest()}" for algorithm, hasher in self._hashers.items()}


class LocalOnce:
    """A local file opened once to be decoded and checksummed (see the module's docstring).

    ``descriptor`` is the open file (it stays the caller's to close); :attr:`file` is pyarrow's native
    reader of the same file, opened when first asked for (a caller that only checksums never imports
    pyarrow), and with ``in_order`` (the decoder reads from the first byte on) behind an :class:`InOrder`
    that hashes each read as it returns; :meth:`finish` returns the checksums, or raises
    :class:`ShortRead` when the file changed while it was read."""

    def __init__(
        self,
        path: str,
        descriptor: int,
        algorithms: Sequence[str],
        *,
        on_bytes: Callable[[int], None] | None = None,
        in_order: bool = False,
    ) -> None:
        self._path = path
        self._descriptor = descriptor
        self._hashers = {algorithm: new_hasher(algorithm) for algorithm in dict.fromkeys(algorithms)}
        self._on_bytes = on_bytes
        self._in_order = in_order
        self._before = _identity(os.fstat(descriptor))
        self._file: Any = None
        self._native: Any = None
        self._hashed = 0  # the bytes from the first on that are hashed
        self._sums: dict[str, str] | None = None

    @property
    def file(self) -> Any:
        """pyarrow's reader of the file (a ``pyarrow.OSFile``), checked to be the file opened; with
        ``in_order``, behind an :class:`InOrder`."""
        if self._file is None:
            import pyarrow as pa

            native = pa.OSFile(self._path, "rb")
            if os.fstat(native.fileno()).st_ino != self._before[0]:
                native.close()
                raise ShortRead(f"{self._path} was replaced while being opened")
            self._native = native
            self._file = InOrder(native, self._took) if self._in_order else native
        return self._file

    def size(self) -> int:
        return int(self._before[1])

    def close(self) -> None:
        if self._native is not None:
            self._native.close()

    @property
    def hashed_as_read(self) -> int:
        """Bytes hashed so far, from the first on (those that :meth:`finish` need not read again)."""
        return self._hashed

    def _took(self, start: int, data: memoryview) -> None:
        """The decoder was given ``data``, the bytes at ``start``: hash those that continue the hash. A
        read that starts past the bytes hashed leaves a gap, which :meth:`finish` reads."""
        if start > self._hashed or start + len(data) <= self._hashed:
            return
        self._hash(data[self._hashed - start :])

    def _hash(self, data: Any) -> None:
        for hasher in self._hashers.values():
            hasher.update(data)
        self._hashed += len(data)
        if self._on_bytes is not None:
            self._on_bytes(len(data))

    def finish(self) -> dict[str, str]:
        """Hash the file's bytes that were not hashed as read, in order, and return
        ``{algorithm: "ALGORITHM:HEX"}`` (the same on a second call)."""
        if self._sums is not None:
            return self._sums
        with open(os.dup(self._descriptor), "rb", buffering=0) as raw:  # the decoder's file is its own
            raw.seek(self._hashed)
            hash_from(raw, self._hash)
        after = _identity(os.fstat(self._descriptor))
        if after != self._before or self._hashed != self._before[1]:
            raise ShortRead(
                f"{self._path} changed while being read ({self._before[1]} bytes when opened, {after[1]} "
                f"after, {self._hashed} read): read it again once it is no longer being written"
            )
        self._sums = {name: f"{name}:{hasher.hexdigest()}" for name, hasher in self._hashers.items()}
        return self._sums


class InOrder(io.RawIOBase):
    """pyarrow's reader of a local file, each read handed to ``took(start, bytes)`` as it returns (what
    :class:`LocalOnce` hashes for a decoder that reads from the first byte on). Reads go straight into
    the caller's buffer: no copy is added."""

    def __init__(self, native: Any, took: Callable[[int, memoryview], None]) -> None:
        super().__init__()
        self._native = native
        self._took = took

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return int(self._native.tell())

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._native.seek(offset, whence))

    def size(self) -> int:
        return int(self._native.size())

    def readinto(self, buffer: Any) -> int:
        start = self._native.tell()
        n = int(self._native.readinto(buffer))
        if n:
            self._took(start, memoryview(buffer).cast("B")[:n])
        return n

    def read(self, size: int | None = -1) -> bytes:
        start = self._native.tell()
        if size is None or size < 0:
            size = max(0, self._native.size() - start)  # pyarrow's read() fails past the end
        data = bytes(self._native.read(size))
        if data:
            self._took(start, memoryview(data))
        return data

    def readall(self) -> bytes:
        return self.read()


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a file's content changed: its inode, size, and modification and change times."""
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
