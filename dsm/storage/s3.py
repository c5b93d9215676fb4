"""Amazon S3 and S3-compatible stores (s3fs): conditional ``PutObject``, full-object checksums, retries.

A version is created with ``PutObject`` + ``If-None-Match: *``; an alias moves with ``PutObject`` +
``If-Match: <ETag read with the old bytes>``. A lost race is HTTP 412 (or 409 while another conditional
write is in flight) and becomes :class:`~dsm.errors.ConflictError`. Server checksums come from
``HeadObject`` with ``ChecksumMode=ENABLED``; only full-object ones are used. Transient errors are retried
by botocore (``config_kwargs={"retries": ...}``; dsm's default is the ``standard`` mode), and retries are
counted per filesystem from botocore's events.

Readiness (:class:`S3Probe`, ``dsm storage check``), through the same client:

- compare-and-swap: an object is overwritten behind a reader's back, then ``PutObject`` with
  ``If-Match: <the ETag it read>`` must be refused (412) and one with the current ETag accepted;
- server checksums: ``HeadObject`` with ``ChecksumMode=ENABLED`` of an object dsm wrote in one request,
  and of one it uploaded in parts (what happens to shards above s3fs's block size, 50 MiB by default);
- delete protection: ``GetBucketVersioning``, ``GetObjectLockConfiguration``;
- encryption: ``GetBucketEncryption`` and the ``ServerSideEncryption`` of dsm's object;
- public access: ``GetPublicAccessBlock``, ``GetBucketPolicyStatus`` (or the policy document itself where
  a store does not evaluate it), ``GetBucketAcl``.

An API the credentials may not call (``AccessDenied``) or the store does not implement gives ``unknown``.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsm.errors import ConflictError, DatasetNotFound, StorageError
from dsm.storage.readiness import Finding, StoreProbe
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

__all__ = ["S3Probe", "S3Store", "s3_full_object_checksum"]

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


# --- readiness: what S3 answers about a bucket (dsm storage check) --------------------------------------


_PUBLIC_GROUPS = (
    "http://acs.amazonaws.com/groups/global/AllUsers",
    "http://acs.amazonaws.com/groups/global/AuthenticatedUsers",
)
_BLOCK_FLAGS = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")
_MULTIPART_BLOCK = 5 << 20  # the smallest part S3 accepts


class _Refused(Exception):
    """An S3 call answered with an error: its code and HTTP status."""

    def __init__(self, code: str | None, status: int | None, message: str) -> None:
        super().__init__(message)
        self.code, self.status = code, status

    @property
    def denied(self) -> bool:
        return self.code in ("AccessDenied", "403", "AllAccessDisabled") or self.status == 403

    @property
    def unsupported(self) -> bool:
        return self.code in ("NotImplemented", "501", "MethodNotAllowed") or self.status in (405, 501)


def _split(loc: Location, rel: str) -> tuple[str, str]:
    bucket, key, _ = loc.fs.split_path(loc.path(rel))
    return str(bucket), str(key)


def _call(loc: Location, rel: str, operation: str, **params: Any) -> dict[str, Any]:
    """``client.<operation>(Bucket=..., **params)`` on the bucket of ``rel`` (Key added when ``rel``
    names an object: pass ``key=False`` in params to leave it out)."""
    with_key = params.pop("key", True)
    bucket, key = _split(loc, rel)
    fs = loc.fs

    async def call() -> dict[str, Any]:
        client = await S3Store._client(fs, bucket)
        args = {"Bucket": bucket, **({"Key": key} if with_key else {}), **params}
        return dict(await getattr(client, operation)(**args))

    try:
        out = run_on_loop(fs, call)
    except Exception as exc:
        code, status = _s3_error(exc)
        if code is None and status is None:
            raise
        raise _Refused(code, status, redact(str(exc))) from None
    out.pop("ResponseMetadata", None)
    return out


def _ask(loc: Location, rel: str, operation: str, missing: tuple[str, ...] = (), **params: Any) -> Any:
    """The answer of a bucket-level call, ``None`` when the store says it has no such configuration
    (one of the ``missing`` codes), or a :class:`_Refused` (denied, unsupported) to report as unknown."""
    try:
        return _call(loc, rel, operation, key=False, **params)
    except _Refused as exc:
        if exc.code in missing:
            return None
        return exc


def _unknown(check: str, what: str, exc: _Refused) -> Finding:
    if exc.code == "NoSuchBucket":
        why = "the bucket does not exist"
    else:
        why = "the credentials may not call it" if exc.denied else "the store does not answer it"
    return Finding(
        check=check,
        status="unknown",
        detail=f"{what}: {why} ({exc.code or exc.status})",
        evidence={"error": exc.code or exc.status},
    )


def _checksum_fields(head: dict[str, Any]) -> dict[str, Any]:
    present = [algorithm for name, algorithm in _S3_CHECKSUMS if head.get(name)]
    trusted = s3_full_object_checksum(head)
    return {
        "algorithms": present,
        "type": head.get("ChecksumType"),
        "used_by_dsm": trusted.algorithm if trusted else None,
    }


class S3Probe(StoreProbe):
    """The S3 answers of ``dsm storage check``."""

    name = "s3"

    def atomic_detail(self) -> str:
        return "PutObject with If-None-Match: * to create and If-Match: <ETag> to swap, checked by the store"

    def stale_write(self, loc: Location, rel: str) -> Finding:
        check = "compare-and-swap"
        read_etag = _call(loc, rel, "head_object")["ETag"]
        current = _call(loc, rel, "put_object", Body=b"written by another writer")["ETag"]
        evidence: dict[str, Any] = {"if_match_stale": None, "if_match_current": None}
        try:
            _call(loc, rel, "put_object", Body=b"must not be written", IfMatch=read_etag)
        except _Refused as exc:
            evidence["if_match_stale"] = exc.code or exc.status
            if exc.unsupported:
                return Finding(
                    check=check,
                    status="fail",
                    detail="the store does not support If-Match: alias moves cannot be atomic here",
                    evidence=evidence,
                )
            if exc.code not in ("PreconditionFailed", "ConditionalRequestConflict") and exc.status not in (
                409,
                412,
            ):
                raise
        else:
            evidence["if_match_stale"] = "written"
            return Finding(
                check=check,
                status="fail",
                detail="the store wrote an object conditioned on an ETag it no longer had (If-Match "
                "ignored): alias moves are not atomic here",
                evidence=evidence,
            )
        try:
            _call(loc, rel, "put_object", Body=b"swapped", IfMatch=current)
            evidence["if_match_current"] = "written"
        except _Refused as exc:
            evidence["if_match_current"] = exc.code or exc.status
            return Finding(
                check=check,
                status="fail",
                detail=f"a write conditioned on the current ETag was refused ({exc.code or exc.status})",
                evidence=evidence,
            )
        return Finding(
            check=check,
            status="pass",
            detail="If-Match with a stale ETag refused (412), with the current ETag accepted: versions and "
            "aliases are atomic here",
            evidence={**evidence, "how": self.atomic_detail()},
        )

    def checksums(self, loc: Location, rel: str) -> Finding:
        single = _checksum_fields(_call(loc, rel, "head_object", ChecksumMode="ENABLED"))
        parts_rel = rel + "-multipart"
        with loc.fs.open(loc.path(parts_rel), "wb", block_size=_MULTIPART_BLOCK) as handle:
            handle.write(b"\0" * (_MULTIPART_BLOCK + 1))  # two parts
        multi = _checksum_fields(_call(loc, parts_rel, "head_object", ChecksumMode="ENABLED"))
        evidence = {"single_request": single, "multipart": multi}
        if single["used_by_dsm"] and multi["used_by_dsm"]:
            return Finding(
                check="server-checksums",
                status="pass",
                detail=f"full-object {single['used_by_dsm']} on objects dsm writes in one request and "
                f"{multi['used_by_dsm']} on multipart uploads: verify --fast checks shards without reading",
                evidence=evidence,
            )
        if single["used_by_dsm"]:
            return Finding(
                check="server-checksums",
                status="warn",
                detail=f"full-object {single['used_by_dsm']} only on objects written in one request; "
                "multipart uploads (shards above the upload block size, 50 MiB by default) get no "
                f"full-object checksum (returned: {', '.join(multi['algorithms']) or 'none'}, type "
                f"{multi['type'] or 'not given'}), so verify --fast reads those shards",
                evidence=evidence,
            )
        return Finding(
            check="server-checksums",
            status="warn",
            detail="no full-object checksum on the objects dsm wrote: verify --fast reads every shard here",
            evidence=evidence,
        )

    def delete_protection(self, loc: Location, rel: str | None) -> Finding:
        check = "delete-protection"
        versioning = _ask(loc, rel or "", "get_bucket_versioning")
        if isinstance(versioning, _Refused):
            return _unknown(check, "GetBucketVersioning", versioning)
        lock = _ask(
            loc, rel or "", "get_object_lock_configuration", ("ObjectLockConfigurationNotFoundError",)
        )
        locked = (
            isinstance(lock, dict)
            and lock.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"
        )
        status = (versioning or {}).get("Status")
        evidence = {
            "versioning": status or "never enabled",
            "mfa_delete": (versioning or {}).get("MFADelete"),
            "object_lock": "Enabled" if locked else ("unknown" if isinstance(lock, _Refused) else "off"),
        }
        if status == "Enabled":
            return Finding(
                check=check,
                status="pass",
                detail="bucket versioning is on: deleted and overwritten objects are kept as older versions"
                + (" (object lock on)" if locked else ""),
                evidence=evidence,
            )
        if status == "Suspended":
            return Finding(
                check=check,
                status="warn",
                detail="bucket versioning is suspended: objects deleted or overwritten from now on are gone",
                evidence=evidence,
            )
        return Finding(
            check=check,
            status="warn",
            detail="bucket versioning is off: a deleted or overwritten object cannot be recovered",
            evidence=evidence,
        )

    def encryption(self, loc: Location, rel: str | None) -> Finding:
        check = "encryption"
        config = _ask(
            loc, rel or "", "get_bucket_encryption", ("ServerSideEncryptionConfigurationNotFoundError",)
        )
        rules = (
            (config or {}).get("ServerSideEncryptionConfiguration", {}).get("Rules", [])
            if isinstance(config, dict)
            else []
        )
        default = [r.get("ApplyServerSideEncryptionByDefault", {}).get("SSEAlgorithm") for r in rules]
        default = [a for a in default if a]
        on_object = _call(loc, rel, "head_object").get("ServerSideEncryption") if rel else None
        evidence = {
            "bucket_default": default or (None if not isinstance(config, _Refused) else "unknown"),
            "object": on_object,
        }
        if on_object:
            return Finding(
                check=check,
                status="pass",
                detail=f"dsm's object is stored encrypted ({on_object})"
                + (f"; bucket default {', '.join(default)}" if default else ""),
                evidence=evidence,
            )
        if default:
            return Finding(
                check=check,
                status="pass",
                detail=f"bucket default encryption {', '.join(default)}",
                evidence=evidence,
            )
        if isinstance(config, _Refused) and rel is None:
            return _unknown(check, "GetBucketEncryption", config)
        return Finding(
            check=check,
            status="fail" if rel else "warn",
            detail="no default encryption on the bucket"
            + (" and dsm's object came back without server-side encryption" if rel else ""),
            evidence=evidence,
        )

    def public_access(self, loc: Location) -> Finding:
        check = "public-access"
        block = _ask(loc, "", "get_public_access_block", ("NoSuchPublicAccessBlockConfiguration",))
        flags = (block or {}).get("PublicAccessBlockConfiguration", {}) if isinstance(block, dict) else {}
        blocked = bool(flags) and all(flags.get(f) for f in _BLOCK_FLAGS)
        evidence: dict[str, Any] = {
            "public_access_block": "unknown"
            if isinstance(block, _Refused)
            else {f: bool(flags.get(f, False)) for f in _BLOCK_FLAGS}
        }
        policy_public = self._policy_public(loc, evidence)
        acl = _ask(loc, "", "get_bucket_acl")
        grants: list[str] = []
        if isinstance(acl, dict):
            grants = sorted(
                {
                    str(g.get("Permission"))
                    for g in acl.get("Grants", [])
                    if g.get("Grantee", {}).get("URI") in _PUBLIC_GROUPS
                }
            )
            evidence["acl_public_grants"] = grants
        else:
            evidence["acl_public_grants"] = "unknown"
        # A public policy is neutralised by RestrictPublicBuckets, a public ACL by IgnorePublicAcls.
        reasons = []
        if policy_public and not flags.get("RestrictPublicBuckets"):
            reasons.append("its bucket policy allows everyone")
        if grants and not flags.get("IgnorePublicAcls"):
            reasons.append(f"its ACL grants {', '.join(grants)} to all users")
        if reasons:
            return Finding(
                check=check,
                status="fail",
                detail="the bucket is public: " + "; ".join(reasons),
                evidence=evidence,
            )
        if blocked:
            return Finding(
                check=check,
                status="pass",
                detail="public access is blocked (all four public access block settings are on)",
                evidence=evidence,
            )
        if isinstance(block, _Refused):
            return _unknown(check, "GetPublicAccessBlock", block)
        return Finding(
            check=check,
            status="warn",
            detail="nothing is public now, but public access is not blocked: a bucket policy or an ACL "
            "could make it public",
            evidence=evidence,
        )

    @staticmethod
    def _policy_public(loc: Location, evidence: dict[str, Any]) -> bool:
        status = _ask(loc, "", "get_bucket_policy_status", ("NoSuchBucketPolicy",))
        if isinstance(status, dict):
            public = bool(status.get("PolicyStatus", {}).get("IsPublic"))
            evidence["policy_public"] = public
            evidence["policy_judged_by"] = "store (GetBucketPolicyStatus)"
            return public
        if status is None:
            evidence["policy_public"] = False
            evidence["policy_judged_by"] = "store (no bucket policy)"
            return False
        # The store does not evaluate policies: judge the document (an Allow to "*" without conditions).
        document = _ask(loc, "", "get_bucket_policy", ("NoSuchBucketPolicy",))
        if isinstance(document, _Refused):
            evidence["policy_public"] = "unknown"
            return False
        statements = json.loads((document or {}).get("Policy", "{}") or "{}").get("Statement", [])
        public = any(
            _allows_everyone(s) for s in (statements if isinstance(statements, list) else [statements])
        )
        evidence["policy_public"] = public
        evidence["policy_judged_by"] = "dsm (the policy document: Allow to * without a condition)"
        return public

    def storage_class(self, info: Mapping[str, Any]) -> str | None:
        return str(info.get("StorageClass") or "STANDARD")  # S3 lists STANDARD, or nothing, for standard

    def purge(self, loc: Location, prefix: str) -> dict[str, Any]:
        key = _split(loc, prefix)[1]
        removed = 0
        try:
            listing = _call(loc, prefix, "list_object_versions", key=False, Prefix=key.rstrip("/") + "/")
        except _Refused as exc:  # no bucket, or not allowed to list versions: nothing dsm can remove
            return {"versions_removed": 0, "versions_left": [], "versions_unknown": exc.code or exc.status}
        doomed = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in [*listing.get("Versions", []), *listing.get("DeleteMarkers", [])]
            if v.get("VersionId") not in (None, "null")
        ]
        left = []
        for item in doomed:
            try:
                _call(loc, prefix, "delete_object", key=False, Key=item["Key"], VersionId=item["VersionId"])
                removed += 1
            except _Refused as exc:
                left.append({"key": item["Key"], "error": exc.code or exc.status})
        return {"versions_removed": removed, "versions_left": left}


def _allows_everyone(statement: Any) -> bool:
    if not isinstance(statement, dict) or statement.get("Effect") != "Allow" or statement.get("Condition"):
        return False
    principal = statement.get("Principal")
    if principal == "*":
        return True
    if isinstance(principal, dict):
        value = principal.get("AWS")
        return value == "*" or (isinstance(value, list) and "*" in value)
    return False
