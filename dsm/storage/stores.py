"""What dsm needs from an object store beyond fsspec: conditional writes, server-side checksums, retries.

``dsm.storage`` dispatches to an :class:`ObjectStore` by protocol (:func:`store_for`). Local disk is handled
by ``dsm.storage`` itself (``link()`` and a lock file). Here:

- **S3** (s3fs): a version is created with ``PutObject`` + ``If-None-Match: *``; an alias moves with
  ``PutObject`` + ``If-Match: <ETag read with the old bytes>``. A lost race is HTTP 412 (or 409 while
  another conditional write is in flight) and becomes :class:`~dsm.errors.ConflictError`. Server
  checksums come from ``HeadObject`` with ``ChecksumMode=ENABLED``; only full-object ones are used.
  Transient errors are retried by botocore (``config_kwargs={"retries": ...}``; dsm's default is the
  ``standard`` mode), and retries are counted per filesystem from botocore's events.
- **Azure Blob** (adlfs): create with ``upload_blob(overwrite=False)`` (``If-None-Match: *``); swap with
  ``upload_blob(etag=..., match_condition=IfNotModified)``. ``Content-MD5`` is a property any client may
  set, so it is used as a server checksum only after dsm compared it with the bytes it read itself; on
  blobs dsm uploads it sets it from the bytes written. Retries are the azure-core retry policy of the
  client adlfs builds, tuned and counted by dsm.
- **memory://** lives in one process; a process-wide lock makes its check-and-write atomic.
- Anything else (gcs, http, ...) gets :class:`GenericStore`: a check followed by a write, which a racing
  writer can slip between. It says so with a :class:`NonAtomicWriteWarning` and ``atomic=False``.
"""

from __future__ import annotations

import base64
import importlib
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dsm.checksum import DEFAULT_ALGORITHM, file_checksums
from dsm.errors import ConflictError, DatasetNotFound, DsmError, InputError, StorageError

if TYPE_CHECKING:
    from dsm.storage import Location

__all__ = [
    "AzureBlobStore",
    "GenericStore",
    "MeasuredObject",
    "MemoryStore",
    "NonAtomicWriteWarning",
    "ObjectStore",
    "RequestStats",
    "S3Store",
    "ServerChecksum",
    "measure_object",
    "register_store",
    "request_stats",
    "s3_full_object_checksum",
    "server_checksum",
    "store_for",
]

T = TypeVar("T")


class NonAtomicWriteWarning(UserWarning):
    """A registry write on a store without conditional writes: a racing writer could overwrite it."""


@dataclass(frozen=True, kw_only=True)
class ServerChecksum:
    """A full-object checksum the store keeps for an object: ``algorithm`` and lowercase hex ``digest``.

    ``confirm`` is True when the store does not itself guarantee the value matches the bytes (Azure's
    Content-MD5 can be set by any client): such a value is recorded only after dsm computed the same
    digest from the bytes. ``etag`` identifies the object version it was read from (never a hash).
    """

    algorithm: str
    digest: str
    size: int | None = None
    etag: str | None = None
    confirm: bool = False

    @property
    def value(self) -> str:
        """``ALGORITHM:HEX``, the form a contract records (``server_checksum``)."""
        return f"{self.algorithm}:{self.digest}"


@dataclass
class RequestStats:
    """Requests a filesystem made and how many attempts were retries after transient errors."""

    requests: Counter[str]
    retries: int = 0
    failures: int = 0

    def snapshot(self) -> tuple[int, int, int]:
        return sum(self.requests.values()), self.retries, self.failures


