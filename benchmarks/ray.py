"""Ray benchmark: the rewrite corpus resharded on ``--engine local`` and on ``--engine ray``, in one run.

The corpus is benchmarks/rewrite.py's (text-heavy Parquet, zstd, 128 MB shards; made once under
bench-data/). Each job runs as a dsm subprocess on both engines, alternately, on the same 2 cores:

- local: ``--engine local --workers 2`` (the engine's threads);
- ray: a Ray head started once for the benchmark (``ray start --head --num-cpus 2 --block``; its start-up is
  timed and reported apart), reached by ``--ray-address``. The driver's time to connect (the result's
  ``engine.startup_seconds``) is reported apart too and left out of the ray job's time. Each job's Ray
  workers are new processes (Ray's workers belong to one driver): their start is part of the job.

Reported per job and size: medians of the alternating runs, Ray's overhead as the median of the per-pair
ratios (target: at most 1.3x), CPU-seconds (local: the dsm process; ray: the driver plus every process of
the Ray head, workers included), the driver's peak RSS (target: under 500 MB and flat in the dataset's
size) and the largest Ray worker's peak RSS. The output of the last pair is compared file by file: the bytes
must be the same.

    .venv/bin/python benchmarks/ray.py                       # 0.5 and 1.0 GB, 3 pairs per job
    .venv/bin/python benchmarks/ray.py --sizes 0.1 --repeat 1

(This script is named as the issue asks; it never imports Ray itself: in this file's folder ``import ray``
would find this file. Ray runs in the processes it starts.)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from _harness import run_verbose
from rewrite import make_corpus  # the same corpus as benchmarks/rewrite.py

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DSM = str(BIN / "dsm")
RAY = str(BIN / "ray")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mb: float
    connect: float = 0.0
    worker_rss_mb: float = 0.0

    @property
    def job(self) -> float:
        """The job's wall time, without the driver's time to reach Ray."""
        return self.wall - self.connect


def _session_processes(sid: int) -> dict[int, list[str]]:
    """pid -> the fields of /proc/PID/stat after the command name, for every process of session ``sid``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat (after pid and comm): the session id
            found[int(entry)] = fields
    return found


def _cpu(fields: list[str]) -> float:
    return sum(int(v) for v in fields[11:13]) / TICKS  # utime + stime


class ClusterSampler:
    """CPU-seconds of every process of the Ray head's session during a run, and the highest peak RSS of a
    Ray worker (``ray::...`` processes), sampled every 0.1 s: workers exit with their driver and the raylet
    does not collect their times, so they are read while they live."""

    def __init__(self, sid: int) -> None:
        self.sid, self.peak_kb, self._stop = sid, 0, threading.Event()
        self._baseline = {pid: _cpu(f) for pid, f in _session_processes(sid).items()}
        self._last: dict[int, float] = dict(self._baseline)
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @property
    def cpu(self) -> float:
        return sum(v - self._baseline.get(pid, 0.0) for pid, v in self._last.items())

    def _once(self) -> None:
        for pid, fields in _session_processes(self.sid).items():
            self._last[pid] = _cpu(fields)
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            found = re.search(r"VmHWM:\s+(\d+)", status)
            if found and cmdline.startswith(b"ray::") and b"Agent" not in cmdline:
                self.peak_kb = max(self.peak_kb, int(found.group(1)))

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self._once()

    def __enter__(self) -> ClusterSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._once()


def timed(command: list[str], env: dict[str, str]) -> tuple[Run, str]:
    """Wall time, CPU-seconds and peak RSS of one dsm run, after a sync; its stdout."""
    run = run_verbose(command, env)
    return Run(wall=run.wall, cpu=run.cpu, rss_mb=run.rss_mb), run.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_head(temp: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int, float]:
    """A Ray head of 2 CPUs in a session of its own; its port and seconds until it accepts connections."""
    port = free_port()
    start = time.perf_counter()
    options = ["--num-cpus", "2", "--port", str(port), "--include-dashboard", "false", "--temp-dir", temp]
    head = subprocess.Popen(
        [RAY, "start", "--head", *options, "--disable-usage-stats", "--block"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while head.poll() is None:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return head, port, time.perf_counter() - start
        time.sleep(0.1)
    raise SystemExit(f"ray start exited {head.returncode}")


def stop_head(head: subprocess.Popen[bytes]) -> None:
    head.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        head.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, 9)  # the head's own session: what it started, nothing else


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("part-*"))}


