"""Reading shards of a dataset through the format layer: batches, schemas and row digests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from dsm.errors import FormatError, SchemaError
from dsm.fingerprint import RowDigest
from dsm.formats import DEFAULT_BATCH_ROWS, Format
from dsm.storage import Location, redact

__all__ = ["ShardDigest", "digest_shard", "iter_shard", "shard_schema"]


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
    with loc.open(path) as handle:
        try:
            return fmt.read_schema(handle, shard=path)
        except (FormatError, SchemaError):
            raise
        except (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError) as exc:
            raise _decode_errors(loc, path, exc) from None


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
    with loc.open(path) as handle:
        try:
            yield from fmt.iter_batches(handle, shard=path, schema=schema, columns=columns, batch_rows=batch_rows)
        except (FormatError, SchemaError):
            raise
        except (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError, OSError) as exc:
            if isinstance(exc, OSError) and not isinstance(exc, pa.ArrowException):
                raise
            raise _decode_errors(loc, path, exc) from None


def digest_shard(
    loc: Location,
    path: str,
    fmt: Format,
    *,
    schema: pa.Schema | None,
    on_rows: Callable[[int], None] | None = None,
) -> ShardDigest:
    """Decode one shard and compute its row digest. Batches are checked against ``schema`` when given."""
    digest = RowDigest.empty()
    seen_schema: pa.Schema | None = None
    for batch in iter_shard(loc, path, fmt, schema=schema):
        if seen_schema is None:
            seen_schema = batch.schema
        digest = digest.update(batch)
        if on_rows is not None:
            on_rows(batch.num_rows)
    if seen_schema is None:
        seen_schema = schema if schema is not None else shard_schema(loc, path, fmt)
    return ShardDigest(path=path, schema=seen_schema, digest=digest)