class ObjectStore:
    """Conditional writes and server checksums for one kind of store; :func:`register_store` maps a
    protocol to a subclass."""

    name: ClassVar[str] = "generic"
    atomic: ClassVar[bool] = False
    """Whether :meth:`create_exclusive` and :meth:`compare_and_swap` are atomic on the server."""
    own_options: ClassVar[frozenset[str]] = frozenset()
    """Option names dsm applies itself (in :meth:`prepare`) instead of passing them to the filesystem."""

    def default_options(self) -> dict[str, Any]:
        """Filesystem options dsm uses unless the user gave them (block sizes, caching, retries)."""
        return {}

    def prepare(self, fs: Any, options: Mapping[str, Any] | None = None) -> None:
        """Called for each filesystem instance dsm gets (retry settings, request counting), with the
        options named in :attr:`own_options`."""

    def watch_upload(self, handle: Any) -> Callable[[], None]:
        """Called on a file opened for a direct upload; the returned function runs just before it is
        committed (Azure: set the Content-MD5 of the bytes written, so the blob carries a checksum)."""
        return lambda: None

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        """Create ``rel`` with ``data``; :class:`ConflictError` if it exists (never overwrite)."""
        raise NotImplementedError

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        """Replace ``rel`` by ``new`` if it holds ``expected`` (None: absent); else :class:`ConflictError`."""
        raise NotImplementedError

    def server_checksum(self, loc: Location, rel: str) -> ServerChecksum | None:
        """The store's full-object checksum of ``rel``, or None when it has none dsm can trust."""
        return None


def _conflict(loc: Location, rel: str, what: str) -> ConflictError:
    from dsm.storage import redact

    return ConflictError(f"{redact(loc.url_of(rel))} {what}")


class GenericStore(ObjectStore):
    """A store without conditional writes: check, then write. Not atomic, and says so."""

    name = "generic"
    atomic = False

    def _warn(self, loc: Location, rel: str) -> None:
        from dsm.storage import redact

        warnings.warn(
            f"{redact(loc.url_of(rel))}: {loc.protocol}:// has no conditional writes in dsm; the check and "
            "the write are two steps and a concurrent writer could slip between them",
            NonAtomicWriteWarning,
            stacklevel=4,
        )

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        self._warn(loc, rel)
        path = loc.path(rel)
        if loc.fs.exists(path):
            raise _conflict(loc, rel, "already exists; it was not overwritten")
        loc.fs.pipe_file(path, data)

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        self._warn(loc, rel)
        path = loc.path(rel)
        current = loc.fs.cat_file(path) if loc.fs.exists(path) else None
        if current != expected:
            raise _conflict(loc, rel, "was changed by another writer; retry")
        loc.fs.pipe_file(path, new)


class MemoryStore(ObjectStore):
    """``memory://``: one process holds the whole store, so one lock makes check-and-write atomic."""

    name = "memory"
    atomic = True
    _lock = threading.Lock()

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        path = loc.path(rel)
        with self._lock:
            if loc.fs.exists(path):
                raise _conflict(loc, rel, "already exists; it was not overwritten")
            loc.fs.pipe_file(path, data)

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        path = loc.path(rel)
        with self._lock:
            current = loc.fs.cat_file(path) if loc.fs.exists(path) else None
            if current != expected:
                raise _conflict(loc, rel, "was changed by another writer; retry")
            loc.fs.pipe_file(path, new)


