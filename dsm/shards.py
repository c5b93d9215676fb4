"""Contract entries for stored shards: the one code path that measures a file into a :class:`Shard`.

``dsm register`` and the rewrites (``convert-format``, ``reshard``) describe every shard they put in a
contract with :func:`describe_shard`: the checksum of the bytes on storage, then the rows decoded under the
contract's schema and their row fingerprint. :func:`dataset_fingerprint` combines the shards' digests.

>>> dataset_fingerprint([]).rows
0
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa

from dsm.checksum import DEFAULT_ALGORITHM
from dsm.contract import DatasetFingerprint, Shard
from dsm.fingerprint import ALGORITHM, RowDigest
from dsm.formats import DEFAULT_BATCH_ROWS, Format
from dsm.object_store import measure_object
from dsm.reader import digest_shard
from dsm.storage import Location, public_url, redact

__all__ = ["DescribedShard", "contract_location", "dataset_fingerprint", "describe_shard", "shard_entry"]


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
