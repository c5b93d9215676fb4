"""Logical identity of a shard: its rows, decoded under the contract's schema, match the fingerprint."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import pyarrow as pa

from dsm.contract import Shard
from dsm.errors import DatasetNotFound, FormatError, SchemaError
from dsm.formats import DEFAULT_BATCH_ROWS, Format
from dsm.hashing.checksum import algorithm_of
from dsm.hashing.onepass import ShortRead
from dsm.hashing.rowdigest import RowDigest
from dsm.shards import digest_open_shard, open_shard, open_shard_schema, read_once
from dsm.storage import Location, redact
from dsm.validators.physical import PhysicalCheck, compare_checksum, precheck, read_failure
from dsm.validators.schema import schema_differences

__all__ = ["RowCheck", "check_rows", "check_shard"]


@dataclass(frozen=True, kw_only=True)
class RowCheck:
    """Status is one of ok, corrupt, schema_mismatch, unreadable, missing, unverified."""

    path: str
    status: str
    detail: str = ""
    digest: RowDigest | None = None
    expected: str | None = None
    """The row fingerprint the contract records, where the rows did not match it (``actual``: found)."""
    actual: str | None = None


def check_rows(
    loc: Location,
    shard: Shard,
    fmt: Format,
    schema: pa.Schema,
    *,
    on_rows: Callable[[int], None] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    handle: IO[bytes] | None = None,
) -> RowCheck:
    """Decode one shard with the contract's schema and compare its rows and fingerprint; ``batch_rows``
    bounds the rows decoded at once. With ``handle`` (a :func:`~dsm.shards.read_once` file), the shard
    is read from it, footer and all, instead of being opened again."""
    try:
        if handle is None:
            with open_shard(loc, shard.path) as opened:
                return check_rows(
                    loc, shard, fmt, schema, on_rows=on_rows, batch_rows=batch_rows, handle=opened
                )
        if fmt.self_describing:
            problems = schema_differences(schema, open_shard_schema(handle, loc, shard.path, fmt))
            if problems:
                return RowCheck(path=shard.path, status="schema_mismatch", detail="; ".join(problems))
            handle.seek(0)
        found = digest_open_shard(
            handle, loc, shard.path, fmt, schema=schema, on_rows=on_rows, batch_rows=batch_rows
        )
    except DatasetNotFound:
        return RowCheck(path=shard.path, status="missing", detail="vanished while being read")
    except SchemaError as exc:
        return RowCheck(path=shard.path, status="schema_mismatch", detail=redact(str(exc)))
    except FormatError as exc:
        return RowCheck(path=shard.path, status="unreadable", detail=redact(str(exc)))
    # A StorageError (denied, unreachable) is not a finding about the data: it stops the check (exit 3).
    digest = found.digest
    if shard.rows is not None and digest.rows != shard.rows:
        return RowCheck(
            path=shard.path,
            status="corrupt",
            detail=f"{digest.rows} rows, expected {shard.rows}",
            digest=digest,
        )
    if shard.fingerprint is None:
        return RowCheck(
            path=shard.path, status="unverified", detail="the contract has no row fingerprint for it"
        )
    if digest.unordered != shard.fingerprint or (
        shard.ordered_fingerprint is not None and digest.ordered != shard.ordered_fingerprint
    ):
        return RowCheck(
            path=shard.path,
            status="corrupt",
            detail=f"row fingerprint {digest.unordered[:12]}.. expected {shard.fingerprint[:12]}.."
            + _decimal_hint(schema),
            digest=digest,
            expected=shard.fingerprint,
            actual=digest.unordered,
        )
    return RowCheck(path=shard.path, status="ok", digest=digest)


def check_shard(
    loc: Location,
    shard: Shard,
    fmt: Format,
    schema: pa.Schema,
    *,
    actual_size: int | None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    on_bytes: Callable[[int], None] | None = None,
    on_rows: Callable[[int], None] | None = None,
) -> tuple[PhysicalCheck, RowCheck | None]:
    """Both checks of one shard from one read (``verify --deep``): its bytes against the checksum and its
    decoded rows against the fingerprint, the checksum taken from the bytes that are decoded
    (:func:`~dsm.shards.read_once`). The rows are None when the bytes already fail (or were not read).
    ``on_bytes`` hears of the bytes hashed, ``on_rows`` of the rows decoded, as they go."""
    decided = precheck(shard, actual_size=actual_size)
    if decided is not None:
        return decided, None
    algorithm = algorithm_of(shard.checksum or "")
    try:
        opening = read_once(loc, shard.path, (algorithm,), on_bytes=on_bytes, in_order=fmt.index_by_scan)
        with opening as opened:
            handle: IO[bytes] = opened.file  # type: ignore[assignment]
            rows = check_rows(loc, shard, fmt, schema, on_rows=on_rows, batch_rows=batch_rows, handle=handle)
            # Every byte the decoder did not ask for (or did not reach, if it failed) is hashed here.
            actual = opened.finish()[algorithm]
    except DatasetNotFound as exc:
        return read_failure(shard, exc), None
    # A StorageError (denied, unreachable) is not a finding about the data: it stops the check (exit 3).
    except ShortRead as exc:
        return PhysicalCheck(path=shard.path, status="unreadable", detail=str(exc)), None
    physical = compare_checksum(shard, actual)
    return physical, (rows if physical.status == "ok" else None)


def _wide_decimals(kind: pa.DataType) -> bool:
    if pa.types.is_decimal(kind):
        return bool(kind.precision > 28)
    if pa.types.is_dictionary(kind):
        return _wide_decimals(kind.value_type)
    return any(_wide_decimals(kind.field(i).type) for i in range(kind.num_fields))


def _decimal_hint(schema: pa.Schema) -> str:
    """Why a fingerprint recorded by dsm 0.1.0 may differ for unchanged bytes (docs/fingerprint.md, §8)."""
    if not any(_wide_decimals(f.type) for f in schema):
        return ""
    return (
        "; the schema has decimals of more than 28 digits, which dsm 0.1.0 fingerprinted rounded to 28: "
        "the shard's checksum matched, so its bytes are unchanged; register the data again"
    )
