"""Start-up of the ``dsm`` command: whole processes, against bare ``python -c pass`` in the same run.

    python benchmarks/startup.py [--runs 21] [--dir DIR] [--baseline CHECKOUT]

Each round runs, one after the other, ``python -c pass``, ``dsm --help``, ``dsm ls`` and a bytes-only
``dsm verify`` of a tiny registered dataset (one Parquet shard of three rows); rounds repeat ``--runs``
times and the medians of wall time and CPU-seconds (user + system of the child) are reported, with the
load average. Targets on a quiet machine: ``--help`` 0.2 s, ``ls`` 0.25 s, tiny ``verify`` 0.3 s (bare
Python 0.03 s). On a loaded machine wall time measures the queue more than dsm; CPU-seconds do not.
``--baseline`` also runs the same commands from another checkout of dsm (``python -m dsm`` with that
checkout first on the path) in the same rounds, so a change is measured against what it changes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import as_installed

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"dsm --help": 0.2, "dsm ls": 0.25, "dsm verify (bytes, tiny)": 0.3}


def dsm_command() -> list[str]:
    """The console script beside this Python (what users run), else ``python -m dsm``."""
    script = Path(sys.executable).with_name("dsm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dsm"]


def make_tiny(folder: Path) -> str:
    """A registered dataset of one three-row Parquet shard; returns the registry."""
    registry = folder / "registry"
    if not (registry / "tiny").exists():
        sys.path.insert(0, str(ROOT))
        import pyarrow as pa
        import pyarrow.parquet as pq

        import dsm

        data = folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": [1, 2, 3], "text": ["a", "b", "c"]}), data / "part-00000.parquet")
        dsm.register(str(data), name="tiny", registry=str(registry))
    return str(registry)


def run(command: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and CPU-seconds of one run of ``command`` (output discarded; a failure stops us)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    program = shutil.which(command[0]) or command[0]
    start = time.perf_counter()
    pid = os.posix_spawn(
        program,
        list(command),
        env if env is not None else dict(os.environ),
        file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)],
    )
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--dir", type=Path, default=ROOT / "bench-data" / "startup")
    parser.add_argument("--baseline", type=Path, help="another checkout of dsm to run the same commands from")
    args = parser.parse_args()
    as_installed()
    registry = make_tiny(args.dir)
    dsm = dsm_command()
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "dsm --help": [*dsm, "--help"],
        "dsm ls": [*dsm, "ls", "--registry", registry],
        "dsm verify (bytes, tiny)": [*dsm, "verify", "tiny", "--registry", registry],
    }
    envs: dict[str, dict[str, str] | None] = dict.fromkeys(commands)
    if args.baseline is not None:
        env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve())}
        for name in list(TARGETS):
            # -P: not the current folder first on the path (it may be this checkout)
            commands[f"{name} (baseline)"] = [sys.executable, "-P", "-m", "dsm", *commands[name][len(dsm) :]]
            envs[f"{name} (baseline)"] = env
    for name, command in commands.items():  # warm the page cache and the bytecode
        run(command, envs[name])
    load = os.getloadavg()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            times[name].append(run(command, envs[name]))
    med = statistics.median
    bare_wall = med(w for w, _ in times["python -c pass"])
    loads = " ".join(f"{x:.2f}" for x in load), " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.runs} alternating rounds; load average {loads[0]} at start, {loads[1]} at end")
    print()
    print("| command | wall (median) | CPU-s (median) | wall / bare Python | target (quiet machine) |")
    print("|---|---|---|---|---|")
    for name, samples in times.items():
        wall, cpu = med(w for w, _ in samples), med(c for _, c in samples)
        target = f"{TARGETS[name]:.2f} s" if name in TARGETS else ("-" if "baseline" in name else "0.03 s")
        print(f"| `{name}` | {wall:.3f} s | {cpu:.3f} s | {wall / bare_wall:.1f}x | {target} |")


if __name__ == "__main__":
    main()