def _run(fs: Any, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine on the async filesystem's own event loop (where its clients live)."""
    from fsspec.asyn import sync

    return sync(fs.loop, factory)  # type: ignore[no-any-return]


# --- S3 -------------------------------------------------------------------------------------------------

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

_stats_lock = threading.Lock()
_STATS_ATTR = "_dsm_request_stats"


def request_stats(loc: Location) -> RequestStats | None:
    """Requests and retries counted for ``loc``'s filesystem (S3), or None where they are not counted.

    The counts are per filesystem instance, which fsspec shares between every location with the same
    options in a process: compare two snapshots to count what one piece of work did.
    """
    return getattr(loc.fs, _STATS_ATTR, None)


class S3Store(ObjectStore):
    """Amazon S3 and S3-compatible stores through s3fs, with conditional ``PutObject``."""

    name = "s3"
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
        with _stats_lock:
            if getattr(fs, _STATS_ATTR, None) is not None:
                return
            stats = RequestStats(requests=Counter())
            setattr(fs, _STATS_ATTR, stats)
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
        from dsm.storage import redact

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
            _run(fs, put)
        except Exception as exc:
            code, status = _s3_error(exc)
            if code is None and status is None:
                raise
            if code in _S3_CONFLICT_CODES or status in (409, 412):
                raise _conflict(loc, rel, "already exists; it was not overwritten") from None
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
                raise _conflict(loc, rel, "was changed by another writer; retry")
            condition = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
            await client.put_object(Bucket=bucket, Key=key, Body=new, **condition)

        try:
            _run(fs, swap)
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
            info = _run(fs, head)
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


# --- Azure Blob -----------------------------------------------------------------------------------------


class AzureBlobStore(ObjectStore):
    """Azure Blob Storage through adlfs, with ``If-None-Match: *`` and ETag-conditioned uploads."""

    name = "azure"
    atomic = True

    # dsm's options for the azure-core retry policy of the client adlfs builds (adlfs passes none through).
    # The SDK's default waits 15 s before the first retry; dsm starts at 1 s and backs off exponentially.
    own_options = frozenset({"retry_total", "retry_backoff", "retry_backoff_base", "retry_jitter"})
    _RETRY_DEFAULTS: ClassVar[dict[str, float]] = {
        "retry_total": 5,
        "retry_backoff": 1.0,
        "retry_backoff_base": 2,
        "retry_jitter": 0.5,
    }
    _RETRY_ATTRIBUTES: ClassVar[dict[str, str]] = {
        "retry_total": "total_retries",
        "retry_backoff": "initial_backoff",
        "retry_backoff_base": "increment_base",
        "retry_jitter": "random_jitter_range",
    }

    def default_options(self) -> dict[str, Any]:
        return {"use_listings_cache": False, "default_cache_type": "readahead", **self._RETRY_DEFAULTS}

    def prepare(self, fs: Any, options: Mapping[str, Any] | None = None) -> None:
        """Tune the retry policy of ``fs``'s blob client and count the retries it makes."""
        client = getattr(fs, "service_client", None)
        policies = getattr(getattr(client, "_pipeline", None), "_impl_policies", None) or []
        retry = next((p for p in policies if hasattr(p, "total_retries") and hasattr(p, "increment")), None)
        if retry is None:  # another SDK layout: its own defaults apply, uncounted
            return
        for name, attribute in self._RETRY_ATTRIBUTES.items():
            if options and name in options and hasattr(retry, attribute):
                value = options[name]
                setattr(retry, attribute, int(value) if name == "retry_total" else float(value))
        with _stats_lock:
            if getattr(fs, _STATS_ATTR, None) is not None:
                return
            stats = RequestStats(requests=Counter())
            setattr(fs, _STATS_ATTR, stats)
        increment = retry.increment

        def counted(settings: Any, *args: Any, **kwargs: Any) -> Any:
            again = increment(settings, *args, **kwargs)
            if again:
                stats.retries += 1
            else:
                stats.failures += 1
            return again

        retry.increment = counted

    @staticmethod
    def _split(loc: Location, rel: str) -> tuple[str, str]:
        container, blob, _ = loc.fs.split_path(loc.path(rel))
        return str(container), str(blob)

    def _raise(self, loc: Location, rel: str, exc: Exception, action: str) -> None:
        from azure.core.exceptions import (
            ClientAuthenticationError,
            ResourceExistsError,
            ResourceModifiedError,
            ResourceNotFoundError,
        )

        from dsm.storage import redact

        where = redact(loc.url_of(rel))
        if isinstance(exc, (ResourceExistsError, ResourceModifiedError)):
            raise ConflictError(f"{where}: {action} lost a race with another writer; retry") from None
        if isinstance(exc, ResourceNotFoundError):
            raise DatasetNotFound(f"{where}: not found (does the container exist?)") from None
        if isinstance(exc, ClientAuthenticationError):
            raise StorageError(f"{where}: authentication failed; check the credentials") from None
        raise StorageError(f"{where}: {action} failed: {redact(str(exc).splitlines()[0])}") from None

    def watch_upload(self, handle: Any) -> Callable[[], None]:
        """Hash what is written and commit the blob with that Content-MD5 (Azure keeps none for block-list
        uploads), so that ``register`` and the rewrites can record a store checksum dsm itself set."""
        import hashlib

        if not hasattr(handle, "_content_settings"):  # an adlfs without per-file content settings
            return lambda: None
        md5 = hashlib.md5()
        write = handle.write

        def hashing_write(data: Any) -> Any:
            md5.update(data)
            return write(data)

        handle.write = hashing_write

        def finish() -> None:
            from azure.storage.blob import ContentSettings

            settings = handle._content_settings or ContentSettings()
            settings.content_md5 = bytearray(md5.digest())
            handle._content_settings = settings

        return finish

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        import hashlib

        from azure.core.exceptions import AzureError, ResourceExistsError
        from azure.storage.blob import ContentSettings

        container, blob = self._split(loc, rel)
        fs = loc.fs
        # dsm sets Content-MD5 itself, so the registry's files carry a checksum dsm can trust.
        settings = ContentSettings(content_md5=bytearray(hashlib.md5(data).digest()))

        async def put() -> None:
            client = fs.service_client.get_blob_client(container=container, blob=blob)
            await client.upload_blob(data, overwrite=False, content_settings=settings)

        try:
            _run(fs, put)
        except ResourceExistsError:
            raise _conflict(loc, rel, "already exists; it was not overwritten") from None
        except AzureError as exc:
            self._raise(loc, rel, exc, "create")
        finally:
            fs.invalidate_cache(loc.path(rel))

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        from azure.core import MatchConditions
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        container, blob = self._split(loc, rel)
        fs = loc.fs

        async def swap() -> None:
            client = fs.service_client.get_blob_client(container=container, blob=blob)
            try:
                downloader = await client.download_blob()
                current: bytes | None = await downloader.readall()
                etag = downloader.properties.etag
            except ResourceNotFoundError:
                current, etag = None, None
            if current != expected:
                raise _conflict(loc, rel, "was changed by another writer; retry")
            if etag is None:
                await client.upload_blob(new, overwrite=False)
            else:
                await client.upload_blob(
                    new, overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified
                )

        try:
            _run(fs, swap)
        except AzureError as exc:
            self._raise(loc, rel, exc, "conditional write")
        finally:
            fs.invalidate_cache(loc.path(rel))

    def server_checksum(self, loc: Location, rel: str) -> ServerChecksum | None:
        from azure.core.exceptions import AzureError

        container, blob = self._split(loc, rel)
        fs = loc.fs

        async def props() -> Any:
            client = fs.service_client.get_blob_client(container=container, blob=blob)
            return await client.get_blob_properties()

        try:
            found = _run(fs, props)
        except AzureError as exc:
            self._raise(loc, rel, exc, "get properties")
            raise  # unreachable
        md5 = found.content_settings.content_md5 if found.content_settings else None
        if not md5:
            return None
        return ServerChecksum(
            algorithm="md5",
            digest=bytes(md5).hex(),
            size=int(found.size),
            etag=str(found.etag).strip('"') if found.etag else None,
            confirm=True,
        )


# --- dispatch -------------------------------------------------------------------------------------------

_KNOWN: dict[str, str] = {
    "s3": "dsm.object_store:S3Store",
    "s3a": "dsm.object_store:S3Store",
    "az": "dsm.object_store:AzureBlobStore",
    "abfs": "dsm.object_store:AzureBlobStore",
    "abfss": "dsm.object_store:AzureBlobStore",
    "memory": "dsm.object_store:MemoryStore",
}
_INSTANCES: dict[str, ObjectStore] = {}


def register_store(protocol: str, target: str) -> None:
    """Use the :class:`ObjectStore` at ``"module:Class"`` for ``protocol``; a taken protocol is refused."""
    if protocol in _KNOWN:
        raise InputError(f"an object store for {protocol}:// is already registered")
    _KNOWN[protocol] = target


def store_for(protocol: str) -> ObjectStore:
    """The :class:`ObjectStore` for a protocol name (``s3``, ``az``, ...); :class:`GenericStore` if none."""
    target = _KNOWN.get(protocol, "dsm.object_store:GenericStore")
    if protocol in _INSTANCES:
        return _INSTANCES[protocol]
    if target not in _INSTANCES:  # one instance per class: s3 and s3a share it
        module, _, cls = target.partition(":")
        _INSTANCES[target] = getattr(importlib.import_module(module), cls)()
    return _INSTANCES[target]


# --- measuring an object --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MeasuredObject:
    """What reading one object found: dsm's checksum of its bytes, and the store's trusted checksum."""

    checksum: str
    server_checksum: str | None = None


def server_checksum(loc: Location, rel: str) -> ServerChecksum | None:
    """The store's full-object checksum of ``rel`` (None on local disk and stores that keep none)."""
    if loc.is_local:
        return None
    return loc.store.server_checksum(loc, rel)


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
