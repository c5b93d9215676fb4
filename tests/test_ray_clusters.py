"""The ray engine on more than one local Ray: a simulated cluster of two nodes, and an external cluster
started with ``ray start`` and reached by its address. Both give the local engine's bytes.

Each starts Ray processes of its own in a session of its own (stopped by its process id, never by name)
with their files in a temporary folder of its own, so nothing else on the machine finds or joins them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from dsm.commands.register import register
from dsm.commands.rewrite import reshard
from dsm.storage import TEMP_MARKER

from .conftest import write_parquet_shards
from .ray_support import free_port, stop_process_group, wait_for_port

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def dataset(tmp_path: Path, sample_table: pa.Table) -> tuple[str, Path, dict[str, bytes]]:
    """A registered dataset and the files the local engine writes when it reshards it in 6."""
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "src", sample_table, 3)
    register(str(tmp_path / "src"), name="web", registry=registry)
    reshard("web@1", str(tmp_path / "local"), num_shards=6, registry=registry, engine="local")
    expected = {p.name: p.read_bytes() for p in (tmp_path / "local").glob("part-*")}
    assert len(expected) == 6
    return registry, tmp_path, expected


def _written(folder: Path) -> dict[str, bytes]:
    assert not [p for p in folder.rglob("*") if TEMP_MARKER in p.name]
    return {p.name: p.read_bytes() for p in folder.glob("part-*")}


def _own_ray_env(temp: str) -> dict[str, str]:
    # RAY_TMPDIR: the cluster's files, and the "latest cluster" file plain ray.init() reads, stay in `temp`
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "DSM_ENGINE")}
    return {**env, "RAY_TMPDIR": temp, "RAY_USAGE_STATS_ENABLED": "0"}


def test_a_reshard_on_two_nodes_gives_the_local_engines_bytes(
    dataset: tuple[str, Path, dict[str, bytes]],
) -> None:
    registry, tmp, expected = dataset
    temp = tempfile.mkdtemp(prefix="dsm-ray2-")
    done = subprocess.run(
        [sys.executable, "-m", "tests.ray_support", "two-nodes", registry, str(tmp / "two-nodes")],
        cwd=ROOT,
        env=_own_ray_env(temp),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["engine"]["engine"] == "ray"
    assert result["engine"]["nodes"] == 2 and result["engine"]["cpus"] == 2  # units ran on both nodes
    assert result["engine"]["retries"] == 0
    assert _written(tmp / "two-nodes") == expected


def test_an_external_cluster_reached_by_address_gives_the_local_engines_bytes(
    dataset: tuple[str, Path, dict[str, bytes]],
) -> None:
    registry, tmp, expected = dataset
    temp = tempfile.mkdtemp(prefix="dsm-rayx-")
    port = free_port()
    ray_cli = str(Path(sys.executable).parent / "ray")
    start = ["start", "--head", "--num-cpus", "2", "--port", str(port), "--include-dashboard", "false"]
    head = subprocess.Popen(
        [ray_cli, *start, "--temp-dir", temp, "--disable-usage-stats", "--block"],
        env=_own_ray_env(temp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, head)
        job = ["reshard", "web@1", str(tmp / "external"), "--num-shards", "6", "--registry", registry]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "dsm",
                *job,
                "--engine",
                "ray",
                "--ray-address",
                f"127.0.0.1:{port}",
                "--json",
            ],
            # Ray sends its token (~/.ray/auth_token, made by `ray start`) to an explicit address only so
            env={**_own_ray_env(temp), "RAY_AUTH_MODE": "token"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop_process_group(head)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # stdout is the one JSON document, whatever Ray printed
    assert result["engine"]["engine"] == "ray" and result["engine"]["address"].endswith(f":{port}")
    assert result["engine"]["nodes"] == 1 and result["engine"]["cpus"] == 2
    assert _written(tmp / "external") == expected


def test_a_ray_that_cannot_start_is_exit_3_with_one_line_not_a_traceback(
    dataset: tuple[str, Path, dict[str, bytes]],
) -> None:
    registry, tmp, _ = dataset
    too_long = tmp / ("x" * 120)  # Ray's Unix sockets under it cannot have a path that long
    too_long.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "dsm", "verify", "web@1", "--registry", registry, "--engine", "ray"],
        env={**_own_ray_env(str(too_long)), "RAY_ADDRESS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert "error: cannot start a local Ray for this command" in done.stderr
    assert "Traceback" not in done.stderr
