"""One stored shard: open, iterate, schema, digest, measure, describe (the one home of each).

Every layer above reads a shard through these functions: ``dsm verify`` and ``dsm register`` to check and
describe it, the rewrite to copy it, ``dsm bench`` to time it and ``dsm.open`` to train on it.

- :func:`open_shard` opens it for decoding (local files as Arrow native files), :func:`iter_shard` and
  :func:`iter_open_shard` stream its record batches, :func:`shard_schema` and :func:`fragment_count`
  read its layout; decoding errors become :class:`~dsm.errors.FormatError` naming the shard.
- :func:`digest_shard` decodes it under a schema and computes its row digest.
- :func:`read_once` opens it so that decoding and checksumming read each byte once (one GET per block
  on an object store, hashed in file order, footers included).
- :func:`measure_object` checksums its bytes and records the store's full-object checksum where it can
  be trusted.
- :func:`describe_shard` does both from one read, for the contract entry of a shard (``register``, the
  rewrites), and :func:`dataset_fingerprint` combines the shards' digests.
- :func:`dataset_files` says which files of a listing are a dataset's shards and which are not data
  (``_SUCCESS``, ``*.crc``, ``README.md``, dsm's own journal): ``register`` and ``verify`` ask it alike.

>>> dataset_fingerprint([]).rows
0
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa

from dsm.arrow_types import MAX_TYPE_DEPTH
from dsm.contract import DatasetFingerprint, Shard
from dsm.errors import DsmError, FormatError, SchemaError, about
from dsm.formats import DEFAULT_BATCH_ROWS, Format, detect_format
from dsm.hashing.checksum import DEFAULT_ALGORITHM
from dsm.hashing.fingerprint import digest_batch
from dsm.hashing.onepass import LocalOnce, OnePassFile
from dsm.hashing.rowdigest import ALGORITHM, RowDigest
from dsm.storage import FileInfo, Location, public_url, redact, storage_errors
from dsm.storage.stores import ServerChecksum, server_checksum

__all__ = [
    "BATCH_BYTES",
    "DatasetFiles",
    "DescribedShard",
    "IgnoredFile",
    "MeasuredObject",
    "OpenedOnce",
    "ShardDigest",
    "batch_rows_for",
    "contract_location",
    "dataset_files",
    "dataset_fingerprint",
    "decoded_bytes_per_row",
    "describe_shard",
    "digest_open_shard",
    "digest_shard",
    "fragment_count",
    "iter_open_shard",
    "iter_shard",
    "measure_object",
    "not_data",
    "open_shard",
    "open_shard_schema",
    "read_once",
    "shard_entry",
    "shard_schema",
    "takes_unnamed",
]


BATCH_BYTES = 8 << 20
"""Decoded bytes per record batch a whole read aims for: memory stays flat whatever the row size."""


def decoded_bytes_per_row(stored_bytes: int, rows: int, per_stored: int) -> int:
    """An estimate of one row's decoded size, for ``rows`` rows stored in ``stored_bytes`` of a format whose
    stored byte holds about ``per_stored`` decoded bytes (:attr:`Format.decoded_per_stored`; deterministic).

    >>> decoded_bytes_per_row(1000, 10, 3)
    300
    """
    return max(1, math.ceil(stored_bytes * per_stored / rows)) if rows > 0 else 1


def batch_rows_for(row_bytes: int) -> int:
    """Rows per record batch so that a batch of rows of ``row_bytes`` decoded bytes holds about
    :data:`BATCH_BYTES` (between 64 and ``DEFAULT_BATCH_ROWS``).

    >>> batch_rows_for(3000), batch_rows_for(30)
    (2796, 65536)
    """
    return max(64, min(DEFAULT_BATCH_ROWS, BATCH_BYTES // row_bytes))


@dataclass(frozen=True, kw_only=True)
class ShardDigest:
    """What decoding one shard found: its schema, rows and row digest."""

    path: str
    schema: pa.Schema
    digest: RowDigest

    @property
    def rows(self) -> int:
        return self.digest.rows


def _decode_errors(loc: Location, path: str, exc: Exception) -> FormatError:
    if isinstance(exc, (FormatError, SchemaError)):
        return FormatError(str(exc), **{"shard": path, **exc.details})
    return FormatError(f"shard {redact(loc.url_of(path))}: cannot be decoded: {exc}", shard=path)


def _nesting(type_: pa.DataType) -> int:
    """How many levels deep ``type_`` nests (1 for a flat type), without recursing."""
    deepest, pending = 0, [(type_, 1)]
    while pending:
        current, depth = pending.pop()
        deepest = max(deepest, depth)
        if depth > MAX_TYPE_DEPTH:
            break
        pending.extend((current.field(i).type, depth + 1) for i in range(current.num_fields))
        if pa.types.is_dictionary(current):
            pending.append((current.value_type, depth))
    return deepest


def _undecodable(exc: BaseException) -> bool:
    """Whether ``exc``, raised while a format decoded a shard, says its bytes do not decode (rather than
    that reading them failed). pyarrow raises ``OSError(errno, ...)`` for what the OS refused and a plain
    ``OSError(message)`` without an errno for bytes it cannot decode (a Parquet page header, a thrift
    footer); other OSErrors are storage failures, mapped by the storage layer."""
    if isinstance(exc, OSError) and not isinstance(exc, pa.ArrowException):
        return type(exc) is OSError and exc.errno is None
    return True


def shard_schema(loc: Location, path: str, fmt: Format) -> pa.Schema:
    """The schema stored in (or inferred from) one shard. A field nested deeper than
    :data:`~dsm.arrow_types.MAX_TYPE_DEPTH` is a :class:`~dsm.errors.FormatError` naming the shard and the
    field, here where a shard's schema first comes in, before any walk of the type recurses that deep."""
    with open_shard(loc, path) as handle:
        return open_shard_schema(handle, loc, path, fmt)


