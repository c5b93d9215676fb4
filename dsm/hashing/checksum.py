"""Checksums of a file's bytes, by algorithm name; a value carries its algorithm: ``xxh3-128:<hex>``.

>>> import io
>>> file_checksum(io.BytesIO(b"abc"))
'xxh3-128:06b05ab6733a618578af5f94892f3950'
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import IO, Any, Protocol

import xxhash

from dsm.errors import InputError

__all__ = [
    "DEFAULT_ALGORITHM",
    "READ_BLOCK",
    "Hasher",
    "HashingWriter",
    "algorithm_of",
    "file_checksum",
    "file_checksums",
    "hash_from",
    "known_algorithms",
    "new_hasher",
    "register_algorithm",
    "short_checksum",
]

DEFAULT_ALGORITHM = "xxh3-128"
READ_BLOCK = 8 << 20
"""Bytes per read when hashing: large enough for object stores, small enough to bound memory."""


class Hasher(Protocol):
    def update(self, data: Any, /) -> None: ...
    def hexdigest(self) -> str: ...


_ALGORITHMS: dict[str, Callable[[], Hasher]] = {
    "xxh3-128": xxhash.xxh3_128,
    "xxh3-64": xxhash.xxh3_64,
    "xxh64": xxhash.xxh64,
    "sha256": hashlib.sha256,
    "md5": hashlib.md5,
}


def register_algorithm(name: str, factory: Callable[[], Hasher]) -> None:
    """Add a checksum algorithm; a name that is taken is refused."""
    if name in _ALGORITHMS:
        raise InputError(f"checksum algorithm {name!r} is already registered")
    _ALGORITHMS[name] = factory


def known_algorithms() -> list[str]:
    return sorted(_ALGORITHMS)


def new_hasher(algorithm: str = DEFAULT_ALGORITHM) -> Hasher:
    try:
        return _ALGORITHMS[algorithm]()
    except KeyError:
        raise InputError(
            f"unknown checksum algorithm {algorithm!r}; known: {', '.join(known_algorithms())}"
        ) from None


def algorithm_of(checksum: str) -> str:
    """The algorithm named in a checksum value (``xxh3-128`` of ``xxh3-128:ab12..``)."""
    algorithm, sep, digest = checksum.partition(":")
    if not sep or not digest:
        raise InputError(f"checksum {checksum!r} does not name its algorithm (expected 'ALGORITHM:HEX')")
    return algorithm


def file_checksum(
    file: IO[bytes],
    algorithm: str = DEFAULT_ALGORITHM,
    *,
    on_bytes: Callable[[int], None] | None = None,
) -> str:
    """The checksum of everything readable from ``file``, as ``ALGORITHM:HEX``.

    Reads in blocks of :data:`READ_BLOCK` into one reused buffer, so memory stays flat and the hash (which
    releases the GIL) can run beside other threads.
    """
    return file_checksums(file, (algorithm,), on_bytes=on_bytes)[algorithm]


def file_checksums(
    file: IO[bytes],
    algorithms: Sequence[str],
    *,
    on_bytes: Callable[[int], None] | None = None,
) -> dict[str, str]:
    """Several checksums of everything readable from ``file`` in one pass: ``{algorithm: "ALGORITHM:HEX"}``.

    >>> import io
    >>> sorted(file_checksums(io.BytesIO(b"abc"), ["md5", "xxh3-128"]).values())[0]
    'md5:900150983cd24fb0d6963f7d28e17f72'
    """
    hashers = {algorithm: new_hasher(algorithm) for algorithm in dict.fromkeys(algorithms)}

    def update(chunk: Any) -> None:
        for hasher in hashers.values():
            hasher.update(chunk)
        if on_bytes is not None:
            on_bytes(len(chunk))

    hash_from(file, update)
    return {algorithm: f"{algorithm}:{hasher.hexdigest()}" for algorithm, hasher in hashers.items()}


def hash_from(file: IO[bytes], update: Callable[[Any], None]) -> None:
    """Hand ``update`` everything readable from ``file``, in order, in blocks of up to :data:`READ_BLOCK`
    bytes read into one reused buffer (each block a view of it, valid during the call)."""
    buffer = bytearray(READ_BLOCK)
    view = memoryview(buffer)
    readinto = getattr(file, "readinto", None)
    while True:
        if readinto is not None:
            n = readinto(view)
            if not n:
                return
            update(view[:n])
        else:
            chunk = file.read(READ_BLOCK)
            if not chunk:
                return
            update(chunk)


def short_checksum(checksum: str) -> str:
    """``xxh3-128:5f2c8a1b90de..``: a checksum shortened for a message (its algorithm kept)."""
    algorithm, _, digest = checksum.partition(":")
    return f"{algorithm}:{digest[:12]}.."


class HashingWriter:
    """A write-only file that passes bytes on to ``raw`` and hashes them on the way: the checksum of what
    was written, without reading it again (a rewrite's output, a cache's download)."""

    def __init__(self, raw: IO[bytes], algorithm: str = DEFAULT_ALGORITHM) -> None:
        self._raw = raw
        self.algorithm = algorithm
        self._hasher = new_hasher(algorithm)
        self.size = 0

    def write(self, data: Any) -> int:
        self._hasher.update(data)
        self.size += memoryview(data).nbytes
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()

    @property
    def checksum(self) -> str:
        """``ALGORITHM:HEX`` of every byte written so far."""
        return f"{self.algorithm}:{self._hasher.hexdigest()}"
