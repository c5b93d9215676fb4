"""Real object-store servers for the tests: a moto S3 server and Azurite (Azure Blob), on loopback.

Each server is started once per test session on a free port, waited for until it answers, and stopped at
the end. ``s3_storage`` and ``azure_storage`` give each test a fresh bucket / container as a
:class:`StorageRoot`, so every test written on the ``storage`` fixture runs on both.

A server that cannot start fails the tests that need it, loudly. A developer without Node.js can opt out
explicitly with ``DSM_TEST_SKIP_SERVERS=azure`` (or ``s3``, or ``all``): those tests are then skipped,
with that reason. CI (``CI`` set) refuses the opt-out.

Credentials: moto accepts any key pair; Azurite uses its published development account. The values are
distinctive strings so that ``tests/test_storage_secrets.py`` can search everything dsm printed, logged
and wrote for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StorageRoot

__all__ = [
    "AZURITE_ACCOUNT",
    "AZURITE_KEY",
    "S3_KEY",
    "S3_SECRET",
    "AzuriteServer",
    "MotoAuthServer",
    "MotoServer",
    "raw_delete",
    "raw_put",
    "raw_read",
]

ROOT = Path(__file__).resolve().parent.parent
S3_KEY = "AKIADSMTESTKEY7Q2W9E"
S3_SECRET = "dsm-test-s3-secret-Zq8w1XvB4nRk2Lp0"
AZURITE_ACCOUNT = "devstoreaccount1"
# The published key of Azurite's development account (not a secret anywhere, but treated as one here).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_START_TIMEOUT = 60.0


def _skip_requested(kind: str) -> bool:
    wanted = {p.strip().lower() for p in os.environ.get("DSM_TEST_SKIP_SERVERS", "").split(",") if p.strip()}
    if not wanted or not ({kind, "all"} & wanted):
        return False
    if os.environ.get("CI"):
        pytest.fail(f"DSM_TEST_SKIP_SERVERS={os.environ['DSM_TEST_SKIP_SERVERS']} is not allowed in CI")
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    """Poll ``url`` until it answers with any HTTP status; fail with the server's log if it never does."""
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # an HTTP error status is an answer
        except OSError:
            time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    proc.kill()
    pytest.fail(f"{what} did not start (exit code {proc.poll()}); its log ends with:\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _json_records(text: str) -> list[dict[str, Any]]:
    """The JSON objects of moto's recording, one a line, or several on one: the server's request threads
    append to it unlocked, and two records written at once have shared a line."""
    decoder, records = json.JSONDecoder(), []
    for line in text.splitlines():
        at = 0
        while line[at:].strip():
            at += len(line[at:]) - len(line[at:].lstrip())
            record, end = decoder.raw_decode(line, at)
            records.append(record)
            at = end
    return records


@dataclass(frozen=True)
class MotoServer:
    endpoint_url: str

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET,
            region_name="us-east-1",
        )

    def options(self) -> dict[str, Any]:
        """The storage options that reach this server (what a user passes with --storage-option)."""
        return {"endpoint_url": self.endpoint_url, "key": S3_KEY, "secret": S3_SECRET}

    @contextlib.contextmanager
    def get_bytes(self, prefix: str = "") -> Iterator[dict[str, int]]:
        """Count, by ``bucket/key``, the object bytes the server was asked for by GET requests inside the
        block, for the keys that start with ``prefix`` (its request recorder: each GET's Range, or the
        whole object without one). The dict is filled when the block ends."""
        counts: dict[str, int] = {}
        api = f"{self.endpoint_url}/moto-api/recorder"
        urllib.request.urlopen(urllib.request.Request(f"{api}/reset-recording", method="POST")).close()
        urllib.request.urlopen(urllib.request.Request(f"{api}/start-recording", method="POST")).close()
        try:
            yield counts
        finally:
            urllib.request.urlopen(urllib.request.Request(f"{api}/stop-recording", method="POST")).close()
        with urllib.request.urlopen(f"{api}/download-recording") as answer:
            entries = _json_records(answer.read().decode())
        client = self.client()
        for entry in entries:
            url = urllib.parse.urlsplit(entry["url"])
            bucket, _, key = urllib.parse.unquote(url.path).lstrip("/").partition("/")
            if entry["method"] != "GET" or not key or url.query or not f"{bucket}/{key}".startswith(prefix):
                continue  # listings and other bucket requests carry no object bytes
            size = int(client.head_object(Bucket=bucket, Key=key)["ContentLength"])
            wanted = {k.lower(): v for k, v in entry["headers"].items()}.get("range")
            if wanted is None:
                n = size
            else:
                first, _, last = wanted.removeprefix("bytes=").partition("-")
                n = min(size - 1, int(last) if last else size - 1) - int(first) + 1
            counts[f"{bucket}/{key}"] = counts.get(f"{bucket}/{key}", 0) + max(0, n)


