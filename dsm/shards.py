"""One stored shard: open, iterate, schema, digest, measure, describe (the one home of each).

Every layer above reads a shard through these functions: ``dsm verify`` and ``dsm register`` to check and
describe it, the rewrite to copy it, ``dsm bench`` to time it and ``dsm.open`` to train on it.

- :func:`open_shard` opens it for decoding (local files as Arrow native files), :func:`iter_shard` and
  :func:`iter_open_shard` stream its record batches, :func:`shard_schema` and :func:`fragment_count`
  read its layout; decoding errors become :class:`~dsm.errors.FormatError` naming the shard.
- :func:`digest_shard` decodes it under a schema and computes its row digest.
- :func:`measure_object` checksums its bytes and records the store's full-object checksum where it can
  be trusted.
- :func:`describe_shard` does both, for the contract entry of a shard (``register``, the rewrites), and
  :func:`dataset_fingerprint` combines the shards' digests.
- :func:`dataset_files` says which files of a listing are a dataset's shards and which are not data
  (``_SUCCESS``, ``*.crc``, ``README.md``, dsm's own journal): ``register`` and ``verify`` ask it alike.

>>> dataset_fingerprint([]).rows
0
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa

from dsm.contract import DatasetFingerprint, Shard
from dsm.errors import DsmError, FormatError, SchemaError
from dsm.formats import DEFAULT_BATCH_ROWS, Format, detect_format
from dsm.hashing.checksum import DEFAULT_ALGORITHM, file_checksums
from dsm.hashing.fingerprint import digest_batch
from dsm.hashing.rowdigest import ALGORITHM, RowDigest
from dsm.storage import FileInfo, Location, public_url, redact, storage_errors
from dsm.storage.stores import server_checksum

__all__ = [
    "DatasetFiles",
    "DescribedShard",
    "IgnoredFile",
    "MeasuredObject",
    "ShardDigest",
    "contract_location",
    "dataset_files",
    "dataset_fingerprint",
    "describe_shard",
    "digest_shard",
    "fragment_count",
    "iter_open_shard",
    "iter_shard",
    "measure_object",
    "not_data",
    "open_shard",
    "shard_entry",
    "shard_schema",
    "takes_unnamed",
]


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
        return FormatError(str(exc))
    return FormatError(f"shard {redact(loc.url_of(path))}: cannot be decoded: {exc}")


def shard_schema(loc: Location, path: str, fmt: Format) -> pa.Schema:
    """The schema stored in (or inferred from) one shard."""
    with open_shard(loc, path) as handle:
        try:
            return fmt.read_schema(handle, shard=path)
        except (FormatError, SchemaError):
            raise
        except (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError) as exc:
            raise _decode_errors(loc, path, exc) from None


@contextlib.contextmanager
def open_shard(loc: Location, path: str) -> Iterator[IO[bytes]]:
    """Open one shard for decoding. Local files open as Arrow native files, which Arrow reads without
    going through Python (the Parquet reader decodes 2-3x faster that way); others through fsspec."""
    if not loc.is_local:
        with loc.open(path) as handle:
            yield handle
        return
    with storage_errors(loc.url_of(path)):
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
    except (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError, OSError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, pa.ArrowException):
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
    digest = RowDigest.empty()
    seen_schema: pa.Schema | None = None
    for batch in iter_shard(loc, path, fmt, schema=schema, batch_rows=batch_rows):
        if seen_schema is None:
            seen_schema = batch.schema
        digest = digest + digest_batch(batch)
        if on_rows is not None:
            on_rows(batch.num_rows)
    if seen_schema is None:
        seen_schema = schema if schema is not None else shard_schema(loc, path, fmt)
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
    try:
        server = server_checksum(loc, rel)
    except (DsmError, OSError):
        server = None  # no checksum (permissions, an old server): the bytes still are
    algorithms = [algorithm]
    if server is not None and server.confirm:
        algorithms.append(server.algorithm)
    with loc.open(rel) as handle:
        opened = _etag(getattr(handle, "details", None))
        sums = file_checksums(handle, algorithms, on_bytes=on_bytes)
    if server is not None and (
        (server.etag and opened and server.etag != opened)
        or (server.confirm and sums.get(server.algorithm) != server.value)
    ):
        server = None
    return MeasuredObject(checksum=sums[algorithm], server_checksum=server.value if server else None)


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
    size: int | None = None,
    on_bytes: Callable[[int], None] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> DescribedShard:
    """Read the shard at ``path`` as it is on storage: checksum its bytes, decode its rows under ``schema``.

    ``size`` is the listed size when the caller has it (else it is asked from storage); ``batch_rows``
    bounds the rows decoded at once. Decoding failures
    raise :class:`dsm.errors.FormatError` or :class:`dsm.errors.SchemaError` naming the shard.
    """
    # The bytes' checksum, plus the object store's full-object checksum where it can be trusted.
    measured = measure_object(loc, path, algorithm=DEFAULT_ALGORITHM, on_bytes=on_bytes)
    found = digest_shard(loc, path, fmt, schema=schema, batch_rows=batch_rows)
    size = loc.size(path) if size is None else size
    entry = shard_entry(path, size, measured.checksum, found.digest, server_checksum=measured.server_checksum)
    return DescribedShard(shard=entry, digest=found.digest)


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
