"""``dsm storage check``: what each real store answers, required checks, bounds, and the scratch clean-up."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import dsm.commands.storage_check as storage_check_command
from dsm.cli.app import app
from dsm.commands.storage_check import CHECKS, ReadinessReport, resolve_checks, storage_check
from dsm.errors import InputError
from dsm.storage.local import LocalProbe
from dsm.storage.s3 import _allows_everyone
from tests.conftest import StorageRoot
from tests.readiness_support import allow_public_reads, block_public_access, bucket_of, encrypt_bucket
from tests.servers import AzuriteServer, MotoServer

runner = CliRunner()
SMALL: dict[str, Any] = {"objects": 4, "object_size": "64KiB", "workers": 2}
"""A small throughput probe (tests judge answers, never speed)."""

EVERYWHERE = {name: "pass" for name in CHECKS}
# What each store answers for a fresh folder, bucket or container (the servers' real answers).
ANSWERS = {
    "local": {
        **EVERYWHERE,
        "server-checksums": "warn",  # a file system keeps no checksum of a file
        "delete-protection": "unknown",  # snapshots, if any, are invisible to dsm
        "encryption": ("pass", "unknown"),  # pass only on a dm-crypt device
        "public-access": "pass",  # pytest's tmp_path is closed to other users
    },
    "memory": {
        **EVERYWHERE,
        "server-checksums": "warn",
        "delete-protection": "warn",
        "encryption": "unknown",
    },
    "s3": {
        **EVERYWHERE,
        "server-checksums": "warn",  # crc32 on single PUTs, none on multipart uploads
        "delete-protection": "warn",  # versioning off
        "encryption": "fail",  # no default encryption: moto stores dsm's object unencrypted
        "public-access": "warn",  # nothing public, nothing blocked
    },
    "azure": {**EVERYWHERE, "delete-protection": "warn"},  # md5, encrypted, private container
}


def stored_objects(root: StorageRoot) -> list[str]:
    """Everything under ``root``, asked from the store's own API (S3: every version and delete marker)."""
    if root.kind == "s3":
        import boto3

        from tests.servers import S3_KEY, S3_SECRET

        bucket, _, prefix = root.url.removeprefix("s3://").partition("/")
        client = boto3.client(
            "s3",
            endpoint_url=root.options["endpoint_url"],
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET,
            region_name="us-east-1",
        )
        listing = client.list_object_versions(Bucket=bucket, Prefix=prefix)
        return [v["Key"] for v in listing.get("Versions", []) + listing.get("DeleteMarkers", [])]
    if root.kind == "azure":
        from azure.storage.blob import BlobServiceClient

        container, _, prefix = root.url.removeprefix("az://").partition("/")
        service = BlobServiceClient.from_connection_string(root.options["connection_string"])
        return [b.name for b in service.get_container_client(container).list_blobs(name_starts_with=prefix)]
    if root.kind == "local":
        return [str(p) for p in Path(root.url).rglob("*")] if Path(root.url).exists() else []
    fs = root.fs()
    return list(fs.find(root.url)) if fs.exists(root.url) else []


def _statuses(report: ReadinessReport) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def _assert_answers(report: ReadinessReport, expected: dict[str, Any]) -> None:
    found = _statuses(report)
    assert set(found) == set(expected)
    for name, want in expected.items():
        allowed = want if isinstance(want, tuple) else (want,)
        assert found[name] in allowed, f"{name}: {found[name]} ({report.check(name).detail})"


def test_what_each_store_answers(storage: StorageRoot) -> None:
    report = storage_check(storage.url, storage_options=storage.options, **SMALL)
    _assert_answers(report, ANSWERS[storage.kind])
    assert report.ok and report.failed == []
    assert {c.name for c in report.checks if c.required} == {
        "write",
        "read",
        "list",
        "delete",
        "read-after-write",
        "list-after-write",
    }
    assert report.scratch.clean and report.scratch.objects_written >= 4 + 4 + 2
    assert stored_objects(storage) == []  # nothing left behind, not even the folder
    figures = report.throughput
    assert figures is not None and figures.objects == 4 and figures.object_size == 65536
    assert figures.put_bytes_per_s > 0 and figures.get_bytes_per_s > 0
    assert figures.first_byte_s["p50"] > 0 and figures.get_latency_s["p99"] >= figures.get_latency_s["p50"]
    if storage.kind == "s3":
        evidence = report.check("server-checksums").evidence
        assert (
            evidence["single_request"]["used_by_dsm"] == "crc32"
            and evidence["multipart"]["used_by_dsm"] is None
        )
        assert report.check("compare-and-swap").evidence["if_match_stale"] == "PreconditionFailed"
    if storage.kind == "azure":
        evidence = report.check("server-checksums").evidence
        assert evidence["content_md5"] == evidence["md5_of_bytes"]


