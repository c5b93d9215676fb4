"""Azure Blob Storage (adlfs): ``If-None-Match: *`` creates and ETag-conditioned uploads.

``Content-MD5`` is a property any client may set, so it is used as a server checksum only after dsm
compared it with the bytes it read itself; on blobs dsm uploads it sets it from the bytes written. Retries
are the azure-core retry policy of the client adlfs builds, tuned and counted by dsm.

Readiness (:class:`AzureProbe`, ``dsm storage check``), through the client adlfs builds:

- compare-and-swap: a blob is overwritten behind a reader's back, then an upload conditioned on the ETag
  read (``IfNotModified``) must be refused and one on the current ETag accepted;
- server checksums: the ``Content-MD5`` of a blob dsm wrote, compared with the bytes;
- delete protection: blob soft delete (the account's ``DeleteRetentionPolicy``) and blob versioning (a
  version id on dsm's blob);
- encryption: ``x-ms-server-encrypted`` of dsm's blob (Azure encrypts every blob it stores; an emulator
  or gateway might not);
- public access: the container's public access level (``private``, ``blob``, ``container``).

An API the credentials may not call (a container-scoped SAS cannot read account properties) gives
``unknown``. Container soft delete and the account's ``AllowBlobPublicAccess`` are management-plane
settings the data-plane API does not show.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dsm.errors import ConflictError, DatasetNotFound, StorageError
from dsm.storage.readiness import Finding, StoredFile, StoreProbe, listing
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

__all__ = ["AzureBlobStore", "AzureProbe"]

T = TypeVar("T")


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


# --- readiness: what Azure answers about a container (dsm storage check) ---------------------------------


def _split(loc: Location, rel: str) -> tuple[str, str]:
    container, blob, _ = loc.fs.split_path(loc.path(rel))
    return str(container), str(blob)


def _on_loop(loc: Location, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return run_on_loop(loc.fs, factory)


def _denied(exc: Exception) -> bool:
    return getattr(exc, "status_code", None) in (401, 403)


def _unknown(check: str, what: str, exc: Exception) -> Finding:
    status = getattr(exc, "status_code", None)
    why = "the credentials may not read it" if _denied(exc) else "the service did not answer it"
    return Finding(
        check=check,
        status="unknown",
        detail=f"{what}: {why} ({status or type(exc).__name__})",
        evidence={"error": status or redact(str(exc).splitlines()[0])},
    )


class AzureProbe(StoreProbe):
    """The Azure Blob answers of ``dsm storage check``."""

    name = "azure"

    def atomic_detail(self) -> str:
        return "upload with If-None-Match: * to create and If-Match: <ETag> (IfNotModified) to swap"

    def _blob(self, loc: Location, rel: str) -> Any:
        container, blob = _split(loc, rel)
        return loc.fs.service_client.get_blob_client(container=container, blob=blob)

    def _properties(self, loc: Location, rel: str) -> Any:
        client = self._blob(loc, rel)

        async def props() -> Any:
            return await client.get_blob_properties()

        return _on_loop(loc, props)

    def _account(self, loc: Location) -> Any:
        service = loc.fs.service_client

        async def props() -> Any:
            return await service.get_service_properties()

        return _on_loop(loc, props)

    def stale_write(self, loc: Location, rel: str) -> Finding:
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError

        check = "compare-and-swap"
        client = self._blob(loc, rel)
        evidence: dict[str, Any] = {"stale_etag": None, "current_etag": None}

        async def race() -> str:
            read = (await client.get_blob_properties()).etag
            written = await client.upload_blob(b"written by another writer", overwrite=True)
            try:
                await client.upload_blob(
                    b"must not be written",
                    overwrite=True,
                    etag=read,
                    match_condition=MatchConditions.IfNotModified,
                )
            except ResourceModifiedError:
                evidence["stale_etag"] = "refused (412)"
            else:
                evidence["stale_etag"] = "written"
                return "stale"
            await client.upload_blob(
                b"swapped",
                overwrite=True,
                etag=written["etag"],
                match_condition=MatchConditions.IfNotModified,
            )
            evidence["current_etag"] = "written"
            return "ok"

        try:
            outcome = _on_loop(loc, race)
        except ResourceModifiedError:
            evidence["current_etag"] = "refused"
            return Finding(
                check=check,
                status="fail",
                detail="an upload conditioned on the blob's current ETag was refused",
                evidence=evidence,
            )
        if outcome == "stale":
            return Finding(
                check=check,
                status="fail",
                detail="the service wrote a blob conditioned on an ETag it no longer had: alias moves "
                "are not atomic here",
                evidence=evidence,
            )
        return Finding(
            check=check,
            status="pass",
            detail="an upload on a stale ETag refused (412), on the current ETag accepted: versions "
            "and aliases are atomic here",
            evidence={**evidence, "how": self.atomic_detail()},
        )

    def checksums(self, loc: Location, rel: str) -> Finding:
        props = self._properties(loc, rel)
        md5 = props.content_settings.content_md5 if props.content_settings else None
        actual = hashlib.md5(loc.read_bytes(rel)).hexdigest()
        evidence = {"content_md5": bytes(md5).hex() if md5 else None, "md5_of_bytes": actual}
        if not md5:
            return Finding(
                check="server-checksums",
                status="warn",
                detail="the blob dsm wrote has no Content-MD5: verify --fast reads every shard here",
                evidence=evidence,
            )
        if bytes(md5).hex() != actual:
            return Finding(
                check="server-checksums",
                status="fail",
                detail="the blob's Content-MD5 does not match its bytes: this store's checksums cannot "
                "be trusted",
                evidence=evidence,
            )
        return Finding(
            check="server-checksums",
            status="pass",
            detail="Content-MD5 on the blobs dsm writes (set by dsm on every upload and confirmed "
            "against the bytes when a shard is registered): verify --fast checks shards without reading",
            evidence=evidence,
        )

    def delete_protection(self, loc: Location, rel: str | None) -> Finding:
        from azure.core.exceptions import HttpResponseError

        check = "delete-protection"
        try:
            policy = self._account(loc)["delete_retention_policy"]
        except HttpResponseError as exc:
            return _unknown(check, "the account's blob service properties", exc)
        version = self._properties(loc, rel).version_id if rel else None
        evidence = {
            "blob_soft_delete": bool(policy.enabled),
            "soft_delete_days": policy.days,
            "blob_versioning": "on" if version else ("off" if rel else "unknown"),
            "container_soft_delete": "not visible to the data-plane API",
        }
        kept = []
        if policy.enabled:
            kept.append(f"blob soft delete keeps deleted blobs {policy.days} days")
        if version:
            kept.append("blob versioning keeps overwritten blobs")
        if kept:
            return Finding(check=check, status="pass", detail="; ".join(kept), evidence=evidence)
        return Finding(
            check=check,
            status="warn",
            detail="no blob soft delete and no blob versioning: a deleted or overwritten blob cannot "
            "be recovered",
            evidence=evidence,
        )

    def encryption(self, loc: Location, rel: str | None) -> Finding:
        if rel is None:
            return Finding(
                check="encryption",
                status="unknown",
                detail="Azure reports encryption per blob, and there was no blob dsm wrote to ask about",
            )
        props = self._properties(loc, rel)
        evidence = {"server_encrypted": props.server_encrypted, "encryption_scope": props.encryption_scope}
        if props.server_encrypted:
            return Finding(
                check="encryption",
                status="pass",
                detail="the blob dsm wrote is encrypted at rest (x-ms-server-encrypted: true)"
                + (f", scope {props.encryption_scope}" if props.encryption_scope else ""),
                evidence=evidence,
            )
        if props.server_encrypted is None:
            return Finding(
                check="encryption",
                status="unknown",
                detail="the service did not say whether the blob is encrypted",
                evidence=evidence,
            )
        return Finding(
            check="encryption",
            status="fail",
            detail="the blob dsm wrote is not encrypted at rest (x-ms-server-encrypted: false)",
            evidence=evidence,
        )

    def public_access(self, loc: Location) -> Finding:
        from azure.core.exceptions import HttpResponseError

        container = _split(loc, "probe")[0]
        client = loc.fs.service_client.get_container_client(container)

        async def props() -> Any:
            return await client.get_container_properties()

        try:
            level = _on_loop(loc, props).public_access
        except HttpResponseError as exc:
            return _unknown("public-access", "the container's properties", exc)
        evidence = {
            "container_public_access": level or "private",
            "account_allow_blob_public_access": "not visible to the data-plane API",
        }
        if level == "container":
            return Finding(
                check="public-access",
                status="fail",
                detail=f"container {container} is public: anyone can list and read its blobs",
                evidence=evidence,
            )
        if level:
            return Finding(
                check="public-access",
                status="fail",
                detail=f"container {container} is public: anyone can read its blobs ({level} access)",
                evidence=evidence,
            )
        return Finding(
            check="public-access",
            status="pass",
            detail=f"container {container} is private (no anonymous access)",
            evidence=evidence,
        )

    def inventory(self, loc: Location) -> dict[str, StoredFile]:
        """Azure's storage class is the account's redundancy (LRS, ZRS, GRS, RAGRS, GZRS, RAGZRS: the SKU
        ``get_account_information`` reports); the access tier of each blob is kept beside it."""
        files = listing(loc)
        if not files:
            return {}
        service = loc.fs.service_client

        async def account() -> Any:
            return await service.get_account_information()

        try:
            sku = str(_on_loop(loc, account).get("sku_name") or "")
        except Exception:  # a SAS without account permissions: the table's default class
            sku = ""
        redundancy = sku.split("_", 1)[1] if "_" in sku else None
        return {
            rel: StoredFile(
                size=int(info.get("size") or 0),
                storage_class=redundancy,
                tier=str(info["blob_tier"]) if info.get("blob_tier") else None,
            )
            for rel, info in files.items()
        }

    def purge(self, loc: Location, prefix: str) -> dict[str, Any]:
        from azure.core.exceptions import HttpResponseError

        try:
            policy = self._account(loc)["delete_retention_policy"]
        except HttpResponseError:
            return {"soft_deleted": "unknown"}
        if policy.enabled:
            return {
                "soft_deleted": f"the deleted scratch blobs are kept by soft delete for {policy.days} days"
            }
        return {}
