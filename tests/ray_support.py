"""Ray for the tests: one local Ray per test session, shared by every test that runs the ray engine.

``ray_cluster`` starts it once (``ray.init(address="local", num_cpus=2, include_dashboard=False)``: a new
instance of this session's own, never a cluster some other process started on the machine), with its
files in a short temporary folder of its own (Unix socket paths have a length limit) whose logs the
secrets test searches, and shuts it down at the end. Tests that run dsm in another process reach it by
``RayCluster.address``. Starting more Ray processes (a second node, an external head) is for the few tests
that are about exactly that.
"""

from __future__ import annotations

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

import pytest

__all__ = ["RayCluster", "free_port", "ray_log_texts", "stop_process_group"]


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
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, 9)  # its session: the processes it started and nothing else
    except (ProcessLookupError, PermissionError):
        pass
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
        _temp_dir=str(temp),
    )
    try:
        yield RayCluster(address=str(ray.get_runtime_context().gcs_address), temp_dir=temp)
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def dsm_command(*args: str) -> list[str]:
    """The dsm CLI as a command line for another process."""
    return [sys.executable, "-m", "dsm", *args]


def wait_for(predicate: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")
