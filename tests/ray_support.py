"""Ray for the tests: one local Ray per test session, shared by every test that runs the ray engine.

``ray_cluster`` starts it once (``ray.init(address="local", num_cpus=2, include_dashboard=False)``: a new
instance of this session's own, never a cluster some other process started on the machine), with its
files in a short temporary folder of its own (Unix socket paths have a length limit) whose logs the
secrets test searches, and shuts it down at the end. Tests that run dsm in another process reach it by
``RayCluster.address``. Starting more Ray processes (a second node, an external head) is for the few tests
that are about exactly that.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["RayCluster", "free_port", "ray_log_texts", "stop_process_group", "wait_for_port"]


@dataclass(frozen=True)
class RayCluster:
    address: str
    temp_dir: Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ray_log_texts(root: Path) -> list[str]:
    """Every log file Ray wrote under ``root`` (all its processes, every node), as text."""
    texts = []
    for path in root.rglob("*"):
        if path.is_file() and "logs" in path.parts and path.suffix in (".log", ".out", ".err", ""):
            try:
                texts.append(path.read_text(errors="replace"))
            except OSError:
                continue
    return texts


def stop_process_group(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Stop a process this test started in a session of its own, and everything it started."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, 9)  # its session: the processes it started and nothing else
    proc.wait(timeout=timeout)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """The session's local Ray (2 CPUs), connected in this process."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (make test installs dsm[ray])")
    temp = Path(tempfile.mkdtemp(prefix="dsm-ray-"))
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=256 << 20,  # the tests' data is small; the machine is shared
        _temp_dir=str(temp),
    )
    try:
        yield RayCluster(address=str(ray.get_runtime_context().gcs_address), temp_dir=temp)
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Wait until something listens on the loopback ``port`` (or ``proc`` ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on port {port} (the process ended with {proc.poll()})")


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _ready_on_every_node(ray: Any) -> None:
    """Run one task pinned to each alive node, so that each has a worker up and the driver's scheduler has
    seen it take work: a node that joined a moment ago can be missing from the head's view of the cluster
    for a while on a loaded machine, and every unit would then run on the head."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=1)(_node_id)
    nodes = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    pinned = [
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        for node in nodes
    ]
    assert sorted(ray.get(pinned, timeout=240)) == sorted(nodes)


def _two_nodes(registry: str, dest: str) -> None:
    """``python -m tests.ray_support two-nodes REGISTRY DEST``: a reshard on a simulated cluster of two
    nodes (``ray.cluster_utils.Cluster``: a head and a second node, one CPU each, processes of this
    machine); prints the result as JSON and stops the cluster."""
    import ray
    from ray.cluster_utils import Cluster

    from dsm.commands.rewrite import reshard

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        _ready_on_every_node(ray)
        result = reshard("web@1", dest, num_shards=6, registry=registry, engine="ray")
        print(json.dumps(result.to_dict()))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    if sys.argv[1:2] == ["two-nodes"]:
        _two_nodes(*sys.argv[2:4])
