"""``dsm convert-format`` and ``dsm reshard`` through the CLI: output, exit codes, option passing, kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dsm
import dsm.commands.rewrite as rewrite_commands
from dsm._testing import KILL_ENV
from dsm.cli.app import app
from dsm.errors import InputError
from dsm.rewrite.journal import JOURNAL_DIR
from tests.conftest import write_parquet_shards

runner = CliRunner()


@pytest.fixture
def source(tmp_path: Path, sample_table: pa.Table, registry_url: str) -> str:
    write_parquet_shards(tmp_path / "source", sample_table, 4)
    dsm.register(str(tmp_path / "source"), name="web", registry=registry_url)
    return str(tmp_path / "source")


def test_convert_format_json(tmp_path: Path, source: str, registry_url: str) -> None:
    out = tmp_path / "jsonl"
    result = runner.invoke(
        app, ["convert-format", "web", str(out), "--format", "jsonl", "--registry", registry_url, "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["dataset"] == "web@2" and data["source"] == "web@1" and data["fingerprint_match"] is True
    assert data["contract"]["format"] == "jsonl"
    assert data["contract"]["lineage"]["parent"] == "web@1"
    assert [s["path"] for s in data["contract"]["shards"]] == [
        f"part-{k:05d}-of-00004.jsonl" for k in range(4)
    ]
    assert all((out / s["path"]).stat().st_size == s["bytes"] for s in data["contract"]["shards"])


def test_reshard_human_output(tmp_path: Path, source: str, registry_url: str) -> None:
    result = runner.invoke(
        app,
        [
            "reshard",
            "web",
            str(tmp_path / "r"),
            "--num-shards",
            "3",
            "--shuffle",
            "--seed",
            "7",
            "--registry",
            registry_url,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "wrote web@2 from web@1: 3 parquet shards, 3,000 rows" in result.stdout
    assert "matches web@1 (unordered)" in result.stdout


def test_exit_codes(tmp_path: Path, source: str, registry_url: str) -> None:
    nested = tmp_path / "nested"
    nested.mkdir()
    pq.write_table(pa.table({"id": [1], "tags": [["x"]]}), nested / "a.parquet")
    dsm.register(str(nested), name="nested", registry=registry_url)
    refused = runner.invoke(
        app,
        ["convert-format", "nested", str(tmp_path / "csv"), "--format", "csv", "--registry", registry_url],
    )
    assert refused.exit_code == 2 and "cannot hold" in refused.stderr
    assert not (tmp_path / "csv").exists()

    usage = runner.invoke(app, ["reshard", "web", str(tmp_path / "x"), "--registry", registry_url])
    assert usage.exit_code == 2 and "exactly one of" in usage.stderr

    shard = Path(source) / "part-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0x01
    shard.write_bytes(bytes(data))
    corrupt = runner.invoke(
        app, ["reshard", "web", str(tmp_path / "y"), "--num-shards", "2", "--registry", registry_url]
    )
    assert corrupt.exit_code == 1 and "part-00001.parquet: corrupt" in corrupt.stderr
    assert not (tmp_path / "y").exists() or not any((tmp_path / "y").iterdir())


def test_cli_options_reach_the_library_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen[name] = (args, kwargs)
            raise InputError("stop here")

        return call

    monkeypatch.setattr(rewrite_commands, "reshard", fake("reshard"))
    monkeypatch.setattr(rewrite_commands, "convert_format", fake("convert_format"))
    result = runner.invoke(
        app,
        [
            "reshard",
            "web@3",
            "s3://b/out/",
            "--shard-size",
            "256MB",
            "--shuffle",
            "--seed",
            "7",
            "--format",
            "parquet",
            "--compression",
            "zstd",
            "--compression-level",
            "5",
            "--row-group-size",
            "1000",
            "--format-option",
            "use_dictionary=false",
            "--name",
            "web2",
            "--workers",
            "3",
            "--overwrite",
            "--read-back",
            "--spill-dir",
            "s3://scratch/dsm/",
            "--engine",
            "ray",
            "--ray-address",
            "10.0.0.1:6379",
            "--registry",
            "mem-reg",
            "--storage-option",
            "anon=true",
        ],
    )
    assert result.exit_code == 2
    args, kwargs = seen["reshard"]
    progress = kwargs.pop("progress")
    assert progress is None
    assert args == ("web@3", "s3://b/out/")
    assert kwargs == {
        "num_shards": None,
        "shard_size": "256MB",
        "rows_per_shard": None,
        "shuffle": True,
        "seed": 7,
        "format": "parquet",
        "compression": "zstd",
        "compression_level": 5,
        "row_group_size": 1000,
        "format_options": {"use_dictionary": False},
        "name": "web2",
        "workers": 3,
        "overwrite": True,
        "read_back": True,
        "spill_dir": "s3://scratch/dsm/",
        "engine": "ray",
        "ray_address": "10.0.0.1:6379",
        "registry": "mem-reg",
        "storage_options": {"anon": True},
    }
    result = runner.invoke(
        app, ["convert-format", "web", "out", "--format", "csv", "--format-option", "delimiter=;"]
    )
    assert result.exit_code == 2
    args, kwargs = seen["convert_format"]
    assert args == ("web", "out")
    assert kwargs["format"] == "csv" and kwargs["format_options"] == {"delimiter": ";"}
    assert kwargs["compression"] is None and kwargs["overwrite"] is False and kwargs["workers"] is None
    assert kwargs["read_back"] is False
    assert kwargs["engine"] is None and kwargs["ray_address"] is None


def test_the_old_to_format_spelling_still_works_hidden_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen[name] = (args, kwargs)
            raise InputError("stop here")

        return call

    monkeypatch.setattr(rewrite_commands, "reshard", fake("reshard"))
    monkeypatch.setattr(rewrite_commands, "convert_format", fake("convert_format"))
    for command in ("convert-format", "reshard"):
        layout = ["--num-shards", "2"] if command == "reshard" else []
        result = runner.invoke(app, [command, "web", "out", *layout, "--to", "arrow"])
        assert result.exit_code == 2
        _, kwargs = seen[command.replace("-", "_")]
        assert kwargs["format"] == "arrow"
        assert f"`dsm {command} --to FORMAT` is deprecated; write --format arrow" in result.stderr
        help_text = runner.invoke(app, [command, "--help"]).stdout
        assert "--format" in help_text and "--to FORMAT still works" in " ".join(help_text.split())
        assert "--to " not in help_text.split("Examples")[0].replace("--to FORMAT", "")
    clash = runner.invoke(app, ["convert-format", "web", "out", "--to", "arrow", "--format", "csv"])
    assert clash.exit_code == 2 and "disagree" in clash.stderr
    missing = runner.invoke(app, ["convert-format", "web", "out"])
    assert missing.exit_code == 2 and "needs --format FORMAT" in missing.stderr


def test_help_has_examples() -> None:
    for command in ("convert-format", "reshard"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0
        assert f"dsm {command} " in result.stdout and "Exit codes" in result.stdout


def _dsm(args: list[str], registry: str, crash_after: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    if crash_after is not None:
        env[KILL_ENV] = f"units:{crash_after}"
    return subprocess.run(
        [sys.executable, "-m", "dsm", *args, "--registry", registry, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize(
    ("row_group", "layout", "crash_after", "kept"),
    [
        # row groups of 150 rows: every cut between output files falls near a row group's start, so the 5
        # files are 5 independent units; 2 are journaled before the kill
        (150, ["--num-shards", "5"], 2, 2),
        # each source shard one row group, cut into 3 files: 4 chains of 3 units, each read once; the kill
        # comes when the driver hears of the first chain (3 units), after the second unit it counts
        (None, ["--num-shards", "12"], 2, 3),
        # shuffled: 4 pass-1 units (one per source shard) and 2 of 5 output files are journaled before the
        # kill
        (150, ["--rows-per-shard", "700", "--shuffle", "--seed", "11"], 6, 2),
    ],
    ids=["ordered", "chained", "shuffled"],
)
def test_kill_9_midway_then_rerun_gives_identical_files(
    tmp_path: Path,
    sample_table: pa.Table,
    registry_url: str,
    row_group: int | None,
    layout: list[str],
    crash_after: int,
    kept: int,
) -> None:
    for i in range(4):
        folder = tmp_path / "source"
        folder.mkdir(exist_ok=True)
        pq.write_table(
            sample_table.slice(i * 750, 750), folder / f"part-{i}.parquet", row_group_size=row_group
        )
    dsm.register(str(tmp_path / "source"), name="web", registry=registry_url)
    reference = _dsm(["reshard", "web@1", str(tmp_path / "ref"), *layout, "--name", "ref"], registry_url)
    assert reference.returncode == 0, reference.stderr
    expected = json.loads(reference.stdout)["contract"]["shards"]

    out = tmp_path / "out"
    args = ["reshard", "web@1", str(out), *layout, "--workers", "1"]
    killed = _dsm(args, registry_url, crash_after=crash_after)
    assert killed.returncode == -signal.SIGKILL
    shuffled = "--shuffle" in layout
    assert len(list((out / JOURNAL_DIR).glob("_*.json"))) == (crash_after if shuffled else kept)
    assert dsm.Registry(registry_url).versions("web") == [1]  # nothing published yet

    rerun = _dsm([*args[:-2], "--workers", "2"], registry_url)
    assert rerun.returncode == 0, rerun.stderr
    data = json.loads(rerun.stdout)
    assert data["dataset"] == "web@2" and data["fingerprint_match"] is True
    assert data["units_resumed"] == kept and data["units_written"] == len(expected) - kept
    assert [(s["path"], s["checksum"], s["bytes"]) for s in data["contract"]["shards"]] == [
        (s["path"], s["checksum"], s["bytes"]) for s in expected
    ]
    leftovers = [p.name for p in out.rglob("*") if ".dsm-tmp-" in p.name]
    assert leftovers == []
    assert not (out / JOURNAL_DIR).exists()
