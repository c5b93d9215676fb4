"""What Azure Blob Storage says about a container, through the client adlfs builds.

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
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from dsm.object_store import _run
from dsm.readiness import Finding, StoredFile, StoreProbe, _listing
from dsm.storage import redact

if TYPE_CHECKING:
    from dsm.storage import Location

__all__ = ["AzureProbe"]

T = TypeVar("T")


def _split(loc: Location, rel: str) -> tuple[str, str]:
    container, blob, _ = loc.fs.split_path(loc.path(rel))
    return str(container), str(blob)


def _on_loop(loc: Location, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return _run(loc.fs, factory)


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
        files = _listing(loc)
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
