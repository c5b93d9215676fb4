"""What S3 (and S3-compatible stores) say about a bucket, through the same client s3fs uses.

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

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsm.object_store import _S3_CHECKSUMS, S3Store, _run, _s3_error, s3_full_object_checksum
from dsm.readiness import Finding, StoreProbe
from dsm.storage import redact

if TYPE_CHECKING:
    from dsm.storage import Location

__all__ = ["S3Probe"]

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
        out = _run(fs, call)
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
