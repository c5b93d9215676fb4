"""``dsm cutover`` through the CLI: JSON, exit codes, rendering, the lease between two processes, and
options reaching the library unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from dsm.cli.app import app
from dsm.commands import cutover as cutover_lib
from dsm.cutover.journal import Owner
from dsm.cutover.lease import Lease
from dsm.errors import InputError
from dsm.registry import Registry
from dsm.storage import location

from .cutover_support import FAST_CLI, flip_byte, make_dataset

runner = CliRunner()


def run(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def web(tmp_path: Path, sample_table: pa.Table) -> tuple[str, Path]:
    return make_dataset(tmp_path, sample_table.slice(0, 600))


def _alias(registry: str) -> int:
    return Registry(registry).aliases("web")["prod"]


def test_plan_prints_time_cost_and_storage(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    args = ["cutover", "plan", "web@prod", "--to", str(tmp_path / "out"), "--format", "jsonl"]
    human = run(*args, "--measure-seconds", "0.05", "--registry", registry)
    assert human.exit_code == 0, human.output
    for text in ("estimate", "total", "cost (built-in prices)", "peak extra storage", "compatibility: OK"):
        assert text in human.stdout
    body = json.loads(run(*args, "--measure-seconds", "0.05", "--registry", registry, "--json").stdout)
    assert body["ok"] is True and body["source"] == "web@1" and body["layout"]["files"] == 4
    assert body["estimate"]["total_seconds"] > 0 and "peak_extra_bytes" in body["estimate"]["storage"]
    assert not (Path(registry) / "web" / "cutovers").exists()


def test_plan_exits_1_when_the_cutover_would_stop_at_plan(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "x.parquet").write_bytes(b"x")
    result = run(
        "cutover", "plan", "web@prod", "--to", str(dest), "--measure-seconds", "0.05", "--registry", registry
    )
    assert result.exit_code == 1 and "not empty" in result.stdout


def test_start_run_status_list_in_json(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    started = run(
        "cutover", "start", "web@prod", "--to", str(tmp_path / "out"), "--format", "jsonl", "--run",
        *FAST_CLI, "--registry", registry, "--json",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    body = json.loads(started.stdout)
    assert body["ok"] and body["phase"] == "completed" and body["ran"][-1] == "complete"
    shown = json.loads(run("show", "web@prod", "--registry", registry, "--json").stdout)
    assert shown["version"] == 2 and shown["format"] == "jsonl"
    status = json.loads(run("cutover", "status", "--registry", registry, "--json").stdout)
    assert status["id"] == body["id"] and status["state"]["stages"][1]["evidence"]["bytes_copied"] > 0
    items = {p["item"]: p for p in status["plan_vs_actual"]}
    assert items["target bytes"]["planned"]
    assert items["target bytes"]["actual"] == sum(s["bytes"] for s in shown["shards"])
    listed = json.loads(run("cutover", "list", "--registry", registry, "--json").stdout)
    assert [c["id"] for c in listed] == [body["id"]] and listed[0]["phase"] == "completed"
    human = run("cutover", "status", body["id"], "--registry", registry)
    assert human.exit_code == 0 and "planned and measured" in human.stdout and "completed" in human.stdout
    ls = json.loads(run("ls", "--registry", registry, "--json").stdout)
    assert ls[0]["statuses"] == {"1": "deprecated"}


def test_corrupt_target_exits_1_naming_the_shard(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    dest = tmp_path / "out"
    started = run(
        "cutover", "start", "web@prod", "--to", str(dest), "--format", "jsonl", "--through", "copy",
        *FAST_CLI, "--registry", registry, "--json",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    cutover_id = json.loads(started.stdout)["id"]
    flip_byte(dest / "part-00001-of-00004.jsonl")
    result = run("cutover", "run", cutover_id, "--registry", registry)
    assert result.exit_code == 1
    assert "part-00001-of-00004.jsonl" in result.stdout and "the alias was not moved" in result.stdout
    assert _alias(registry) == 1


def test_rollback_after_switch(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    started = run(
        "cutover", "start", "web@prod", "--to", str(tmp_path / "out"), "--run", "--retain", "7d",
        "--measure-seconds", "0.05", "--shadow-duration", "0.05", "--registry", registry, "--json",
    )  # fmt: skip
    body = json.loads(started.stdout)
    assert (
        started.exit_code == 0
        and "waiting for the retain period" in body["stopped"]
        and _alias(registry) == 2
    )
    back = run("cutover", "rollback", body["id"], "--discard-target", "--registry", registry, "--json")
    assert back.exit_code == 0 and json.loads(back.stdout)["phase"] == "rolled_back" and _alias(registry) == 1
    verify = run("verify", "web@1", "--registry", registry)
    assert verify.exit_code == 0


def test_a_held_lease_exits_3_and_force_says_whose_lease_it_breaks(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    registry, _ = web
    started = run(
        "cutover",
        "start",
        "web@prod",
        "--to",
        str(tmp_path / "out"),
        *FAST_CLI,
        "--registry",
        registry,
        "--json",
    )
    cutover_id = json.loads(started.stdout)["id"]
    folder = location(registry).child(f"web/cutovers/{cutover_id}")
    Lease(folder, cutover_id=cutover_id, owner=Owner(host="elsewhere", pid=4242, user="bob")).acquire()
    refused = run("cutover", "run", cutover_id, "--registry", registry)
    assert refused.exit_code == 3 and "locked by bob@elsewhere pid 4242 until" in refused.stderr
    status = run("cutover", "status", cutover_id, "--registry", registry)
    assert "lease: held by bob@elsewhere pid 4242" in status.stdout
    forced = run("cutover", "resume", cutover_id, "--force", "--registry", registry)
    assert forced.exit_code == 0 and "broke the lease of bob@elsewhere pid 4242" in forced.stderr


def test_bad_input_exits_2_and_creates_nothing(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    result = run("cutover", "start", "web@1", "--to", str(tmp_path / "out"), "--registry", registry)
    assert result.exit_code == 2 and "names no alias" in result.stderr
    unknown = run("cutover", "status", "nope", "--registry", registry)
    assert unknown.exit_code == 2 and "no cutover 'nope'" in unknown.stderr


def test_two_runs_at_once_one_is_refused_naming_the_holder(tmp_path: Path, web: tuple[str, Path]) -> None:
    """Two processes: the first holds the lease while its copy hook waits; the second is refused."""
    registry, _ = web
    ready, go = tmp_path / "ready", tmp_path / "go"
    hook = (
        f'if [ "$DSM_CUTOVER_STAGE" = copy ]; then touch {ready}; '
        f"i=0; while [ ! -f {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; fi"
    )
    started = run(
        "cutover", "start", "web@prod", "--to", str(tmp_path / "out"), "--on-stage", hook,
        *FAST_CLI, "--registry", registry, "--json",
    )  # fmt: skip
    assert started.exit_code == 0, started.output
    cutover_id = json.loads(started.stdout)["id"]
    env = {**os.environ, "DSM_REGISTRY": registry}
    command = [sys.executable, "-m", "dsm", "cutover", "run", cutover_id]
    first = subprocess.Popen(
        [*command, "--through", "copy"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        for _ in range(600):
            if ready.exists() or first.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), first.communicate()
        second = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        assert second.returncode == 3
        assert f"pid {first.pid}" in second.stderr and "locked by" in second.stderr
    finally:
        go.touch()
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    state = cutover_lib.cutover_status(cutover_id, registry=registry).state
    assert state.stage("copy").status == "done" and state.stage("copy").hook == "ok"


# ----------------------------------------------------------------------------------- options reach library


class Called(InputError):
    pass


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def recorder(name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            seen[name] = (args, kwargs)
            raise Called("recorded")

        return record

    for name in (
        "plan_cutover",
        "start_cutover",
        "run_cutover",
        "resume_cutover",
        "rollback_cutover",
        "cutover_status",
        "list_cutovers",
    ):
        monkeypatch.setattr(cutover_lib, name, recorder(name))
    return seen


def test_start_options_reach_the_library_unchanged(calls: dict[str, Any]) -> None:
    result = run(
        "cutover", "start", "web@prod", "--to", "s3://b/web/", "--format", "parquet", "--num-shards", "8",
        "--shuffle", "--seed", "3", "--compression", "zstd", "--compression-level", "5",
        "--row-group-size", "1000", "--format-option", "use_dictionary=false", "--alias", "prod",
        "--prices", "p.yaml", "--retain", "3d", "--delete-old", "--postpone-switch",
        "--on-stage", "a.sh", "--on-stage", "b.sh", "--max-regression", "10", "--max-p99", "0.5",
        "--min-throughput", "200MB/s", "--sample-rows", "50", "--shadow-duration", "3",
        "--shadow-workers", "1,4", "--allow-breaking", "--measure-seconds", "2", "--skip-readiness",
        "encryption", "--skip-readiness", "throughput", "--run",
        "--through", "switch", "--lease-seconds", "30", "--workers", "4", "--engine", "ray",
        "--ray-address", "10.0.0.1:6379", "--registry", "reg", "--storage-option", "anon=true",
    )  # fmt: skip
    assert result.exit_code == 2
    args, kwargs = calls["start_cutover"]
    assert args == ("web@prod",)
    kwargs.pop("progress")
    assert kwargs == {
        "to": "s3://b/web/",
        "format": "parquet",
        "num_shards": 8,
        "shard_size": None,
        "rows_per_shard": None,
        "shuffle": True,
        "seed": 3,
        "compression": "zstd",
        "compression_level": 5,
        "row_group_size": 1000,
        "format_options": {"use_dictionary": False},
        "alias": "prod",
        "prices": "p.yaml",
        "retain": "3d",
        "delete_old": True,
        "postpone_switch": True,
        "on_stage": ["a.sh", "b.sh"],
        "max_regression": 10.0,
        "max_p99": 0.5,
        "min_throughput": "200MB/s",
        "sample_rows": 50,
        "shadow_duration": 3.0,
        "shadow_workers": "1,4",
        "allow_breaking": True,
        "measure_seconds": 2.0,
        "skip_readiness": ["encryption", "throughput"],
        "run": True,
        "through": "switch",
        "lease_seconds": 30.0,
        "workers": 4,
        "engine": "ray",
        "ray_address": "10.0.0.1:6379",
        "registry": "reg",
        "storage_options": {"anon": True},
    }


def test_other_commands_pass_their_options_unchanged(calls: dict[str, Any]) -> None:
    run(
        "cutover",
        "plan",
        "web@prod",
        "--to",
        "/d",
        "--shard-size",
        "64MB",
        "--retain",
        "0",
        "--registry",
        "r",
    )
    _, plan = calls["plan_cutover"]
    assert (
        plan["to"] == "/d"
        and plan["shard_size"] == "64MB"
        and plan["retain"] == "0"
        and plan["registry"] == "r"
    )
    run("cutover", "run", "c1", "--through", "copy", "--force", "--lease-seconds", "5", "--workers", "2")
    args, kwargs = calls["run_cutover"]
    assert args == ("c1",) and (
        kwargs["through"],
        kwargs["force"],
        kwargs["lease_seconds"],
        kwargs["workers"],
    ) == (
        "copy",
        True,
        5.0,
        2,
    )
    run("cutover", "run", "c1", "--engine", "ray", "--ray-address", "h:1")
    assert (calls["run_cutover"][1]["engine"], calls["run_cutover"][1]["ray_address"]) == ("ray", "h:1")
    run("cutover", "resume", "c1", "--force", "--engine", "ray")
    assert calls["resume_cutover"][0] == ("c1",) and calls["resume_cutover"][1]["force"] is True
    assert calls["resume_cutover"][1]["engine"] == "ray"
    run("cutover", "rollback", "c1", "--discard-target", "--force")
    kwargs = calls["rollback_cutover"][1]
    assert kwargs["discard_target"] is True and kwargs["force"] is True
    run("cutover", "status", "c1", "--registry", "r")
    assert calls["cutover_status"] == (("c1",), {"registry": "r", "storage_options": None})
    run("cutover", "list", "--name", "web")
    assert calls["list_cutovers"][1]["name"] == "web"


def test_cutover_help_has_examples() -> None:
    for command in ("plan", "start", "run", "resume", "rollback", "status", "list"):
        result = runner.invoke(app, ["cutover", command, "--help"])
        assert result.exit_code == 0 and "Example" in result.output, command
