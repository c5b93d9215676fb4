"""``dsm cutover plan`` runs ``dsm storage check`` on the destination, shows it, stops on a required check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import dsm
import dsm.commands.storage_check as storage_check_command
from dsm.cli.app import app
from dsm.commands.cutover.estimate import Measurements, estimate
from dsm.commands.cutover.prices import load_prices
from dsm.errors import InputError
from dsm.storage.readiness import Finding
from tests.conftest import StorageRoot
from tests.cutover_support import FAST, FAST_CLI, make_dataset

runner = CliRunner()


@pytest.fixture
def web(tmp_path: Path, sample_table: pa.Table) -> tuple[str, Path]:
    return make_dataset(tmp_path, sample_table.slice(0, 400))


def test_plan_shows_the_destination_readiness(web: tuple[str, Path], s3_storage: StorageRoot) -> None:
    registry, _ = web
    plan = dsm.plan_cutover(
        "web@prod", to=s3_storage.join("web"), registry=registry, storage_options=s3_storage.options,
        measure_seconds=0.05, shadow_duration=0.05,
    )  # fmt: skip
    assert plan.ok, plan.problems
    checks = {c["name"]: c for c in plan.readiness["checks"]}
    assert set(checks) == set(storage_check_command.CHECKS)
    assert checks["compare-and-swap"]["status"] == "pass" and checks["encryption"]["status"] == "fail"
    assert {n for n, c in checks.items() if c["required"]} == {
        "write", "read", "list", "delete", "read-after-write", "list-after-write"
    }  # fmt: skip
    assert plan.readiness["scratch"]["clean"] is True
    measured = plan.measured
    assert measured is not None and measured.destination_workers > 0
    assert measured.destination_write_bytes_per_s == checks["throughput"]["evidence"]["put_bytes_per_s"]
    assert plan.estimate is not None and any("dsm storage check measured" in n for n in plan.estimate.notes)
    options = [a for k, v in s3_storage.options.items() for a in ("--storage-option", f"{k}={v}")]
    args = ["cutover", "plan", "web@prod", "--to", s3_storage.join("web2"), *FAST_CLI[:4], *options]
    out = runner.invoke(app, [*args, "--registry", registry], terminal_width=220)
    assert out.exit_code == 0, out.output
    assert "destination readiness (s3)" in out.stdout and "compare-and-swap" in out.stdout


def test_a_required_check_that_fails_stops_the_plan_unless_skipped(
    web: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, _ = web

    def stale_reads(run: Any, wanted: set[str]) -> None:  # a store that serves stale reads
        run.findings["read-after-write"] = Finding(
            check="read-after-write", status="fail", detail="a read right after the write returned old bytes"
        )
        run.findings["list-after-write"] = Finding(check="list-after-write", status="pass", detail="listed")

    monkeypatch.setattr(storage_check_command, "check_consistency", stale_reads)
    dest = str(tmp_path / "new")
    plan = dsm.plan_cutover(
        "web@prod", to=dest, registry=registry, **{k: FAST[k] for k in ("measure_seconds",)}
    )
    assert not plan.ok
    (problem,) = plan.problems
    assert (
        problem.startswith("readiness check read-after-write")
        and "--skip-readiness read-after-write" in problem
    )
    started = dsm.start_cutover("web@prod", to=dest, run=True, registry=registry, **FAST)
    assert not started.ok and started.state.stage("plan").status == "failed"
    assert started.state.stage("copy").status == "pending"
    dsm.rollback_cutover(started.id, registry=registry)

    skipped = dsm.plan_cutover(
        "web@prod", to=dest, skip_readiness=["consistency"], registry=registry, measure_seconds=0.05
    )
    assert skipped.ok and skipped.readiness["skipped"] == ["read-after-write", "list-after-write"]
    args = ["cutover", "start", "web@prod", "--to", dest, "--run", *FAST_CLI]
    out = runner.invoke(
        app, [*args, "--skip-readiness", "read-after-write", "--registry", registry, "--json"]
    )
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert body["phase"] == "completed"
    plan_evidence = body["state"]["stages"][0]["evidence"]
    assert plan_evidence["readiness"]["skipped"] == ["read-after-write"]
    with pytest.raises(InputError, match="--skip-readiness 'fast' is not a readiness check"):
        dsm.plan_cutover("web@prod", to=str(tmp_path / "other"), skip_readiness=["fast"], registry=registry)


def test_the_estimate_uses_the_destination_probe() -> None:
    base: dict[str, Any] = {
        "read_bytes_per_s": 1e9,
        "sample_rows": 10,
        "sample_source_bytes": 1000,
        "sample_target_bytes": 1000,
        "decode_seconds": 1e-6,
        "encode_seconds": 1e-6,
        "fingerprint_seconds": 1e-6,
        "write_seconds": 1e-6,  # 1 GB/s from the sample
    }
    common: dict[str, Any] = {
        "source_sizes": [10**9],
        "target_sizes": [10**9],
        "source_protocol": "file",
        "target_protocol": "s3",
        "prices": load_prices(),
        "workers": 4,
    }
    sampled = estimate(measured=Measurements(**base), **common)
    probed = estimate(
        measured=Measurements(
            **base, destination_write_bytes_per_s=4e7, destination_read_bytes_per_s=8e7, destination_workers=4
        ),
        **common,
    )
    # 10 MB/s written and 20 MB/s read per worker: one 1 GB file (one worker) writes 100 s, reads back 50 s.
    assert probed.seconds["copy"] - sampled.seconds["copy"] == pytest.approx(100 + 50 - 1 - 1, rel=1e-3)
    assert probed.seconds["verify"] - sampled.seconds["verify"] == pytest.approx(50 - 1, rel=1e-3)