def open_shard_schema(handle: IO[bytes], loc: Location, path: str, fmt: Format) -> pa.Schema:
    """:func:`shard_schema` of a file the caller opened (and closes)."""
    try:
        schema = fmt.read_schema(handle, shard=path)
    except (FormatError, SchemaError):
        raise
    except (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError, OSError, RecursionError) as exc:
        if not _undecodable(exc):
            raise
        raise _decode_errors(loc, path, exc) from None
    for field in schema:
        if _nesting(field.type) > MAX_TYPE_DEPTH:
            raise FormatError(
                f"shard {redact(loc.url_of(path))}: field {field.name!r} nests more than {MAX_TYPE_DEPTH} "
                "levels deep (lists or structs within each other), more than dsm and Arrow read; flatten it",
                shard=path,
                field=field.name,
            )
    return schema


@contextlib.contextmanager
def open_shard(loc: Location, path: str) -> Iterator[IO[bytes]]:
    """Open one shard for decoding. Local files open as Arrow native files, which Arrow reads without
    going through Python (the Parquet reader decodes 2-3x faster that way); others through fsspec."""
    with about(shard=path):
        if not loc.is_local:
            with loc.open(path) as handle:
                yield handle
            return
        with storage_errors(loc.url_of(path), loc):
            native = pa.OSFile(loc.path(path), "rb")
        with native:
            yield native  # type: ignore[misc]