@dataclass(frozen=True)
class AzuriteServer:
    blob_endpoint: str

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.blob_endpoint};"
        )

    def service(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def options(self) -> dict[str, Any]:
        return {"connection_string": self.connection_string}


@dataclass(frozen=True)
class MotoAuthServer:
    """A moto S3 server that checks credentials and IAM policies as AWS does: ``reader`` may do anything
    in S3, ``lister`` only list buckets (reading an object is denied); other keys are refused."""

    endpoint_url: str
    reader: tuple[str, str]
    lister: tuple[str, str]
    bucket: str

    def options(self, who: tuple[str, str] | None = None) -> dict[str, Any]:
        key, secret = who or self.reader
        return {"endpoint_url": self.endpoint_url, "key": key, "secret": secret}


def _start_moto(tmp_path_factory: pytest.TempPathFactory, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    if _skip_requested("s3"):
        pytest.skip("S3 tests skipped on request (DSM_TEST_SKIP_SERVERS)")
    try:
        import moto.server  # noqa: F401
    except ImportError:
        pytest.fail("moto[server] is not installed; run `make install` (it is in the test extra)")
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    # The request recorder (MotoServer.get_bytes) writes beside the log, never into the working tree.
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "MOTO_ALLOW_NONEXISTENT_REGION": "true",
                "MOTO_RECORDER_FILEPATH": str(log.parent / "recording.jsonl"),
                **env,
            },
        )
    url = f"http://127.0.0.1:{port}"
    _wait_http(f"{url}/moto-api/", proc, log, "the moto S3 server")
    return proc, url


# The IAM calls made before moto starts checking credentials (moto's INITIAL_NO_AUTH_ACTION_COUNT).
_AUTH_SETUP_ACTIONS = 6


@pytest.fixture(scope="session")
def moto_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoAuthServer]:
    """A second moto server, with authentication and IAM authorization on, and one bucket with data."""
    import json

    import boto3

    proc, url = _start_moto(tmp_path_factory, INITIAL_NO_AUTH_ACTION_COUNT=str(_AUTH_SETUP_ACTIONS))
    try:
        iam = boto3.client(
            "iam", endpoint_url=url, aws_access_key_id="setup", aws_secret_access_key="setup-secret",
            region_name="us-east-1",
        )  # fmt: skip
        keys = {}
        for user in ("reader", "lister"):  # 4 actions
            iam.create_user(UserName=user)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
        # s3:List* (every listing, no read): AWS checks a ListObjectsV2 call as s3:ListBucket, moto 5.2.6
        # as s3:ListObjectsV2 (the operation's own name), and a listing must pass on both.
        for user, actions in (("reader", ["s3:*"]), ("lister", ["s3:List*", "s3:GetBucketLocation"])):
            policy = {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
            }
            iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))  # 2 more
        server = MotoAuthServer(
            endpoint_url=url, reader=keys["reader"], lister=keys["lister"], bucket=_fresh_name()
        )
        reader = boto3.client(
            "s3",
            endpoint_url=url,
            aws_access_key_id=keys["reader"][0],
            aws_secret_access_key=keys["reader"][1],
            region_name="us-east-1",
        )
        reader.create_bucket(Bucket=server.bucket)
        yield server
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """A moto S3 server in its own process on a free loopback port."""
    proc, url = _start_moto(tmp_path_factory)
    try:
        yield MotoServer(endpoint_url=url)
    finally:
        _stop(proc)


