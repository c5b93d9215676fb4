"""The CLI through typer's CliRunner: exit codes, --json, and options reaching the library unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import dsm.commands.register as register_command
import dsm.commands.verify as verify_command
from dsm.cli.app import app

from .conftest import write_parquet_shards

runner = CliRunner()


def run(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def registered(tmp_path: Path, sample_table: pa.Table) -> tuple[str, Path]:
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table, 3)
    registry = str(tmp_path / "registry")
    result = run("register", str(data), "--name", "sample", "--registry", registry, "--owner", "me@x.org")
    assert result.exit_code == 0, result.output
    assert "registered sample@1" in result.output
    return registry, data


def test_register_json_prints_the_contract(tmp_path: Path, sample_table: pa.Table) -> None:
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table, 2)
    result = run("register", str(data), "--name", "s", "--registry", str(tmp_path / "r"), "--json")
    assert result.exit_code == 0
    contract = json.loads(result.stdout)
    assert contract["name"] == "s" and contract["version"] == 1
    assert contract["fingerprint"]["rows"] == sample_table.num_rows


def test_verify_exit_codes_and_json(registered: tuple[str, Path]) -> None:
    registry, data = registered
    ok = run("verify", "sample", "--registry", registry, "--json")
    assert ok.exit_code == 0
    body = json.loads(ok.stdout)
    assert body["dataset"] == "sample@1" and body["ok"] is True and body["summary"] == {"ok": 3}
    assert {"path", "status", "detail"} <= set(body["shards"][0])

    raw = bytearray((data / "part-00001.parquet").read_bytes())
    raw[100] ^= 0xFF
    (data / "part-00001.parquet").write_bytes(bytes(raw))
    bad = run("verify", "sample", "--registry", registry)
    assert bad.exit_code == 1
    assert "part-00001.parquet" in bad.stdout and "corrupt" in bad.stdout


def test_unknown_dataset_exits_2(tmp_path: Path) -> None:
    result = run("verify", "nope", "--registry", str(tmp_path))
    assert result.exit_code == 2
    assert "no dataset named 'nope'" in result.stderr


def test_broken_contract_file_exits_2_naming_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("dsm: 1\nname: x\nshards: [\n  {path: a\n")
    result = run("verify", str(path), "--registry", str(tmp_path / "r"))
    assert result.exit_code == 2
    assert "broken.yaml" in result.stderr and "line" in result.stderr


def test_malformed_jsonl_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.jsonl").write_text('{"a": 1}\n{"a": }\n')
    registry = tmp_path / "r"
    result = run("register", str(data), "--name", "x", "--registry", str(registry))
    assert result.exit_code == 2
    assert "x.jsonl" in result.stderr and "line 2" in result.stderr
    assert not registry.exists() or not any(registry.rglob("*.yaml"))


def test_ls_show_alias(registered: tuple[str, Path]) -> None:
    registry, _ = registered
    moved = run("alias", "sample", "prod", "1", "--registry", registry, "--json")
    assert json.loads(moved.stdout) == {
        "name": "sample",
        "alias": "prod",
        "version": 1,
        "previous": None,
        "atomic": True,
    }
    listed = json.loads(run("ls", "--registry", registry, "--json").stdout)
    assert listed[0]["name"] == "sample" and listed[0]["aliases"] == {"prod": 1}
    shown = json.loads(run("show", "sample@prod", "--registry", registry, "--json").stdout)
    assert shown["version"] == 1 and shown["owners"] == ["me@x.org"]
    yaml_text = run("show", "sample@prod", "--registry", registry).stdout
    assert "name: sample" in yaml_text and "fingerprint:" in yaml_text
    human = run("ls", "--registry", registry).stdout
    assert "sample" in human and "prod→1" in human


def test_schema_prints_json_schema() -> None:
    result = run("schema")
    assert json.loads(result.stdout)["title"].startswith("dsm dataset contract")


def test_cli_options_reach_the_library_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, Any] = {}

    def fake_verify(ref: str, **kwargs: Any) -> Any:
        calls["verify"] = (ref, kwargs)
        raise SystemExit(0)

    def fake_register(source: str, **kwargs: Any) -> Any:
        calls["register"] = (source, kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(verify_command, "verify", fake_verify)
    monkeypatch.setattr(register_command, "register", fake_register)
    runner.invoke(
        app,
        [
            "verify",
            "ds@3",
            "--deep",
            "--workers",
            "3",
            "--registry",
            "reg",
            "--storage-option",
            "anon=true",
            "--storage-option",
            "endpoint_url=http://x",
        ],
    )
    ref, kwargs = calls["verify"]
    assert ref == "ds@3"
    assert kwargs["deep"] is True and kwargs["workers"] == 3 and kwargs["registry"] == "reg"
    assert kwargs["storage_options"] == {"anon": True, "endpoint_url": "http://x"}
    runner.invoke(
        app,
        [
            "register",
            "src/",
            "--name",
            "n",
            "--format",
            "jsonl",
            "--schema",
            "other@2",
            "--owner",
            "a",
            "--owner",
            "b",
            "--key",
            "id",
            "--description",
            "d",
        ],
    )
    source, kwargs = calls["register"]
    assert source == "src/"
    assert kwargs["name"] == "n" and kwargs["format"] == "jsonl" and kwargs["schema"] == "other@2"
    assert kwargs["owners"] == ["a", "b"] and kwargs["key"] == ["id"] and kwargs["description"] == "d"


def test_bad_storage_option_is_usage_error() -> None:
    result = run("ls", "--storage-option", "novalue")
    assert result.exit_code == 2
    assert "KEY=VALUE" in result.stderr