def test_s3_bucket_with_versioning_encryption_and_public_access_blocked(
    s3_storage: StorageRoot, moto_server: MotoServer
) -> None:
    client = moto_server.client()
    bucket = bucket_of(s3_storage.url)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    encrypt_bucket(client, bucket)
    block_public_access(client, bucket)
    report = storage_check(
        s3_storage.url, storage_options=s3_storage.options, require=["all"], min_throughput="1KB/s", **SMALL
    )
    found = _statuses(report)
    assert (
        found["delete-protection"] == "pass"
        and "versioning is on" in report.check("delete-protection").detail
    )
    assert found["encryption"] == "pass" and report.check("encryption").evidence["object"] == "AES256"
    assert found["public-access"] == "pass"
    assert not report.ok and report.failed == [report.check("server-checksums")]  # required by "all"
    # Versioning keeps every deleted scratch object as an old version: the check removes those too.
    assert report.scratch.notes["versions_removed"] > 0 and report.scratch.clean
    assert stored_objects(s3_storage) == []


def test_s3_public_read_policy_and_acl_fail_public_access(
    s3_storage: StorageRoot, moto_server: MotoServer
) -> None:
    client = moto_server.client()
    bucket = bucket_of(s3_storage.url)
    allow_public_reads(client, bucket)
    public = storage_check(s3_storage.url, storage_options=s3_storage.options, checks=["public-access"])
    check = public.check("public-access")
    assert check.status == "fail" and "bucket policy allows everyone" in check.detail
    assert check.evidence["policy_judged_by"].startswith("store")
    client.delete_bucket_policy(Bucket=bucket)
    client.put_bucket_acl(Bucket=bucket, ACL="public-read")
    acl = storage_check(s3_storage.url, storage_options=s3_storage.options, checks=["public-access"])
    assert (
        acl.check("public-access").status == "fail" and "ACL grants READ" in acl.check("public-access").detail
    )
    assert [c.name for c in acl.checks] == ["public-access"]  # only what was asked (nothing written)
    assert stored_objects(s3_storage) == []


def test_azure_public_container_and_soft_delete(azurite_server: AzuriteServer) -> None:
    from azure.storage.blob import RetentionPolicy

    service = azurite_server.service()
    name = "dsm-public-" + os.urandom(4).hex()
    service.create_container(name, public_access="blob")
    url = f"az://{name}/data"
    report = storage_check(url, storage_options=azurite_server.options(), checks=["security", "durability"])
    assert (
        report.check("public-access").status == "fail"
        and "anyone can read" in report.check("public-access").detail
    )
    assert report.check("encryption").status == "pass"
    service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=7))
    try:
        protected = storage_check(url, storage_options=azurite_server.options(), checks=["durability"])
    finally:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=False))
    check = protected.check("delete-protection")
    assert check.status == "pass" and "7 days" in check.detail
    assert "soft delete" in protected.scratch.notes["soft_deleted"]
    assert list(service.get_container_client(name).list_blobs()) == []


def test_local_folder_open_to_other_users(tmp_path: Path) -> None:
    outer = tempfile.mkdtemp(prefix="dsm-readiness-")  # a chain of folders others may enter
    try:
        os.chmod(outer, 0o755)
        warned = storage_check(outer, checks=["public-access"]).check("public-access")
        assert warned.status == "warn" and "listed by every user" in warned.detail
        os.chmod(outer, 0o777)
        failed = storage_check(outer, checks=["public-access"]).check("public-access")
        assert failed.status == "fail" and "writable by every user" in failed.detail
        os.chmod(outer, 0o700)
        closed = storage_check(outer, checks=["public-access"]).check("public-access")
        assert closed.status == "pass" and closed.evidence["closed_by"]["mode"] == "700"
    finally:
        os.chmod(outer, 0o700)
        os.rmdir(outer)


