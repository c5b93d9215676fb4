"""dsm bench, the CLI: options reach the library unchanged, output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dsm
from dsm.cli import bench as bench_cli
from dsm.cli.app import app
from dsm.commands import bench as bench_lib
from dsm.contract import Contract
from dsm.formats import get_format

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def datasets(tmp_path: Path, sample_table: pa.Table, registry_url: str) -> tuple[Contract, Contract]:
    """``web`` (Parquet, 2 shards) and ``web-jsonl`` (the same rows as JSON Lines)."""
    table = sample_table.slice(0, 400)
    parquet_dir, jsonl_dir = tmp_path / "parquet", tmp_path / "jsonl"
    parquet_dir.mkdir()
    jsonl_dir.mkdir()
    fmt = get_format("jsonl")
    for i in range(2):
        piece = table.slice(i * 200, 200)
        pq.write_table(piece, parquet_dir / f"part-{i}.parquet")
        with (
            open(jsonl_dir / f"part-{i}.jsonl", "wb") as handle,
            fmt.open_writer(handle, piece.schema) as writer,
        ):
            for batch in piece.to_batches():
                writer.write_batch(batch)
    parquet = dsm.register(str(parquet_dir), name="web", registry=registry_url)
    jsonl = dsm.register(str(jsonl_dir), name="web-jsonl", registry=registry_url, schema="web")
    return parquet, jsonl


def test_json_output(datasets: tuple[Contract, Contract], registry_url: str) -> None:
    result = cli("bench", "web", "--registry", registry_url, "--workers", "1,2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["dataset"] == "web@1" and [r["workers"] for r in data["results"]] == [1, 2]
    assert data["results"][0]["bytes"] == datasets[0].total_bytes and data["results"][0]["rows"] == 400
    assert data["provenance"]["arguments"]["workers"] == [1, 2]


def test_table_output_names_the_knee_and_the_caches(
    datasets: tuple[Contract, Contract], registry_url: str
) -> None:
    result = cli("bench", "web", "--registry", registry_url, "--workers", "1,2,4", "--mode", "decode")
    assert result.exit_code == 0, result.output
    for text in (
        "web@1",
        "rows/s",
        "latency p99.9",
        "ttfb p50",
        "knee (rows/s)",
        "caches:",
        "gate checks held",
    ):
        assert text in result.stdout


def test_compare_prints_both_and_the_ratios(datasets: tuple[Contract, Contract], registry_url: str) -> None:
    result = cli("bench", "web", "--compare", "web-jsonl", "--registry", registry_url, "--mode", "decode")
    assert result.exit_code == 0, result.output
    assert "web@1" in result.stdout and "web-jsonl@1" in result.stdout and "ratio" in result.stdout
    assert "rows/s" in result.stdout and "latency p99" in result.stdout


def test_a_gate_that_does_not_hold_exits_1(datasets: tuple[Contract, Contract], registry_url: str) -> None:
    args = ["bench", "web", "--compare", "web-jsonl", "--registry", registry_url]
    result = cli(*args, "--min-throughput", "1PB/s", "--json")  # no machine reads a petabyte a second
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    (gate,) = [g for g in data["gates"] if g["name"] == "min_throughput"]
    assert gate["dataset"] == "web-jsonl@1" and gate["threshold"] == 1e15 and gate["passed"] is False
    assert data["passed"] is False
    shown = cli(*args, "--min-throughput", "1PB/s")
    assert shown.exit_code == 1 and "FAIL min_throughput web-jsonl@1" in shown.stdout


def test_max_regression_that_does_not_hold_exits_1(
    datasets: tuple[Contract, Contract], registry_url: str, tmp_path: Path
) -> None:
    gone = datasets[0].evolve(name="web-gone", location=str(tmp_path / "nowhere"), version=None)
    contract_file = tmp_path / "gone.yaml"
    contract_file.write_text(gone.to_yaml(), encoding="utf-8")
    result = cli(
        "bench", "web", "--compare", str(contract_file), "--registry", registry_url, "--max-regression", "10"
    )
    assert result.exit_code == 1
    assert "FAIL max_regression" in result.stdout and "FAIL max_errors" in result.stdout


def test_unknown_dataset_exits_2(registry_url: str) -> None:
    result = cli("bench", "nope", "--registry", registry_url)
    assert result.exit_code == 2 and "nope" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--columns", "id"],  # a projection needs decode mode
        ["--max-regression", "5"],  # needs --compare
        ["--warmup", "1", "--warmup-requests", "2"],
        ["--workers", "0,2"],
        ["--raw", "requests.txt"],
    ],
)
def test_bad_option_combinations_exit_2(
    datasets: tuple[Contract, Contract], registry_url: str, args: list[str]
) -> None:
    result = cli("bench", "web", "--registry", registry_url, *args)
    assert result.exit_code == 2, result.output
    assert "error:" in result.stderr


def test_output_and_raw_files(datasets: tuple[Contract, Contract], registry_url: str, tmp_path: Path) -> None:
    html, raw = tmp_path / "report.html", tmp_path / "requests.csv"
    result = cli(
        "bench", "web", "--registry", registry_url, "--output", str(html), "--raw", str(raw), "--json"
    )
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # nothing but the JSON document on stdout
    assert "<svg" in html.read_text(encoding="utf-8") and raw.read_text().startswith('"dataset"')
    assert f"wrote HTML report to {html}" in result.stderr


def test_options_reach_the_library_unchanged(
    datasets: tuple[Contract, Contract], registry_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    real = bench_lib.bench

    def spy(ref: str, **kwargs: Any) -> bench_lib.BenchReport:
        seen.update(kwargs, ref=ref)
        return real("web", registry=registry_url)

    monkeypatch.setattr(bench_lib, "bench", spy)
    result = cli(
        "bench",
        "web",
        "--compare",
        "web-jsonl",
        "--workers",
        "1,2,4",
        "--duration",
        "2.5",
        "--pattern",
        "random",
        "--mode",
        "decode",
        "--columns",
        "id,text",
        "--cold",
        "--warmup-requests",
        "7",
        "--seed",
        "9",
        "--repeat",
        "3",
        "--knee-threshold",
        "0.2",
        "--retries",
        "4",
        "--min-throughput",
        "200MB/s",
        "--max-p99",
        "0.5",
        "--max-regression",
        "12.5",
        "--max-errors",
        "3",
        "--output",
        "r.html",
        "--raw",
        "r.parquet",
        "--registry",
        registry_url,
        "--storage-option",
        "anon=true",
        "--json",
    )
    assert result.exit_code == 0, result.output
    progress = seen.pop("progress")
    assert progress is None  # not a terminal
    assert seen == {
        "ref": "web",
        "compare": "web-jsonl",
        "workers": "1,2,4",
        "duration": 2.5,
        "pattern": "random",
        "mode": "decode",
        "columns": "id,text",
        "cold": True,
        "block_size": None,
        "warmup": None,
        "warmup_requests": 7,
        "seed": 9,
        "repeat": 3,
        "knee_threshold": 0.2,
        "retries": 4,
        "min_throughput": "200MB/s",
        "max_p99": 0.5,
        "max_regression": 12.5,
        "max_errors": 3,
        "output": "r.html",
        "raw": "r.parquet",
        "registry": registry_url,
        "storage_options": {"anon": True},
    }


def test_cli_options_are_the_library_keywords() -> None:
    import inspect

    library = set(inspect.signature(bench_lib.bench).parameters) - {"ref", "progress", "storage_options"}
    command = set(inspect.signature(bench_cli.bench).parameters) - {"ref", "json_output", "storage_option"}
    assert command == library


def test_help_has_examples() -> None:
    result = cli("bench", "--help")
    assert result.exit_code == 0 and "Example" in result.output and "--compare" in result.output
