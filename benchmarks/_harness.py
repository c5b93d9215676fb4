"""Timing whole processes against a peer in the same run: alternate A and B, report medians and the ratio."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Comparison", "compare", "run_timed"]


@dataclass(frozen=True)
class Comparison:
    name: str
    ours: list[float]
    peer: list[float]
    ours_rss_mb: float
    peer_rss_mb: float

    @property
    def ratio(self) -> float:
        return statistics.median(a / b for a, b in zip(self.ours, self.peer, strict=True))

    def row(self) -> str:
        return (
            f"| {self.name} | {statistics.median(self.ours):.2f} s | {statistics.median(self.peer):.2f} s "
            f"| {self.ratio:.2f}x | {self.ours_rss_mb:.0f} MB | {self.peer_rss_mb:.0f} MB |"
        )


HEADER = (
    "| job | dsm (median) | peer (median) | ratio dsm/peer | dsm peak RSS | peer peak RSS |\n"
    "|---|---|---|---|---|---|"
)


def run_timed(command: Sequence[str]) -> float:
    """Wall seconds of one run of ``command``; fails loudly on a non-zero exit."""
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return wall


def peak_rss_mb(command: Sequence[str]) -> float:
    """Peak RSS (MB) of one run: the kernel's accounting of that child alone (spawned, not forked, so
    the parent's memory is not counted)."""
    import os
    import shutil

    devnull = os.open(os.devnull, os.O_WRONLY)
    program = shutil.which(command[0]) or command[0]
    pid = os.posix_spawn(
        program,
        list(command),
        dict(os.environ),
        file_actions=[
            (os.POSIX_SPAWN_DUP2, devnull, 1),
            (os.POSIX_SPAWN_DUP2, devnull, 2),
        ],
    )
    os.close(devnull)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    return usage.ru_maxrss / 1024


def compare(
    name: str, ours: Sequence[str], peer: Sequence[str], *, runs: int = 5, warmup: int = 1
) -> Comparison:
    """Run ``ours`` and ``peer`` alternately (after ``warmup`` runs of each); walls per pair and peak RSS."""
    for _ in range(warmup):
        run_timed(ours)
        run_timed(peer)
    ours_walls, peer_walls = [], []
    for _ in range(runs):
        ours_walls.append(run_timed(ours))
        peer_walls.append(run_timed(peer))
    return Comparison(name, ours_walls, peer_walls, peak_rss_mb(ours), peak_rss_mb(peer))