def iter_shard(
    loc: Location,
    path: str,
    fmt: Format,
    *,
    schema: pa.Schema | None = None,
    columns: Sequence[str] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Stream one shard's rows as record batches (with ``schema``: exactly that schema)."""
    with open_shard(loc, path) as handle:
        yield from iter_open_shard(
            handle, loc, path, fmt, schema=schema, columns=columns, batch_rows=batch_rows
        )


def iter_open_shard(
    handle: IO[bytes],
    loc: Location,
    path: str,
    fmt: Format,
    *,
    schema: pa.Schema | None = None,
    columns: Sequence[str] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    fragments: Sequence[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`iter_shard` over a file the caller opened (and closes), so that it can wrap or time the file.

    With ``fragments`` (see :meth:`Format.fragment_count`), only those pieces are decoded, in that order.
    """
    try:
        if fragments is None:
            yield from fmt.iter_batches(
                handle, shard=path, schema=schema, columns=columns, batch_rows=batch_rows
            )
        else:
            yield from fmt.iter_fragments(
                handle, fragments, shard=path, schema=schema, columns=columns, batch_rows=batch_rows
            )
    except (FormatError, SchemaError):
        raise
    except (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError, OSError, RecursionError) as exc:
        if not _undecodable(exc):
            raise
        raise _decode_errors(loc, path, exc) from None


def fragment_count(handle: IO[bytes], loc: Location, path: str, fmt: Format) -> int:
    """How many independently decodable pieces an open shard has (Parquet: row groups; else 1)."""
    try:
        return fmt.fragment_count(handle, shard=path)
    except (FormatError, SchemaError):
        raise
    except (pa.ArrowException, ValueError, EOFError) as exc:
        raise _decode_errors(loc, path, exc) from None


def digest_shard(
    loc: Location,
    path: str,
    fmt: Format,
    *,
    schema: pa.Schema | None,
    on_rows: Callable[[int], None] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> ShardDigest:
    """Decode one shard and compute its row digest. Batches are checked against ``schema`` when given;
    ``batch_rows`` bounds the rows decoded at once (smaller for wide rows keeps memory flat)."""
    with open_shard(loc, path) as handle:
        return digest_open_shard(
            handle, loc, path, fmt, schema=schema, on_rows=on_rows, batch_rows=batch_rows
        )


def digest_open_shard(
    handle: IO[bytes],
    loc: Location,
    path: str,
    fmt: Format,
    *,
    schema: pa.Schema | None,
    on_rows: Callable[[int], None] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> ShardDigest:
    """:func:`digest_shard` of a file the caller opened (and closes): a :func:`read_once` file, so that
    the same read gives the checksum."""
    digest = RowDigest.empty()
    seen_schema: pa.Schema | None = None
    for batch in iter_open_shard(handle, loc, path, fmt, schema=schema, batch_rows=batch_rows):
        if seen_schema is None:
            seen_schema = batch.schema
        digest = digest + digest_batch(batch)
        if on_rows is not None:
            on_rows(batch.num_rows)
    if seen_schema is None:
        if schema is not None:
            seen_schema = schema
        else:
            handle.seek(0)
            seen_schema = open_shard_schema(handle, loc, path, fmt)
    return ShardDigest(path=path, schema=seen_schema, digest=digest)


# --- measuring and describing ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MeasuredObject:
    """What reading one object found: dsm's checksum of its bytes, and the store's trusted checksum."""

    checksum: str
    server_checksum: str | None = None


def _etag(details: Any) -> str | None:
    if not isinstance(details, dict):
        return None
    value = details.get("ETag") or details.get("etag")
    return str(value).strip('"') if value else None


@dataclass(frozen=True, kw_only=True)
class OpenedOnce:
    """A shard opened for one read: the file to decode (its bytes are checksummed from the same read, see
    :mod:`dsm.hashing.onepass`), and the ETag the store gave when it was opened."""

    reader: OnePassFile | LocalOnce
    etag: str | None = None

    @property
    def file(self) -> Any:
        """What the decoder reads: a file object (pyarrow's own for a local file)."""
        return self.reader.file if isinstance(self.reader, LocalOnce) else self.reader

    @property
    def size(self) -> int:
        return self.reader.size()

    def finish(self) -> dict[str, str]:
        """The checksums of the shard's bytes (those the decoder did not read are read now)."""
        return self.reader.finish()


@contextlib.contextmanager
def read_once(
    loc: Location,
    path: str,
    algorithms: Sequence[str] = (DEFAULT_ALGORITHM,),
    *,
    on_bytes: Callable[[int], None] | None = None,
    in_order: bool = False,
) -> Iterator[OpenedOnce]:
    """Open one shard so that decoding it and checksumming it read its bytes once. On an object store each
    block is fetched by one ranged GET (no client read-ahead) and hashed in file order; on local disk the
    decoder reads through pyarrow's own file, hashed as it reads if it reads in order (``in_order``), the
    rest from the page cache after, the file checked unchanged (:mod:`dsm.hashing.onepass`).
    ``opened.finish()`` returns the checksums once decoding is done."""
    url = loc.url_of(path)

    def fetching(read: Callable[[int, int], bytes]) -> Callable[[int, int], bytes]:
        def fetch(start: int, stop: int) -> bytes:
            with storage_errors(url, loc):
                return read(start, stop)

        return fetch

    with about(shard=path):  # what fails in the read is about this shard
        if loc.is_local:
            local = loc.path(path)
            with storage_errors(url, loc):
                descriptor = os.open(local, os.O_RDONLY)
            reader = None
            try:
                with storage_errors(url, loc):
                    reader = LocalOnce(local, descriptor, algorithms, on_bytes=on_bytes, in_order=in_order)
                yield OpenedOnce(reader=reader)
            finally:
                if reader is not None:
                    reader.close()
                os.close(descriptor)
            return
        with loc.open(path, cache_type="none") as handle:

            def ranged(start: int, stop: int) -> bytes:
                handle.seek(start)
                return bytes(handle.read(stop - start))

            with storage_errors(url, loc):
                size = int(getattr(handle, "size", None) or loc.size(path))
            opened = _etag(getattr(handle, "details", None))
            yield OpenedOnce(
                reader=OnePassFile(fetching(ranged), size, algorithms, on_bytes=on_bytes), etag=opened
            )


def _store_checksum(loc: Location, rel: str, algorithm: str) -> tuple[ServerChecksum | None, list[str]]:
    """The store's full-object checksum (read before the bytes), and the algorithms to compute in the read:
    ``algorithm``, plus the store's where a client can set its value (it is kept only if the bytes agree)."""
    try:
        server = server_checksum(loc, rel)
    except (DsmError, OSError):
        server = None  # no checksum (permissions, an old server): the bytes still are
    algorithms = [algorithm]
    if server is not None and server.confirm:
        algorithms.append(server.algorithm)
    return server, algorithms


def _trusted(server: ServerChecksum | None, opened: OpenedOnce, sums: Mapping[str, str]) -> str | None:
    """The store's checksum if it describes the bytes read: the same version (ETag) and, for values any
    client can set, the same digest as the bytes. An ETag is never taken for a checksum."""
    if server is None:
        return None
    if server.etag and opened.etag and server.etag != opened.etag:
        return None
    if server.confirm and sums.get(server.algorithm) != server.value:
        return None
    return server.value


def measure_object(
    loc: Location,
    rel: str,
    *,
    algorithm: str = DEFAULT_ALGORITHM,
    on_bytes: Callable[[int], None] | None = None,
) -> MeasuredObject:
    """Checksum the bytes of ``rel``, and record the store's full-object checksum where it can be trusted.

    The store's checksum is read before the bytes; it is kept only if the object read is the same
    version (same ETag) and, for values any client can set (Azure Content-MD5), only if dsm computed the
    same digest from the bytes in the same pass. An ETag is never taken for a checksum.
    """
    server, algorithms = _store_checksum(loc, rel, algorithm)
    with read_once(loc, rel, algorithms, on_bytes=on_bytes) as opened:
        sums = opened.finish()
    return MeasuredObject(checksum=sums[algorithm], server_checksum=_trusted(server, opened, sums))


@dataclass(frozen=True, kw_only=True)
class DescribedShard:
    """A shard's contract entry and the row digest it was made from."""

    shard: Shard
    digest: RowDigest


def shard_entry(
    path: str, size: int, checksum: str, digest: RowDigest, *, server_checksum: str | None = None
) -> Shard:
    """The contract entry of a shard from its size, checksum and row digest (and the store's checksum)."""
    return Shard(
        path=path,
        bytes=size,
        rows=digest.rows,
        checksum=checksum,
        fingerprint=digest.unordered,
        ordered_fingerprint=digest.ordered,
        server_checksum=server_checksum,
    )


def describe_shard(
    loc: Location,
    path: str,
    fmt: Format,
    schema: pa.Schema | None,
    *,
    on_bytes: Callable[[int], None] | None = None,
    on_rows: Callable[[int], None] | None = None,
    batch_rows: int | None = None,
    on_schema: Callable[[pa.Schema], None] | None = None,
) -> DescribedShard:
    """Read the shard at ``path`` once, as it is on storage: checksum its bytes and decode its rows under
    ``schema`` from the same read (:func:`read_once`), with the store's checksum where it can be trusted.

    ``batch_rows`` bounds the rows decoded at once (None: from the size and the rows a Parquet footer
    declares, :func:`batch_rows_for`); ``on_bytes`` and ``on_rows`` hear of the bytes hashed and the rows
    decoded as they go. The entry's size is that of the bytes read.
    Decoding failures raise :class:`dsm.errors.FormatError` or :class:`dsm.errors.SchemaError` naming the
    shard.
    """
    server, algorithms = _store_checksum(loc, path, DEFAULT_ALGORITHM)
    with read_once(loc, path, algorithms, on_bytes=on_bytes, in_order=fmt.index_by_scan) as opened:
        handle: IO[bytes] = opened.file  # type: ignore[assignment]
        if on_schema is not None and fmt.self_describing:
            on_schema(open_shard_schema(handle, loc, path, fmt))
            handle.seek(0)
        if batch_rows is None:
            batch_rows = _batch_rows_of(handle, fmt, path, opened.size)
            handle.seek(0)
        found = digest_open_shard(
            handle, loc, path, fmt, schema=schema, on_rows=on_rows, batch_rows=batch_rows
        )
        sums = opened.finish()
    entry = shard_entry(
        path,
        opened.size,
        sums[DEFAULT_ALGORITHM],
        found.digest,
        server_checksum=_trusted(server, opened, sums),
    )
    return DescribedShard(shard=entry, digest=found.digest)


def _batch_rows_of(handle: IO[bytes], fmt: Format, path: str, size: int) -> int:
    """Rows per batch for one shard: by its size and the rows its footer declares where the format has them
    there (Parquet), else the default (an Arrow file's batches are decoded as stored, without copies)."""
    if not fmt.rows_in_footer:
        return DEFAULT_BATCH_ROWS
    try:
        rows = fmt.count_rows(handle, shard=path)
    except (pa.ArrowException, ValueError, OSError, DsmError):
        return DEFAULT_BATCH_ROWS  # the decode that follows names what is wrong with the file
    return batch_rows_for(decoded_bytes_per_row(size, rows, fmt.decoded_per_stored))


def dataset_fingerprint(digests: Iterable[RowDigest]) -> DatasetFingerprint:
    """The dataset fingerprint of shards' digests, combined in shard order."""
    total = RowDigest.combine(digests)
    return DatasetFingerprint(
        algorithm=ALGORITHM, rows=total.rows, unordered=total.unordered, ordered=total.ordered
    )


def contract_location(loc: Location) -> str:
    """The URL stored in a contract: absolute for local paths, credentials never included."""
    if loc.is_local:
        return loc.root
    # Credentials are dropped (not masked), so the location stays usable with the user's own credentials.
    return redact(public_url(loc.url.rstrip("/")))


def takes_unnamed(paths: Iterable[str], format: str) -> bool:
    """Whether a dataset of ``format`` whose shards are ``paths`` takes files no format claims by name: at
    register, when none of the files has the format's own name; at verify, when a listed shard has none."""
    kinds = [detect_format(p) for p in paths]
    return bool(kinds) and format not in kinds


# --- which files are a dataset's -----------------------------------------------------------------


_DOC_NAMES = ("readme", "license", "licence", "notice", "copying", "changelog", "authors")
_HIVE_PART = re.compile(r"^[^=]+=[^=]*$")


@dataclass(frozen=True, kw_only=True)
class IgnoredFile:
    """A file at a dataset's location that is not data, and why."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class DatasetFiles:
    """A listing split: ``shards`` (files of the dataset's format, in path order), ``ignored`` (files that
    are not data, with the reason), and ``partitions`` (Hive-style ``key=value`` folders the shards lie in,
    by key, with the values seen)."""

    shards: tuple[FileInfo, ...]
    ignored: tuple[IgnoredFile, ...]
    partitions: dict[str, tuple[str, ...]]


def not_data(path: str) -> str | None:
    """Why the file at ``path`` (relative to a dataset's location) is not data by its name alone, or None.

    Hidden files and folders (``.name``) and names starting with ``_`` (``_SUCCESS``, ``_metadata``,
    ``_delta_log/``, dsm's ``_dsm_rewrite*``) are tool metadata; ``*.crc`` are checksum sidecars; ``*.md``,
    ``README``, ``LICENSE``, ``NOTICE``... are documentation; ``*.lock`` are lock files.

    >>> not_data("_SUCCESS"), not_data("part-0.parquet")
    ("a name starting with '_' (a tool's metadata, such as _SUCCESS or dsm's journal)", None)
    """
    parts = path.split("/")
    if any(p.startswith(".") for p in parts):
        return "hidden (a name starting with '.')"
    if any(p.startswith("_") for p in parts):
        return "a name starting with '_' (a tool's metadata, such as _SUCCESS or dsm's journal)"
    base = parts[-1].lower()
    if base.endswith(".crc"):
        return "a checksum sidecar (.crc)"
    if base.endswith(".md") or base.split(".", 1)[0] in _DOC_NAMES:
        return "documentation"
    if base.endswith(".lock"):
        return "a lock file"
    return None


def dataset_files(
    files: Iterable[FileInfo], *, format: str, pattern: str | None = None, unnamed: bool = False
) -> DatasetFiles:
    """Split a location's listing into the shards of a ``format`` dataset and the files that are not data.

    A file is a shard when its name is not :func:`not_data`, it matches ``pattern`` (a glob relative to the
    location, when the dataset was registered from one; files outside it are none of the dataset's and are
    not listed), and its name is one of ``format``'s (``.parquet``, ``.jsonl.gz``...), or, with
    ``unnamed``, a name no format claims (a dataset whose shards do not carry their format's extension:
    :func:`takes_unnamed`). A file of another known format is ignored, and listed so, as is one no format
    claims without ``unnamed``.
    """
    shards: list[FileInfo] = []
    ignored: list[IgnoredFile] = []
    partitions: dict[str, set[str]] = {}
    for info in sorted(files, key=lambda f: f.path):
        if pattern and not fnmatch.fnmatchcase(info.path, pattern):
            continue
        reason = not_data(info.path)
        if reason is None:
            kind = detect_format(info.path)
            if kind is not None and kind != format:
                reason = f"a {kind} file, not {format}"
            elif kind is None and not unnamed:
                reason = f"not a {format} file by its name"
        if reason is not None:
            ignored.append(IgnoredFile(path=info.path, reason=reason))
            continue
        shards.append(info)
        for part in info.path.split("/")[:-1]:
            if _HIVE_PART.match(part):
                key, _, value = part.partition("=")
                partitions.setdefault(key, set()).add(value)
    return DatasetFiles(
        shards=tuple(shards),
        ignored=tuple(ignored),
        partitions={k: tuple(sorted(v)) for k, v in sorted(partitions.items())},
    )