def _azurite_binary() -> Path | None:
    local = ROOT / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return local
    found = shutil.which("azurite-blob")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteServer]:
    """Azurite's blob service in its own process on a free loopback port, data in a temporary folder."""
    if _skip_requested("azure"):
        pytest.skip("Azure tests skipped on request (DSM_TEST_SKIP_SERVERS)")
    binary = _azurite_binary()
    if binary is None:
        pytest.fail(
            "Azurite is not installed: run `make install` (npm installs it into node_modules), "
            "or set DSM_TEST_SKIP_SERVERS=azure to skip the Azure tests on a developer machine"
        )
    port = _free_port()
    workdir = tmp_path_factory.mktemp("azurite")
    log = workdir / "azurite.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(binary),
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                str(port),
                "--location",
                str(workdir / "data"),
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
    _wait_http(f"{endpoint}?comp=list", proc, log, "Azurite")
    try:
        yield AzuriteServer(blob_endpoint=endpoint)
    finally:
        _stop(proc)


def _fresh_name() -> str:
    return f"dsm-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def s3_storage(moto_server: MotoServer) -> StorageRoot:
    """A fresh S3 bucket on the moto server; the root is a prefix in it."""
    bucket = _fresh_name()
    moto_server.client().create_bucket(Bucket=bucket)
    return StorageRoot(kind="s3", url=f"s3://{bucket}/root", options=moto_server.options())


@pytest.fixture
def azure_storage(azurite_server: AzuriteServer) -> StorageRoot:
    """A fresh Azure Blob container on Azurite; the root is a prefix in it."""
    container = _fresh_name()
    azurite_server.service().create_container(container)
    return StorageRoot(kind="azure", url=f"az://{container}/root", options=azurite_server.options())


# --- the stores' own APIs, to change data behind dsm's back ------------------------------------------------


def _split(root: StorageRoot, rel: str) -> tuple[str, str]:
    """(bucket or container, key) of ``rel`` under an s3:// or az:// root."""
    bucket, _, prefix = root.url.split("://", 1)[1].partition("/")
    return bucket, "/".join(p for p in (prefix.strip("/"), rel) if p)


def _clients(root: StorageRoot) -> Any:
    if root.kind == "s3":
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=root.options["endpoint_url"],
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET,
            region_name="us-east-1",
        )
    from azure.storage.blob import BlobServiceClient

    return BlobServiceClient.from_connection_string(root.options["connection_string"])


def raw_put(root: StorageRoot, rel: str, data: bytes) -> None:
    """Write ``rel`` under ``root`` with the store's own API (boto3, azure-storage-blob, the OS)."""
    if root.kind in ("s3", "azure"):
        bucket, key = _split(root, rel)
        if root.kind == "s3":
            _clients(root).put_object(Bucket=bucket, Key=key, Body=data)
        else:
            _clients(root).get_blob_client(bucket, key).upload_blob(data, overwrite=True)
        return
    if root.kind == "local":
        path = Path(root.url) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return
    root.fs().pipe_file(root.join(rel), data)


def raw_delete(root: StorageRoot, rel: str) -> None:
    """Delete ``rel`` under ``root`` with the store's own API."""
    if root.kind in ("s3", "azure"):
        bucket, key = _split(root, rel)
        if root.kind == "s3":
            _clients(root).delete_object(Bucket=bucket, Key=key)
        else:
            _clients(root).get_blob_client(bucket, key).delete_blob()
        return
    if root.kind == "local":
        (Path(root.url) / rel).unlink()
        return
    root.fs().rm(root.join(rel))


def raw_read(root: StorageRoot, rel: str) -> bytes:
    """The bytes of ``rel`` under ``root``, read with the store's own API."""
    if root.kind in ("s3", "azure"):
        bucket, key = _split(root, rel)
        if root.kind == "s3":
            return bytes(_clients(root).get_object(Bucket=bucket, Key=key)["Body"].read())
        return bytes(_clients(root).get_blob_client(bucket, key).download_blob().readall())
    if root.kind == "local":
        return (Path(root.url) / rel).read_bytes()
    return bytes(root.fs().cat_file(root.join(rel)))
