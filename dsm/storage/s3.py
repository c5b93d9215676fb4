"""Amazon S3 and S3-compatible stores (s3fs): conditional ``PutObject``, full-object checksums, retries.

A version is created with ``PutObject`` + ``If-None-Match: *``; an alias moves with ``PutObject`` +
``If-Match: <ETag read with the old bytes>``. A lost race is HTTP 412 (or 409 while another conditional
write is in flight) and becomes :class:`~dsm.errors.ConflictError`. Server checksums come from
``HeadObject`` with ``ChecksumMode=ENABLED``; only full-object ones are used. Transient errors are retried
by botocore (``config_kwargs={"retries": ...}``; dsm's default is the ``standard`` mode), and retries are
counted per filesystem from botocore's events.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsm.errors import ConflictError, DatasetNotFound, StorageError
from dsm.storage.secrets import redact
from dsm.storage.stores import (
    STATS_ATTR,
    ObjectStore,
    RequestStats,
    ServerChecksum,
    conflict,
    run_on_loop,
    stats_lock,
)

if TYPE_CHECKING:
    from dsm.storage.location import Location

__all__ = ["S3Store", "s3_full_object_checksum"]

# Strongest first. Each is a full-object checksum when the object was uploaded in one PUT or with
# ChecksumType FULL_OBJECT; a COMPOSITE one (checksum of part checksums) is not a checksum of the bytes.
_S3_CHECKSUMS = (
    ("ChecksumSHA256", "sha256"),
    ("ChecksumCRC64NVME", "crc64nvme"),
    ("ChecksumSHA1", "sha1"),
    ("ChecksumCRC32C", "crc32c"),
    ("ChecksumCRC32", "crc32"),
)
_S3_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict"}
_S3_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
_S3_DENIED_CODES = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


class S3Store(ObjectStore):
    """Amazon S3 and S3-compatible stores through s3fs, with conditional ``PutObject``."""

    name = "s3"
    protocol = ("s3", "s3a")
    atomic = True

    def default_options(self) -> dict[str, Any]:
        return {
            # botocore's standard retry mode: exponential backoff with jitter on throttling, 5xx and
            # timeouts; counted below from the responses' RetryAttempts.
            "config_kwargs": {"retries": {"mode": "standard", "max_attempts": 8}},
            # Objects change behind dsm's back (other writers); a cached listing would hide that.
            "use_listings_cache": False,
        }

    def prepare(self, fs: Any, options: Mapping[str, Any] | None = None) -> None:
        with stats_lock:
            if getattr(fs, STATS_ATTR, None) is not None:
                return
            stats = RequestStats(requests=Counter())
            setattr(fs, STATS_ATTR, stats)
        try:
            events = fs.s3.meta.events  # creates the client (no request is made)
        except Exception:  # a misconfigured client fails on first use with a clear error instead
            return

        def before(model: Any = None, **_: Any) -> None:
            stats.requests[getattr(model, "name", "?")] += 1

        def after(parsed: Any = None, **_: Any) -> None:
            if isinstance(parsed, dict):
                stats.retries += int(parsed.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)

        def error(**_: Any) -> None:
            stats.failures += 1

        events.register("before-call.s3", before)
        events.register("after-call.s3", after)
        events.register("after-call-error.s3", error)

    @staticmethod
    async def _client(fs: Any, bucket: str) -> Any:
        await fs.set_session()
        return await fs.get_s3(bucket)

    @staticmethod
    def _split(loc: Location, rel: str) -> tuple[str, str]:
        bucket, key, _ = loc.fs.split_path(loc.path(rel))
        return str(bucket), str(key)

    def _raise(self, loc: Location, rel: str, exc: Exception, action: str) -> None:
        code, status = _s3_error(exc)
        where = redact(loc.url_of(rel))
        if code in _S3_CONFLICT_CODES or status in (409, 412):
            raise ConflictError(f"{where}: {action} lost a race with another writer; retry") from None
        if code in ("NotImplemented", "501") or status == 501:
            raise StorageError(
                f"{where}: this S3-compatible store does not support conditional writes (If-None-Match / "
                "If-Match), which a registry needs; keep the registry on AWS S3, Azure Blob or local disk"
            ) from None
        if code in _S3_DENIED_CODES:
            raise StorageError(f"{where}: permission denied ({code}); check the credentials") from None
        raise StorageError(f"{where}: {action} failed: {redact(str(exc))}") from None

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        bucket, key = self._split(loc, rel)
        fs = loc.fs

        async def put() -> None:
            client = await self._client(fs, bucket)
            await client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")

        try:
            run_on_loop(fs, put)
        except Exception as exc:
            code, status = _s3_error(exc)
            if code is None and status is None:
                raise
            if code in _S3_CONFLICT_CODES or status in (409, 412):
                raise conflict(loc, rel, "already exists; it was not overwritten") from None
            self._raise(loc, rel, exc, "create")
        finally:
            fs.invalidate_cache(loc.path(rel))

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        bucket, key = self._split(loc, rel)
        fs = loc.fs

        async def swap() -> None:
            client = await self._client(fs, bucket)
            try:
                got = await client.get_object(Bucket=bucket, Key=key)
                async with got["Body"] as body:
                    current: bytes | None = await body.read()
                etag = got["ETag"]
            except Exception as exc:
                if _s3_error(exc)[0] not in _S3_MISSING_CODES:
                    raise
                current, etag = None, None
            if current != expected:
                raise conflict(loc, rel, "was changed by another writer; retry")
            condition = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
            await client.put_object(Bucket=bucket, Key=key, Body=new, **condition)

        try:
            run_on_loop(fs, swap)
        except ConflictError:
            raise
        except Exception as exc:
            if _s3_error(exc) == (None, None):
                raise
            self._raise(loc, rel, exc, "conditional write")
        finally:
            fs.invalidate_cache(loc.path(rel))

    def server_checksum(self, loc: Location, rel: str) -> ServerChecksum | None:
        bucket, key = self._split(loc, rel)
        fs = loc.fs

        async def head() -> dict[str, Any]:
            client = await self._client(fs, bucket)
            return dict(await client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED"))

        try:
            info = run_on_loop(fs, head)
        except Exception as exc:
            code, _ = _s3_error(exc)
            if code in _S3_MISSING_CODES:
                raise DatasetNotFound(f"{loc.url_of(rel)}: not found") from None
            if code is None:
                raise
            self._raise(loc, rel, exc, "HeadObject")
            raise  # unreachable: _raise always raises
        return s3_full_object_checksum(info)


def s3_full_object_checksum(head: dict[str, Any]) -> ServerChecksum | None:
    """The strongest full-object checksum in a ``HeadObject`` response, or None.

    A checksum counts when ``ChecksumType`` is ``FULL_OBJECT``, or, where the store does not say (older
    servers, moto for single PUTs), when the ETag shows a single-part upload (no ``-N`` suffix).
    """
    etag = str(head.get("ETag") or "").strip('"') or None
    kind = head.get("ChecksumType")
    if kind is not None and kind != "FULL_OBJECT":
        return None
    if kind is None and etag is not None and "-" in etag:
        return None
    for field, algorithm in _S3_CHECKSUMS:
        value = head.get(field)
        if not value or "-" in str(value):
            continue
        try:
            digest = base64.b64decode(str(value), validate=True).hex()
        except ValueError:
            continue
        size = head.get("ContentLength")
        return ServerChecksum(
            algorithm=algorithm, digest=digest, size=int(size) if size is not None else None, etag=etag
        )
    return None


def _s3_error(exc: BaseException) -> tuple[str | None, int | None]:
    """(error code, HTTP status) of a botocore ClientError, else (None, None)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None, None
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return (str(code) if code is not None else None), (int(status) if status is not None else None)
