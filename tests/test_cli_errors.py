"""Every failure reaches the person as one line with the design's exit code, and never as a traceback.

Each class of failure is driven through the CLI on real parts: local disk (a full file system and a
read-only one are real mounts in a private mount namespace, ``unshare``; a file the user may not read is
read without root's override, in a user namespace), the moto S3 server (a closed port, refused and missing
credentials, a user IAM denies, an unknown option) and Azurite (a wrong account key, a bad SAS). Each test
checks the exit code, the one line on stderr naming what is at fault, the absence of a traceback, and the
JSON error document on stdout under ``--json``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from dsm.cli import INTERNAL_ERROR
from dsm.cli.app import app
from tests.conftest import StorageRoot, write_parquet_shards
from tests.servers import AzuriteServer, MotoAuthServer, MotoServer

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str


def cli(args: Sequence[str], env: dict[str, str] | None = None) -> Ran:
    """``dsm ARGS`` in this process (typer's runner), stdout and stderr apart."""
    result = runner.invoke(app, list(args), env=env)
    return Ran(result.exit_code, result.stdout, result.stderr)


def dsm_process(args: Sequence[str], *, wrap: Sequence[str] = (), env: dict[str, str] | None = None) -> Ran:
    """``dsm ARGS`` as its own process (``python -m dsm``), optionally under ``wrap`` (``unshare ...``)."""
    proc = subprocess.run(
        [*wrap, sys.executable, "-m", "dsm", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        timeout=240,
        check=False,
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line(ran: Ran, code: int, *names: str) -> str:
    """The exit code, one line on stderr (``error: ...``) naming ``names``, and no traceback anywhere."""
    assert ran.exit_code == code, (ran.exit_code, ran.stdout[-2000:], ran.stderr[-2000:])
    assert "Traceback" not in ran.stderr + ran.stdout
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def assert_error(
    args: Sequence[str], code: int, kind: str, *names: str, run: Any = cli, **about: Any
) -> dict[str, Any]:
    """Run ``args`` plainly and with ``--json``: the one line each time; the JSON error document."""
    line = assert_one_line(run(list(args)), code, *names)
    assert line.startswith("error: ")
    ran = run([*args, "--json"])
    assert_one_line(ran, code, *names)
    doc = json.loads(ran.stdout)
    assert set(doc) == {"error"}
    error = doc["error"]
    assert error["exit_code"] == code and error["type"] == kind, error
    for name in names:
        assert name in error["message"]
    for key, value in about.items():
        assert error.get(key) == value, (key, error)
    return dict(error)


@pytest.fixture
def dataset(tmp_path: Path, sample_table: pa.Table) -> tuple[Path, str]:
    """Two local Parquet shards registered as ``web``: (data folder, registry)."""
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table.slice(0, 600), 2)
    registry = str(tmp_path / "registry")
    assert cli(["register", str(data), "--name", "web", "--registry", registry]).exit_code == 0
    return data, registry


# ------------------------------------------------------------------------------------------- local disk


def _namespaces(*flags: str) -> list[str]:
    """``unshare`` with ``flags`` if this machine lets this user make namespaces, else skip the test."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"this machine does not allow unshare {' '.join(flags)}: {probe.stderr.decode()[-200:]}")
    return ["unshare", *flags]


def _in_mount(mount: str, target: Path, args: Sequence[str], after: str = "") -> Ran:
    """``dsm ARGS`` in a private mount namespace where ``mount`` (shell words, ``$1`` the target) is done
    first; ``after`` runs there once dsm exits (its output follows dsm's on stdout)."""
    script = f'{mount} || exit 99; "$@"; rc=$?; {after} exit $rc'
    wrap = [*_namespaces("--user", "--map-root-user", "--mount"), "sh", "-c", script, "sh"]
    proc = subprocess.run(
        [*wrap, sys.executable, "-m", "dsm", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DSM_TARGET": str(target)},
        cwd=ROOT,
        timeout=240,
        check=False,
    )
    assert proc.returncode != 99, proc.stderr
    return Ran(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("command", ["convert-format", "reshard"])
def test_out_of_space_during_a_rewrite_is_exit_3_and_leaves_no_partial_file(
    tmp_path: Path, dataset: tuple[Path, str], command: str
) -> None:
    _, registry = dataset
    full = tmp_path / "full"
    full.mkdir()
    dest = full / "out"
    extra = ["--format", "jsonl"] if command == "convert-format" else ["--num-shards", "2", "--format", "csv"]
    args = [command, "web", str(dest), *extra, "--registry", registry, "--json"]
    mount = 'mount -t tmpfs -o size=96k tmpfs "$DSM_TARGET"'
    ran = _in_mount(mount, full, args, after='echo "@@ left: $(ls -A "$DSM_TARGET/out" | tr "\\n" " ")";')
    json_text, _, left = ran.stdout.partition("@@ left:")
    assert_one_line(Ran(ran.exit_code, "", ran.stderr), 3, "no space left", str(dest))
    error = json.loads(json_text)["error"]
    assert error["type"] == "StorageError" and error["exit_code"] == 3
    # Only the rewrite's journal (which a rerun resumes from) is there: no data file, no temporary one.
    assert [name for name in left.split() if not name.startswith("_dsm_rewrite")] == [], left


def test_a_read_only_registry_is_exit_3_naming_the_file(dataset: tuple[Path, str]) -> None:
    _, registry = dataset
    mount = 'mount --bind "$DSM_TARGET" "$DSM_TARGET" && mount -o remount,bind,ro "$DSM_TARGET"'
    for args in (["alias", "web", "prod", "1"], ["register", str(dataset[0]), "--name", "again"]):
        ran = _in_mount(mount, Path(registry), [*args, "--registry", registry, "--json"])
        assert_one_line(ran, 3, "read-only", registry)
        assert json.loads(ran.stdout)["error"]["type"] == "StorageError"


def test_permission_denied_is_exit_3_at_verify_convert_and_reshard(
    tmp_path: Path, dataset: tuple[Path, str]
) -> None:
    """Not ``unreadable`` (exit 1, the data failed a check): the data may be fine, the access is not."""
    data, registry = dataset
    shard = data / "part-00001.parquet"
    # In a user namespace without a mapping even root is no one special: the file's mode holds.
    wrap = _namespaces("--user") if os.geteuid() == 0 else []
    shard.chmod(0)
    try:
        for args in (
            ["verify", "web"],
            ["verify", "web", "--deep"],
            ["convert-format", "web", str(tmp_path / "as-jsonl"), "--format", "jsonl"],
            ["reshard", "web", str(tmp_path / "two"), "--num-shards", "1"],
        ):
            # One run each (a process each): under --json the line on stderr is the same as without it.
            ran = dsm_process([*args, "--registry", registry, "--json"], wrap=wrap)
            assert_one_line(ran, 3, "permission denied", str(shard))
            error = json.loads(ran.stdout)["error"]
            assert error["type"] == "StorageError" and error["shard"] == "part-00001.parquet", error
    finally:
        shard.chmod(0o644)


def test_a_registry_file_that_is_not_utf8_is_named_and_the_other_datasets_still_list(
    dataset: tuple[Path, str], tmp_path: Path, sample_table: pa.Table
) -> None:
    _data, registry = dataset
    write_parquet_shards(tmp_path / "other", sample_table.slice(0, 10), 1)
    assert (
        cli(["register", str(tmp_path / "other"), "--name", "other", "--registry", registry]).exit_code == 0
    )
    broken = Path(registry) / "web" / "versions" / "1.yaml"
    broken.write_bytes(broken.read_bytes().replace(b"name: web", b"name: w\xffb", 1))
    listed = cli(["ls", "--registry", registry])
    line = assert_one_line(listed, 2, "dataset web", str(broken), "not UTF-8")
    assert "other" in listed.stdout and "web" not in listed.stdout.replace(line, "")
    as_json = cli(["ls", "--registry", registry, "--json"])
    entries = {e["name"]: e for e in json.loads(as_json.stdout)}
    assert (
        as_json.exit_code == 2 and entries["other"]["rows"] == 10 and "not UTF-8" in entries["web"]["problem"]
    )
    assert_error(
        ["show", "web", "--registry", registry], 2, "ContractError", str(broken), path=str(broken), line=2
    )


def test_an_unknown_local_storage_option_names_the_closest(dataset: tuple[Path, str]) -> None:
    _, registry = dataset
    assert_error(
        ["ls", "--registry", registry, "--storage-option", "file:auto_mkdr=true"],
        2,
        "InputError",
        "'auto_mkdr'",
        "'auto_mkdir'",
    )


def test_a_bug_is_an_internal_error_exit_70_with_its_traceback_only_under_debug(
    dataset: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import dsm.commands.catalog as catalog

    def broken(**_: Any) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(catalog, "ls", broken)
    _, registry = dataset
    error = assert_error(
        ["ls", "--registry", registry], INTERNAL_ERROR, "InternalError", "`dsm ls`", "bug in dsm"
    )
    assert error["exception"] == "KeyError" and INTERNAL_ERROR != 1
    debug = cli(["--debug", "ls", "--registry", registry])
    assert debug.exit_code == INTERNAL_ERROR and "Traceback" in debug.stderr and "KeyError" in debug.stderr


def test_usage_errors_are_exit_2_and_a_json_document_under_json(dataset: tuple[Path, str]) -> None:
    _, registry = dataset
    plain = cli(["ls", "--registry", registry, "--jsno"])
    assert plain.exit_code == 2 and "Traceback" not in plain.stderr and "--jsno" in plain.stderr
    ran = cli(["ls", "--registry", registry, "--jsno", "--json"])
    error = json.loads(ran.stdout)["error"]
    assert ran.exit_code == 2 and error["type"] == "UsageError" and "--jsno" in error["message"]


def test_ctrl_c_during_a_rewrite_says_how_to_resume_and_the_rerun_finishes(
    tmp_path: Path, dataset: tuple[Path, str]
) -> None:
    _, registry = dataset
    args = ["reshard", "web", str(tmp_path / "out"), "--num-shards", "2", "--workers", "1"]
    ran = dsm_process(
        [*args, "--registry", registry], env={"DSM_TEST_KILL_AT": "units:1", "DSM_TEST_KILL_SIGNAL": "SIGINT"}
    )
    assert ran.exit_code == 130 and "Traceback" not in ran.stderr
    assert "interrupted" in ran.stderr and "run the same command again" in ran.stderr
    again = dsm_process([*args, "--registry", registry, "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["units_resumed"] == 1


def test_ctrl_c_during_a_cutover_names_the_resume_command(tmp_path: Path, dataset: tuple[Path, str]) -> None:
    _, registry = dataset
    assert cli(["alias", "web", "prod", "1", "--registry", registry]).exit_code == 0
    ran = dsm_process(
        [
            "cutover",
            "start",
            "web@prod",
            "--to",
            str(tmp_path / "moved"),
            "--run",
            "--workers",
            "1",
            "--measure-seconds",
            "0.1",
            "--shadow-duration",
            "0.1",
            "--registry",
            registry,
        ],
        env={"DSM_TEST_KILL_AT": "copy:1", "DSM_TEST_KILL_SIGNAL": "SIGINT"},
    )
    assert ran.exit_code == 130 and "Traceback" not in ran.stderr, ran.stderr
    listed = json.loads(cli(["cutover", "list", "--registry", registry, "--json"]).stdout)
    assert f"dsm cutover resume {listed[0]['id']}" in ran.stderr


# ------------------------------------------------------------------------------------------------- S3


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def _s3(options: dict[str, Any]) -> list[str]:
    return [f"--storage-option={key}={value}" for key, value in options.items()]


def test_s3_endpoint_down_gives_up_in_bounded_attempts_and_says_what_it_tried(
    s3_storage: StorageRoot, moto_server: MotoServer
) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    options = {**s3_storage.options, "endpoint_url": endpoint}
    error = assert_error(
        ["ls", "--registry", s3_storage.url, *_s3(options)],
        3,
        "StorageError",
        s3_storage.url,
        f"endpoint {endpoint}",
        "3 attempts",
        "connect timeout 5 s",
        "gave up after",
    )
    assert "raise the storage options attempts and connect_timeout" in error["message"]
    # The user's settings are what is tried, and what is said.
    fewer = {**options, "attempts": 1, "connect_timeout": 2}
    assert_one_line(
        cli(["ls", "--registry", s3_storage.url, *_s3(fewer)]), 3, "1 attempt,", "connect timeout 2 s"
    )


def test_s3_refused_credentials_are_exit_3(moto_auth_server: MotoAuthServer) -> None:
    url = f"s3://{moto_auth_server.bucket}/registry"
    contract = f"s3://{moto_auth_server.bucket}/contract.yaml"
    wrong_secret = moto_auth_server.options((moto_auth_server.reader[0], "not-the-secret-at-all"))
    unknown = moto_auth_server.options(("AKIAUNKNOWNKEY000000", "not-the-secret-at-all"))
    for options in (wrong_secret, unknown):
        # s3fs asks with HEAD first, and S3 answers a HEAD's 403 without its reason.
        for args, at in ((["ls", "--registry", url], url), (["show", contract], contract)):
            assert_error([*args, *_s3(options)], 3, "StorageError", at, "HTTP 403", "check the credentials")


def test_s3_permission_denied_at_verify_is_exit_3(
    moto_auth_server: MotoAuthServer, sample_table: pa.Table, tmp_path: Path
) -> None:
    data = StorageRoot(
        kind="s3", url=f"s3://{moto_auth_server.bucket}/data", options=moto_auth_server.options()
    )
    write_parquet_shards(data, sample_table.slice(0, 100), 1)
    registry = str(tmp_path / "registry")
    allowed = _s3(moto_auth_server.options())
    assert cli(["register", data.url, "--name", "d", "--registry", registry, *allowed]).exit_code == 0
    # May list the bucket, may not read its objects: the shard is named.
    denied = _s3(moto_auth_server.options(moto_auth_server.lister))
    shard = "part-00000.parquet"
    for deep in ([], ["--deep"]):
        assert_error(
            ["verify", "d", *deep, "--registry", registry, *denied],
            3,
            "StorageError",
            f"{data.url}/{shard}",
            "HTTP 403",
            shard=shard,
        )


def test_s3_missing_and_partial_credentials_say_what_is_missing(
    moto_server: MotoServer, s3_storage: StorageRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    endpoint = f"--storage-option=endpoint_url={moto_server.endpoint_url}"
    assert_error(
        ["ls", "--registry", s3_storage.url, endpoint, "--storage-option=skip_instance_cache=true"],
        3,
        "StorageError",
        "no S3 credentials found",
        "AWS_ACCESS_KEY_ID",
    )
    assert_error(
        ["ls", "--registry", s3_storage.url, endpoint, "--storage-option=key=AKIAONLYTHEKEY000000"],
        3,
        "StorageError",
        "incomplete S3 credentials",
        "aws_secret_access_key",
    )


def test_s3_unknown_option_is_exit_2_naming_the_closest(s3_storage: StorageRoot) -> None:
    options = {**s3_storage.options}
    options["endpoint_ur"] = options.pop("endpoint_url")
    assert_error(
        ["ls", "--registry", s3_storage.url, *_s3(options)],
        2,
        "InputError",
        "'endpoint_ur'",
        "'endpoint_url'",
    )
    # Nothing was sent: the check happens before any request (and before the client library).
    assert_error(
        ["verify", "web", "--registry", s3_storage.url, "--storage-option=s3:conect_timeout=3"],
        2,
        "InputError",
        "'conect_timeout'",
        "'connect_timeout'",
    )


def test_s3_missing_bucket_is_exit_2(moto_server: MotoServer) -> None:
    url = "s3://dsm-no-such-bucket-anywhere/registry"
    options = {"endpoint_url": moto_server.endpoint_url, "key": "AKIADSMTESTKEY7Q2W9E", "secret": "x" * 16}
    assert_error(["show", "web", "--registry", url, *_s3(options)], 2, "DatasetNotFound", "web")


# ---------------------------------------------------------------------------------------------- Azure


def test_azure_wrong_account_key_is_exit_3(azure_storage: StorageRoot, azurite_server: AzuriteServer) -> None:
    import base64

    wrong = base64.b64encode(b"this is not the account key of the development store").decode()
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={wrong};"
        f"BlobEndpoint={azurite_server.blob_endpoint};"
    )
    assert_error(
        ["ls", "--registry", azure_storage.url, f"--storage-option=connection_string={connection}"],
        3,
        "StorageError",
        azure_storage.url,
        "credentials were refused",
    )


def test_azure_bad_sas_is_exit_3(azure_storage: StorageRoot, azurite_server: AzuriteServer) -> None:
    """A SAS whose signature Azurite refuses (given in a connection string: Azurite speaks http, and a SAS
    given with ``account_host`` is sent over https)."""
    sas = "sv=2021-08-06&ss=b&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&sig=bm90YXNpZ25hdHVyZWF0YWxsZm9yZHNt"
    connection = f"BlobEndpoint={azurite_server.blob_endpoint};SharedAccessSignature={sas}"
    ran = cli(
        ["ls", "--registry", azure_storage.url, f"--storage-option=connection_string={connection}", "--json"]
    )
    assert ran.exit_code == 3, (ran.stdout, ran.stderr)
    assert_one_line(ran, 3, azure_storage.url)
    error = json.loads(ran.stdout)["error"]
    assert error["type"] == "StorageError" and "the Azure credentials were refused" in error["message"], error
    assert "bm90YXNpZ25hdHVyZWF0YWxsZm9yZHNt" not in ran.stdout + ran.stderr  # the signature stays hidden


def test_azure_endpoint_down_gives_up_in_bounded_attempts(azure_storage: StorageRoot) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}/devstoreaccount1"
    connection = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={azure_storage.options['connection_string'].split('AccountKey=')[1].split(';')[0]};"
        f"BlobEndpoint={endpoint};"
    )
    assert_error(
        [
            "ls",
            "--registry",
            azure_storage.url,
            f"--storage-option=connection_string={connection}",
            "--storage-option=retry_backoff=0.05",
            "--storage-option=retry_backoff_base=0",  # azure-core adds base**retry to each wait
        ],
        3,
        "StorageError",
        azure_storage.url,
        "cannot reach the store",
        "3 attempts",
        "gave up after",
    )


def test_azure_unknown_option_is_exit_2(azure_storage: StorageRoot) -> None:
    connection = azure_storage.options["connection_string"]
    assert_error(
        ["ls", "--registry", azure_storage.url, f"--storage-option=conection_string={connection}"],
        2,
        "InputError",
        "'conection_string'",
        "'connection_string'",
    )


# ------------------------------------------------------------------------------ files that do not decode


def _damage_parquet(path: Path) -> None:
    """Garble the first page header (thrift): pyarrow raises a plain OSError for it."""
    data = bytearray(path.read_bytes())
    for i in range(4, 40):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _damage_arrow(path: Path) -> None:
    """Make the IPC footer's length point far past the file's start."""
    data = bytearray(path.read_bytes())
    data[-10:-6] = b"\xff\xff\xff\x7f"
    path.write_bytes(bytes(data))


def _deep_json(path: Path) -> None:
    """A row whose value nests 1,000 lists deep (json raises RecursionError, not a decoding error)."""
    path.write_text('{"id": 1}\n{"id": 2, "x": ' + "[" * 1000 + "]" * 1000 + "}\n")


def _write_good(folder: Path, kind: str) -> Path:
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    table = pa.table({"id": list(range(500)), "text": [f"row {i} " * 4 for i in range(500)]})
    if kind == "parquet":
        pq.write_table(table, folder / "a.parquet", compression="zstd")
        return folder / "a.parquet"
    if kind == "arrow":
        with ipc.new_file(str(folder / "a.arrow"), table.schema) as writer:
            writer.write_table(table)
        return folder / "a.arrow"
    (folder / "a.jsonl").write_text('{"id": 1}\n')
    return folder / "a.jsonl"


_DAMAGE = {"parquet": _damage_parquet, "arrow": _damage_arrow, "jsonl": _deep_json}


@pytest.mark.parametrize("kind", sorted(_DAMAGE))
def test_a_shard_that_does_not_decode_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    """register and convert-format refuse (exit 2, FormatError); verify --deep reports it unreadable (exit
    1). The contract of the damaged file records its bytes as they are now, so verify gets to the rows."""
    import yaml

    from dsm.hashing.checksum import file_checksum

    registry = str(tmp_path / "registry")
    good = _write_good(tmp_path / "data", kind)
    assert cli(["register", str(good.parent), "--name", "d", "--registry", registry]).exit_code == 0
    _DAMAGE[kind](good)
    name = good.name
    assert_error(
        ["register", str(good.parent), "--name", "again", "--registry", registry],
        2,
        "FormatError",
        name,
        shard=name,
    )
    contract = yaml.safe_load((Path(registry) / "d" / "versions" / "1.yaml").read_text())
    with good.open("rb") as handle:
        contract["shards"][0]["checksum"] = file_checksum(handle, "xxh3-128")
    contract["shards"][0]["bytes"] = good.stat().st_size
    as_now = tmp_path / "as-now.yaml"
    as_now.write_text(yaml.safe_dump(contract, sort_keys=False))
    ran = cli(["verify", str(as_now), "--deep", "--json"])
    assert ran.exit_code == 1 and "Traceback" not in ran.stdout + ran.stderr, (ran.stdout, ran.stderr)
    [shard] = json.loads(ran.stdout)["shards"]
    assert shard["status"] == "unreadable" and name in shard["detail"], shard
    assert_error(
        ["convert-format", str(as_now), str(tmp_path / "out"), "--format", "parquet", "--registry", registry],
        2,
        "FormatError",
        name,
        shard=name,
    )


def _nested(depth: int) -> object:
    value: object = 1
    for level in range(depth - 1):
        value = [value] if level % 2 else {"f": value}
    return value


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_a_type_nested_too_deep_is_refused_naming_the_shard(tmp_path: Path, kind: str) -> None:
    """A shard whose field nests beyond what dsm and Arrow walk is refused at its schema, by name (exit 2),
    never as a RecursionError wherever the type is next walked; a depth dsm reads registers."""
    import pyarrow.parquet as pq

    from dsm.arrow_types import MAX_TYPE_DEPTH

    registry = str(tmp_path / "registry")
    for depth, fine in ((MAX_TYPE_DEPTH - 4, True), (MAX_TYPE_DEPTH + 16, False)):
        folder = tmp_path / f"{kind}-{depth}"
        folder.mkdir()
        rows = [{"id": 1, "deep": _nested(depth)}]
        if kind == "jsonl":
            (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            pq.write_table(pa.Table.from_pylist(rows), folder / "a.parquet")
        args = ["register", str(folder), "--name", f"n{depth}", "--registry", registry]
        if fine:
            assert cli(args).exit_code == 0
        else:
            assert_error(args, 2, "FormatError", f"a.{kind}", shard=f"a.{kind}")