@pytest.mark.parametrize("kind", ["local", "memory", "s3", "azure"])
def test_scratch_is_removed_when_a_required_check_fails(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    root = StorageRoot(kind="local", url=str(tmp_path / "new")) if kind == "local" else None
    if root is None:
        root = (
            request.getfixturevalue(f"{kind}_storage")
            if kind != "memory"
            else StorageRoot(kind="memory", url=f"memory://dsm-fail-{os.urandom(4).hex()}")
        )
    report = storage_check(
        root.url, storage_options=root.options, require=["throughput"], min_throughput="1TB/s", **SMALL
    )
    assert not report.ok and [c.name for c in report.failed] == ["throughput"]
    assert (
        report.check("throughput").status == "fail"
        and "below the minimum" in report.check("throughput").detail
    )
    assert report.scratch.clean and stored_objects(root) == []
    if kind == "local":
        assert not Path(root.url).exists()  # the folder the check created is gone too


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_scratch_is_removed_when_the_run_is_interrupted(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "store") if kind == "local" else f"memory://dsm-int-{os.urandom(4).hex()}"

    def interrupted(*_: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(storage_check_command, "check_consistency", interrupted)
    with pytest.raises(KeyboardInterrupt):
        storage_check(url, **SMALL)
    root = StorageRoot(kind=kind, url=url)
    assert stored_objects(root) == []


def test_required_checks_and_names() -> None:
    url = f"memory://dsm-req-{os.urandom(4).hex()}"
    report = storage_check(url, require=["encryption", "atomicity"], **SMALL)
    assert not report.ok and [c.name for c in report.failed] == ["encryption"]  # unknown is not a pass
    assert report.check("conditional-create").required and report.check("conditional-create").satisfied
    assert resolve_checks(["permissions,atomicity"]) == (
        "write",
        "read",
        "list",
        "delete",
        "conditional-create",
        "compare-and-swap",
    )
    with pytest.raises(InputError, match="not a readiness check; checks: write"):
        resolve_checks(["speed"])


def test_probe_bounds_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    target = tmp_path / "never"
    for bad in (
        {"objects": 0},
        {"objects": 1001},
        {"object_size": "2GiB"},
        {"objects": 1000, "object_size": "8MiB"},
        {"workers": 0},
        {"object_size": "big"},
        {"min_throughput": "fast"},
    ):
        with pytest.raises(InputError):
            storage_check(str(target), **bad)  # type: ignore[arg-type]
    assert not target.exists()
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        storage_check(str(tmp_path / "file.txt"))


def test_policy_statements_that_make_a_bucket_public() -> None:
    assert _allows_everyone({"Effect": "Allow", "Principal": "*"})
    assert _allows_everyone({"Effect": "Allow", "Principal": {"AWS": ["arn:x", "*"]}})
    assert not _allows_everyone({"Effect": "Deny", "Principal": "*"})
    assert not _allows_everyone({"Effect": "Allow", "Principal": "*", "Condition": {"IpAddress": {}}})
    assert not _allows_everyone({"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::1:root"}})


def test_local_encryption_answer_names_its_evidence(tmp_path: Path) -> None:
    from dsm.storage import location

    finding = LocalProbe().encryption(location(str(tmp_path)), None)
    assert finding.status in ("pass", "unknown")
    assert ("dm" in finding.evidence) == (finding.status == "pass")


def test_cli_renders_and_exits(tmp_path: Path) -> None:
    url = str(tmp_path / "dest")
    out = runner.invoke(app, ["storage", "check", url, "--objects", "2", "--object-size", "4KiB", "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert body["ok"] is True and body["scratch"]["clean"] is True
    assert [c["name"] for c in body["checks"]] == list(CHECKS)
    table = runner.invoke(
        app, ["storage", "check", url, "--objects", "2", "--object-size", "4KiB"], terminal_width=200
    )
    assert table.exit_code == 0 and "compare-and-swap" in table.stdout and "PUT" in table.stdout
    failing = runner.invoke(
        app, ["storage", "check", "memory://dsm-cli", "--require", "encryption", "--objects", "1"]
    )
    assert failing.exit_code == 1
    bad = runner.invoke(app, ["storage", "check", url, "--require", "speed"])
    assert bad.exit_code == 2 and "not a readiness check" in bad.stderr


def test_cli_options_reach_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(url: str, **kwargs: Any) -> ReadinessReport:
        seen.update(url=url, **kwargs)
        return storage_check("memory://dsm-fake", checks=["public-access"])

    monkeypatch.setattr(storage_check_command, "storage_check", fake)
    out = runner.invoke(
        app,
        [
            "storage",
            "check",
            "s3://b/p",
            "--require",
            "atomicity",
            "--require",
            "security",
            "--check",
            "permissions",
            "--objects",
            "3",
            "--object-size",
            "1MB",
            "--workers",
            "5",
            "--min-throughput",
            "10MB/s",
            "--storage-option",
            "anon=true",
        ],
    )
    assert out.exit_code == 0, out.output
    assert seen == {
        "url": "s3://b/p",
        "require": ["atomicity", "security"],
        "checks": ["permissions"],
        "objects": 3,
        "object_size": "1MB",
        "workers": 5,
        "min_throughput": "10MB/s",
        "storage_options": {"anon": True},
    }


def test_a_missing_bucket_or_container_fails_the_write_and_leaves_nothing(
    moto_server: MotoServer, azurite_server: AzuriteServer
) -> None:
    for url, options in (
        ("s3://dsm-no-such-bucket/data", moto_server.options()),
        ("az://dsm-no-such-container/data", azurite_server.options()),
    ):
        report = storage_check(url, storage_options=options, **SMALL)
        assert not report.ok and report.check("write").status == "fail"
        assert report.check("write").detail.startswith("DatasetNotFound: ")  # not a client library's error
        assert report.check("read").detail == "not tested: the write failed"
        assert report.scratch.clean
    assert (
        "the bucket does not exist"
        in storage_check(
            "s3://dsm-no-such-bucket/data", storage_options=moto_server.options(), checks=["public-access"]
        )
        .check("public-access")
        .detail
    )