def bench_size(
    work: Path, size_gb: float, registry: str, repeat: int, port: int, sid: int, env: dict[str, str]
) -> list[tuple[str, float, Run, Run, float]]:
    data = ROOT / "bench-data" / f"corpus-{size_gb:g}gb"
    if not data.exists():
        print(f"making {size_gb:g} GB of Parquet under {data} ...", file=sys.stderr)
        make_corpus(data, int(size_gb * 1e9))
    source_bytes = sum(p.stat().st_size for p in data.glob("*.parquet"))
    name = f"corpus-{str(size_gb).replace('.', '_')}"
    subprocess.run(
        [DSM, "register", str(data), "--name", name, "--registry", registry], check=True, capture_output=True
    )
    jobs = [
        ("reshard parquet->parquet zstd (8 files)", ["--num-shards", "8", "--compression", "zstd"]),
        ("shuffled reshard (seed 7, 8 files)", ["--num-shards", "8", "--shuffle", "--seed", "7"]),
    ]
    engines = {
        "local": ["--engine", "local", "--workers", "2"],
        "ray": ["--engine", "ray", "--ray-address", f"127.0.0.1:{port}"],
    }
    rows = []
    for label, options in jobs:
        runs: dict[str, list[Run]] = {"local": [], "ray": []}
        for attempt in range(repeat + 1):  # the first pair warms the page cache and is not counted
            for engine, flags in engines.items():
                dest = work / f"{name}-{engine}"
                shutil.rmtree(dest, ignore_errors=True)
                command = [DSM, "reshard", f"{name}@1", str(dest), *options, *flags]
                command += ["--name", f"{name}-{engine}", "--registry", registry, "--json"]
                with ClusterSampler(sid) as cluster:
                    run, out = timed(command, env)
                if engine == "ray":
                    run.cpu += cluster.cpu
                    run.connect = float(json.loads(out)["engine"]["startup_seconds"])
                    run.worker_rss_mb = cluster.peak_kb / 1024
                if attempt:
                    runs[engine].append(run)
        same = digests(work / f"{name}-local") == digests(work / f"{name}-ray")
        if not same:
            raise SystemExit(f"{label}: the two engines wrote different bytes")
        pairs = zip(runs["ray"], runs["local"], strict=True)
        ratio = statistics.median(ray_run.job / local_run.wall for ray_run, local_run in pairs)
        local, ray = _median(runs["local"]), _median(runs["ray"])
        rows.append((label, source_bytes / 1e9, local, ray, ratio))
        print(f"  {label} {size_gb:g} GB: local {local.wall:.1f}s, ray {ray.job:.1f}s", file=sys.stderr)
    return rows


def _median(runs: list[Run]) -> Run:
    return Run(
        wall=statistics.median(r.wall for r in runs),
        cpu=statistics.median(r.cpu for r in runs),
        rss_mb=max(r.rss_mb for r in runs),
        connect=statistics.median(r.connect for r in runs),
        worker_rss_mb=max(r.worker_rss_mb for r in runs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="0.5,1.0", help="corpus sizes in GB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="counted pairs of runs per job")
    parser.add_argument("--work", default=str(ROOT / "bench-data" / "ray-runs"), help="scratch folder")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    registry = str(work / "registry")
    temp = tempfile.mkdtemp(prefix="dsm-ray-bench-")
    # Ray's files (and the "latest cluster" file a plain ray.init() reads) stay in this run's folder; the
    # drivers send the head's token (~/.ray/auth_token) to its address only with RAY_AUTH_MODE=token.
    env = {**os.environ, "RAY_TMPDIR": temp, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    env.pop("DSM_ENGINE", None)
    head, port, startup = start_head(temp, env)
    try:
        sid = os.getsid(head.pid)
        rows = []
        for size in [float(s) for s in args.sizes.split(",")]:
            rows += bench_size(work, size, registry, args.repeat, port, sid, env)
    finally:
        stop_head(head)
        shutil.rmtree(temp, ignore_errors=True)
    load = os.getloadavg()
    print(
        f"\n{os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; data in the "
        f"page cache; median of {args.repeat} alternating pairs after one warm-up pair. Ray start-up "
        f"(`ray start --head --num-cpus 2` until it accepts connections): {startup:.1f} s, not counted.\n"
    )
    print(
        "| job | source GB | local s | ray s | ray / local | ray: driver connect s | local CPU-s | "
        "ray CPU-s (driver + cluster) | driver peak RSS MB (local / ray) | Ray worker peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, gb, local, ray, ratio in rows:
        print(
            f"| {label} | {gb:.2f} | {local.wall:.1f} | {ray.job:.1f} | {ratio:.2f}x | {ray.connect:.2f} | "
            f"{local.cpu:.1f} | {ray.cpu:.1f} | {local.rss_mb:.0f} / {ray.rss_mb:.0f} "
            f"| {ray.worker_rss_mb:.0f} |"
        )


if __name__ == "__main__":
    main()
