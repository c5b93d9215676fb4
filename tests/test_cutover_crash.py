"""``kill -9`` in the middle of a cutover (copy, verify, right after the switch), then ``dsm cutover resume``:
the same result as a run that was never interrupted. The CLI runs as a subprocess that SIGKILLs itself at
the point ``DSM_TEST_KILL_AT`` names (see dsm/_testing.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dsm
from dsm.commands.cutover import cutover_status, start_cutover
from dsm.registry import Registry

from .cutover_support import FAST, FAST_CLI, journal_records, make_dataset


def _dsm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsm", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _outcome(registry: str) -> dict[str, Any]:
    target = dsm.show("web@prod", registry=registry)
    return {
        "alias": Registry(registry).aliases("web")["prod"],
        "shards": [(s.path, s.bytes, s.checksum, s.fingerprint) for s in target.shards],
        "fingerprint": target.fingerprint,
        "old_status": dsm.show("web@1", registry=registry).status,
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, sample_table: pa.Table) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("uninterrupted")
    registry, _ = make_dataset(tmp, sample_table.slice(0, 600))
    report = start_cutover(
        "web@prod", to=str(tmp / "out"), format="jsonl", run=True, registry=registry, **FAST
    )
    assert report.ok
    return _outcome(registry)


@pytest.mark.parametrize("kill_at", ["copy:2", "verify", "switch"])
def test_kill_9_then_resume_gives_the_uninterrupted_result(
    tmp_path: Path, sample_table: pa.Table, uninterrupted: dict[str, Any], kill_at: str
) -> None:
    registry, _ = make_dataset(tmp_path, sample_table.slice(0, 600))
    killed = _dsm(
        "cutover", "start", "web@prod", "--to", str(tmp_path / "out"), "--format", "jsonl", "--run",
        *FAST_CLI, "--registry", registry, env={"DSM_TEST_KILL_AT": kill_at},
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (cutover_id,) = [p.name for p in (Path(registry) / "web" / "cutovers").iterdir()]
    stage = kill_at.split(":")[0]
    state = cutover_status(cutover_id, registry=registry).state
    assert state.phase == "running" and state.stage(stage).status == "running"
    # readers of the alias never saw an unverified target; after the switch's kill the alias had moved
    assert Registry(registry).aliases("web")["prod"] == (2 if stage == "switch" else 1)

    resumed = _dsm("cutover", "resume", cutover_id, "--force", "--registry", registry, "--json")
    assert resumed.returncode == 0, resumed.stderr
    body = json.loads(resumed.stdout)
    assert body["phase"] == "completed" and body["ran"][0] == stage
    assert "broke the lease of" in resumed.stderr
    assert _outcome(registry) == uninterrupted
    records = journal_records(registry, "web", cutover_id)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    finished = [r["stage"] for r in records if r["event"] == "stage_finished"]
    assert finished == ["plan", "copy", "verify", "shadow", "switch", "complete"]
    if stage == "copy":
        copy = next(r for r in records if r["event"] == "stage_finished" and r["stage"] == "copy")
        assert copy["evidence"]["units_resumed"] == 2 and copy["evidence"]["units_written"] == 2
    if stage == "switch":
        switch = next(r for r in records if r["event"] == "stage_finished" and r["stage"] == "switch")
        assert switch["evidence"]["moved"] is False and "previous run" in switch["evidence"]["note"]


def test_a_dead_holders_lease_is_taken_over_once_it_expires(tmp_path: Path, sample_table: pa.Table) -> None:
    registry, _ = make_dataset(tmp_path, sample_table.slice(0, 300), shards=2)
    killed = _dsm(
        "cutover", "start", "web@prod", "--to", str(tmp_path / "out"), "--run", "--lease-seconds", "1",
        *FAST_CLI, "--registry", registry, env={"DSM_TEST_KILL_AT": "verify"},
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    (cutover_id,) = [p.name for p in (Path(registry) / "web" / "cutovers").iterdir()]
    status = cutover_status(cutover_id, registry=registry)
    assert any("is not running on this host" in n for n in status.notes) or not status.lease_held
    for _ in range(100):  # wait for the one-second lease to run out (no assertion on time)
        if not cutover_status(cutover_id, registry=registry).lease_held:
            break
        time.sleep(0.05)
    resumed = _dsm("cutover", "resume", cutover_id, "--registry", registry)
    assert resumed.returncode == 0, resumed.stderr
    assert "(expired)" in resumed.stderr and Registry(registry).aliases("web")["prod"] == 2
    broken = [r for r in journal_records(registry, "web", cutover_id) if r["event"] == "lease_broken"]
    assert broken[0]["evidence"]["why"] == "expired"
