"""No secret leaves dsm: every byte it printed, logged and wrote during S3 and Azure runs is searched.

The credentials reach dsm the ways users give them: environment variables the SDKs read, a keyed
``DSM_STORAGE_OPTIONS``, ``--storage-option`` values, and a URL with a password in it. Every CLI run's
stdout and stderr, every log record of every logger at DEBUG, and every file the runs wrote to the
registries (local and on S3) are collected, and none may contain a secret value. On the ray engine, the
logs of every Ray process are searched too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from dsm.cli.app import app
from dsm.storage import public_url, redact

from .conftest import StorageRoot, write_parquet_shards
from .ray_support import RayCluster, ray_log_texts
from .servers import AZURITE_KEY, S3_KEY, S3_SECRET, AzuriteServer, MotoServer

runner = CliRunner()


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())
        if record.exc_info:
            self.texts.append(logging.Formatter().formatException(record.exc_info))


@pytest.fixture
def every_log_record() -> Iterator[Collect]:
    handler = Collect()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_redact_hides_every_credential_form() -> None:
    conn = f"DefaultEndpointsProtocol=http;AccountName=a;AccountKey={AZURITE_KEY};BlobEndpoint=http://h/a;"
    assert AZURITE_KEY not in redact(f"failed with {conn}")
    assert redact("s3://AKIA:topsecretvalue@bucket/x") == "s3://AKIA:***@bucket/x"
    sas = "https://a.blob.core.windows.net/c/b?sv=2024-01-01&se=2030&sp=r&sig=AbC%2Bdef123%3D"
    assert "AbC%2Bdef123" not in redact(sas) and "sig=***" in redact(sas)
    presigned = "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F2024&X-Amz-Signature=deadbeefcafe"
    assert "deadbeefcafe" not in redact(presigned)
    assert public_url("az://c/p?sv=1&sig=abc&versionid=3") == "az://c/p?versionid=3"
    assert public_url("s3://KEY:SECRET@bucket/p") == "s3://bucket/p"


def test_nothing_dsm_prints_logs_or_writes_holds_a_secret(
    moto_server: MotoServer,
    azurite_server: AzuriteServer,
    s3_storage: StorageRoot,
    azure_storage: StorageRoot,
    sample_table: pa.Table,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    every_log_record: Collect,
) -> None:
    secrets = [S3_KEY, S3_SECRET, AZURITE_KEY, azurite_server.connection_string]
    table = sample_table.slice(0, 300)
    write_parquet_shards(s3_storage, table, 2)
    write_parquet_shards(azure_storage, table, 2)
    local_registry = tmp_path / "registry"
    s3_registry = s3_storage.url.rsplit("/", 1)[0] + "/registry"  # beside the data, not under it
    outputs: list[str] = []

    def cli(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        outputs.extend([result.stdout, result.stderr])
        assert result.exit_code == code, (args[0], result.exit_code, redact(result.output))
        return result

    # 1. Credentials from the environment, endpoint from a keyed DSM_STORAGE_OPTIONS.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite_server.connection_string)
    monkeypatch.setenv("DSM_STORAGE_OPTIONS", json.dumps({"s3": {"endpoint_url": moto_server.endpoint_url}}))
    for name, root in (("on-s3", s3_storage), ("on-azure", azure_storage)):
        cli("register", root.url, "--name", name, "--registry", str(local_registry))
        cli("verify", name, "--registry", str(local_registry))
        cli("verify", name, "--fast", "--json", "--registry", str(local_registry))
        cli("verify", name, "--deep", "--registry", str(local_registry))
        cli("alias", name, "prod", "1", "--registry", str(local_registry))
        cli("show", f"{name}@prod", "--registry", str(local_registry))
    cli("ls", "--registry", str(local_registry), "--json")

    # 2. Secrets as --storage-option values (no environment), registry on S3.
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AZURE_STORAGE_CONNECTION_STRING"):
        monkeypatch.delenv(variable)
    monkeypatch.delenv("DSM_STORAGE_OPTIONS")
    s3_args = [f"s3:{k}={v}" for k, v in s3_storage.options.items()]
    az_args = [f"az:{k}={v}" for k, v in azure_storage.options.items()]
    options = [arg for value in [*s3_args, *az_args] for arg in ("--storage-option", value)]
    cli("register", azure_storage.url, "--name", "opts", "--registry", s3_registry, *options)
    cli("verify", "opts", "--json", "--registry", s3_registry, *options)
    cli("alias", "opts", "prod", "1", "--registry", s3_registry, *options)

    # 3. Failures whose messages could carry a secret: a wrong secret, a password in the URL.
    wrong = ["--storage-option", f"s3:endpoint_url={moto_server.endpoint_url}"]
    wrong += ["--storage-option", f"s3:key={S3_KEY}", "--storage-option", f"s3:secret={S3_SECRET}-wrong"]
    cli("ls", "--registry", s3_registry, *wrong, code=0)  # moto accepts any key: the run must still be clean
    with_password = s3_storage.url.replace("s3://", f"s3://{S3_KEY}:{S3_SECRET}@")
    endpoint = ["--storage-option", f"s3:endpoint_url={moto_server.endpoint_url}"]
    registered = cli("register", with_password, "--name", "pw", "--registry", str(local_registry), *endpoint)
    assert "registered pw@1" in registered.stdout  # the URL's credentials were used, and shown nowhere
    cli("verify", "pw", "--registry", str(local_registry), *wrong)
    cli("verify", "no-such-dataset", "--registry", str(local_registry), code=2)

    written = [p.read_bytes().decode("utf-8", "replace") for p in local_registry.rglob("*") if p.is_file()]
    client = moto_server.client()
    bucket, prefix = s3_registry.removeprefix("s3://").split("/", 1)
    for item in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
        body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        written.append(body.decode("utf-8", "replace"))
    assert len(written) >= 8  # versions and aliases of four datasets were written and are searched

    assert every_log_record.texts, "no log record was collected; the test would prove nothing"
    searched = {
        "output": (outputs, secrets),
        "files written": (written, secrets),
        # botocore's own DEBUG request log prints the access key ID (an identifier AWS signs requests with,
        # not a secret) in the Authorization header; the secret key, account key and connection string
        # must be in no log record of any library.
        "log records": (every_log_record.texts, [s for s in secrets if s != S3_KEY]),
    }
    for where, (texts, hidden) in searched.items():
        for text in texts:
            for secret in hidden:
                assert secret not in text, f"a secret appears in {where}: {redact(text)[:300]}"


def test_nothing_the_ray_engine_prints_logs_or_writes_holds_a_secret(
    moto_server: MotoServer,
    s3_storage: StorageRoot,
    ray_cluster: RayCluster,
    sample_table: pa.Table,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    every_log_record: Collect,
) -> None:
    """The same search over runs on the ray engine, and over every log the Ray cluster wrote: the
    credentials reach the workers (the jobs succeed on S3) through the workers' environment, and appear
    in no task argument, task name or Ray log."""
    secrets = [S3_KEY, S3_SECRET]
    write_parquet_shards(s3_storage, sample_table.slice(0, 600), 3)
    registry = tmp_path / "registry"
    base = s3_storage.url.rsplit("/", 1)[0]
    outputs: list[str] = []

    def cli(*args: str) -> Any:
        result = runner.invoke(app, [*args, "--engine", "ray"], catch_exceptions=False)
        outputs.extend([result.stdout, result.stderr])
        assert result.exit_code == 0, (args[0], result.exit_code, redact(result.output))
        return result

    # 1. Credentials in the driver's environment only (the workers started without them).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
    monkeypatch.setenv("DSM_STORAGE_OPTIONS", json.dumps({"s3": {"endpoint_url": moto_server.endpoint_url}}))
    cli("register", s3_storage.url, "--name", "env", "--registry", str(registry))
    cli("verify", "env", "--deep", "--registry", str(registry))
    cli("reshard", "env", f"{base}/env-out", "--num-shards", "2", "--shuffle", "--seed", "7",
        "--spill-dir", f"{base}/spill", "--registry", str(registry))  # fmt: skip
    # 2. Credentials as --storage-option values, no environment.
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DSM_STORAGE_OPTIONS"):
        monkeypatch.delenv(variable)
    options = [a for k, v in s3_storage.options.items() for a in ("--storage-option", f"s3:{k}={v}")]
    cli("register", s3_storage.url, "--name", "opts", "--registry", str(registry), *options)
    cli("verify", "opts", "--deep", "--json", "--registry", str(registry), *options)
    cli("convert-format", "opts", f"{base}/opts-out", "--format", "jsonl", "--registry", str(registry),
        *options)  # fmt: skip

    written = [p.read_bytes().decode("utf-8", "replace") for p in registry.rglob("*") if p.is_file()]
    client = moto_server.client()
    bucket = base.removeprefix("s3://")
    keys = [item["Key"] for item in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    for key in keys:
        if key.endswith((".json", ".jsonl")):
            written.append(client.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
    assert any(key.startswith("opts-out/") and key.endswith(".jsonl") for key in keys)  # outputs searched
    assert not [key for key in keys if "_dsm_rewrite" in key]  # published: no journal or claim is left
    ray_logs = ray_log_texts(ray_cluster.temp_dir)
    # Ray's event logs name every task: the logs of these jobs' tasks are among those searched (a secret in a
    # runtime_env would be in runtime_env_agent.log; one in a task name, in these).
    assert any("dsm.copy_units" in text for text in ray_logs)
    searched = {
        "output": (outputs, secrets),
        "files written": (written, secrets),
        "log records": (every_log_record.texts, [S3_SECRET]),  # botocore logs the key id at DEBUG
        "Ray's logs": (ray_logs, secrets),
    }
    for where, (texts, hidden) in searched.items():
        assert texts, where
        for text in texts:
            for secret in hidden:
                assert secret not in text, f"a secret appears in {where}: {redact(text)[:300]}"
