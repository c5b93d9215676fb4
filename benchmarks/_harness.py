"""Timing whole processes against a peer in the same run: alternate A and B, report medians and the ratio.

Wall seconds and CPU seconds (user + system of the process and every child it waited for, from the
kernel's accounting) are both kept: where dsm and its peer use the cores differently, the CPU ratio says
how much work each did, the wall ratio how long a user waits.

A benchmark calls :func:`as_installed` first, so that a dsm command is timed as it runs where it is
installed (its bytecode cached).
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Comparison", "ProcessRun", "as_installed", "compare", "run_measured", "run_timed", "run_verbose"]


def as_installed() -> None:
    """Let child processes write and use ``__pycache__`` (``PYTHONDONTWRITEBYTECODE`` is dropped from the
    environment): where it is set, every dsm process compiles the modules it imports from source again,
    about 0.07 s a process that an installed dsm does not pay, and bare Python or a compiled peer never
    pays."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@dataclass(frozen=True)
class Comparison:
    name: str
    ours: list[float]
    peer: list[float]
    ours_rss_mb: float
    peer_rss_mb: float
    ours_cpu: list[float]
    peer_cpu: list[float]

    @property
    def ratio(self) -> float:
        return statistics.median(a / b for a, b in zip(self.ours, self.peer, strict=True))

    @property
    def cpu_ratio(self) -> float:
        return statistics.median(a / b for a, b in zip(self.ours_cpu, self.peer_cpu, strict=True))

    def row(self) -> str:
        return (
            f"| {self.name} | {statistics.median(self.ours):.2f} s | {statistics.median(self.peer):.2f} s "
            f"| {self.ratio:.2f}x | {statistics.median(self.ours_cpu):.2f} s "
            f"| {statistics.median(self.peer_cpu):.2f} s | {self.cpu_ratio:.2f}x "
            f"| {self.ours_rss_mb:.0f} MB | {self.peer_rss_mb:.0f} MB |"
        )


HEADER = (
    "| job | dsm wall | peer wall | wall dsm/peer | dsm CPU | peer CPU | CPU dsm/peer | dsm peak RSS "
    "| peer peak RSS |\n|---|---|---|---|---|---|---|---|---|"
)


def run_measured(command: Sequence[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, children included) of one run; fails loudly on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run_timed(command: Sequence[str]) -> float:
    """Wall seconds of one run of ``command``; fails loudly on a non-zero exit."""
    return run_measured(command)[0]


@dataclass(frozen=True)
class ProcessRun:
    wall: float
    cpu: float
    rss_mb: float
    stdout: str


def run_verbose(command: Sequence[str], env: dict[str, str] | None = None) -> ProcessRun:
    """Wall seconds, CPU seconds (user + system), peak RSS (``/usr/bin/time -v``) and stdout of one run of a
    command that writes files; its failure stops the benchmark.

    Dirty pages are written out first (``sync``, untimed). Else a run pays for the writeback of the files
    the run before it wrote: the shuffled reshard of the 1 GB numeric corpus took 21.2 and 22.6 s (12.4 and
    14.2 system CPU-s) right after 3 GB were written, 17.2 and 18.3 s (7.5 and 5.7) after a sync, and a
    benchmark that alternates two tools would charge each one for the other's output."""
    os.sync()
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )

    def field(label: str) -> float:
        match = re.search(rf"{label}: ([\d.]+)", done.stderr)
        if match is None:
            raise SystemExit(f"/usr/bin/time printed no {label!r} for {' '.join(command)}")
        return float(match.group(1))

    return ProcessRun(
        wall=wall,
        cpu=field(r"User time \(seconds\)") + field(r"System time \(seconds\)"),
        rss_mb=field(r"Maximum resident set size \(kbytes\)") / 1024,
        stdout=done.stdout,
    )


def peak_rss_mb(command: Sequence[str]) -> float:
    """Peak RSS (MB) of one run, by ``/usr/bin/time``: the largest of the command and the children it
    waited for (a child spawned straight from this process would inherit this process's high-water mark)."""
    timed = ["/usr/bin/time", "-f", "%M", *command]
    done = subprocess.run(timed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    return int(done.stderr.decode().strip().splitlines()[-1]) / 1024


def compare(
    name: str,
    ours: Sequence[str],
    peer: Sequence[str],
    *,
    runs: int = 5,
    warmup: int = 1,
    before_ours: Callable[[], None] | None = None,
) -> Comparison:
    """Run ``ours`` and ``peer`` alternately (after ``warmup`` runs of each); walls, CPU and peak RSS.

    ``before_ours`` runs (untimed) before every run of ``ours``, to reset what it changes.
    """
    prepare = before_ours or (lambda: None)
    for _ in range(warmup):
        prepare()
        run_measured(ours)
        run_measured(peer)
    ours_runs, peer_runs = [], []
    for _ in range(runs):
        prepare()
        ours_runs.append(run_measured(ours))
        peer_runs.append(run_measured(peer))
    prepare()
    ours_rss = peak_rss_mb(ours)
    return Comparison(
        name,
        [w for w, _ in ours_runs],
        [w for w, _ in peer_runs],
        ours_rss,
        peak_rss_mb(peer),
        [c for _, c in ours_runs],
        [c for _, c in peer_runs],
    )
