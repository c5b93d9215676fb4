"""Azure Blob Storage (adlfs): ``If-None-Match: *`` creates and ETag-conditioned uploads.

``Content-MD5`` is a property any client may set, so it is used as a server checksum only after dsm
compared it with the bytes it read itself; on blobs dsm uploads it sets it from the bytes written. Retries
are the azure-core retry policy of the client adlfs builds, tuned and counted by dsm.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

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

__all__ = ["AzureBlobStore"]


class AzureBlobStore(ObjectStore):
    """Azure Blob Storage through adlfs, with ``If-None-Match: *`` and ETag-conditioned uploads."""

    name = "azure"
    protocol = ("az", "abfs", "abfss")
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
        with stats_lock:
            if getattr(fs, STATS_ATTR, None) is not None:
                return
            stats = RequestStats(requests=Counter())
            setattr(fs, STATS_ATTR, stats)
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
            run_on_loop(fs, put)
        except ResourceExistsError:
            raise conflict(loc, rel, "already exists; it was not overwritten") from None
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
                raise conflict(loc, rel, "was changed by another writer; retry")
            if etag is None:
                await client.upload_blob(new, overwrite=False)
            else:
                await client.upload_blob(
                    new, overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified
                )

        try:
            run_on_loop(fs, swap)
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
            found = run_on_loop(fs, props)
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
