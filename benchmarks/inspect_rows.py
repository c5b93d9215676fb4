"""Inspect benchmark: ``dsm head`` and ``dsm find --row`` near the end of a ~1 GB text-heavy Parquet corpus as
whole processes, and ``dsm diff --rows`` against DuckDB's full outer join of the same files.

Makes the corpus with the generator of ``benchmarks/rewrite.py`` (id, url, a text of 300-1,200 bytes, three
numeric fields and a timestamp; zstd, 128 MB shards, row groups of 16,384 rows: about 4.5 M rows in 1 GB), a
copy with 1% of rows changed (``quality`` + 1, spread over every row group, so no shard is skipped by its
fingerprint), registers both with key ``id`` and reads every file once so that they are in the page cache.
Then, each job a subprocess (start-up included), run alternately with its peer:

1. ``dsm head REF --offset N-10 -n 10``; peer: a Python process reading the same row group with pyarrow.
   Target: under 0.5 s wall.
2. ``dsm find REF --row N-5``; same peer. Target: under 0.5 s wall.
3. ``dsm diff OLD NEW --rows --key id --json``; peer: DuckDB (its default settings: every core, memory up to
   80% of RAM) running ``FULL OUTER JOIN .. ON id`` with ``IS DISTINCT FROM`` on every other column, counting
   added, removed and changed rows. The counts of both are checked equal. Targets: at most 1.5x DuckDB's wall
   time, dsm's peak RSS under 1 GiB.

Wall seconds come from a clock around each run, CPU seconds (user + system) and peak RSS from GNU time
(``/usr/bin/time``, Debian package ``time``); the report gives medians and the median of the per-pair ratios.

    .venv/bin/python benchmarks/inspect_rows.py              # 1 GB under bench-data/inspect
    .venv/bin/python benchmarks/inspect_rows.py --size 0.1 --runs 3  # a quick run
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("rewrite_benchmark", os.path.join(_HERE, "rewrite.py"))
if _spec is None or _spec.loader is None:
    raise SystemExit("benchmarks/rewrite.py (the corpus generator) is missing")
_rewrite = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _rewrite
_spec.loader.exec_module(_rewrite)
make_corpus = _rewrite.make_corpus

ROOT = Path(__file__).resolve().parent.parent
DSM = str(ROOT / ".venv" / "bin" / "dsm")
PYTHON = sys.executable
TEXT_BYTES = (300, 1200)
COLUMNS = ["url", "text", "n_tokens", "quality", "lang_score", "crawled_at"]


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    rss_mb: float
    stdout: bytes


def run_reaped(command: list[str]) -> Run:
    """One run of ``command``: the wall clock around it, its CPU seconds and peak RSS as GNU time reports
    them (``/usr/bin/time``: the child of a small process, so the peak is the command's own). Its stdout is
    kept (in a file, not a pipe)."""
    folder = ROOT / "bench-data"
    folder.mkdir(parents=True, exist_ok=True)
    out_path, usage_path = folder / f".inspect-out-{os.getpid()}", folder / f".inspect-usage-{os.getpid()}"
    with open(out_path, "wb") as out:
        start = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%U %S %M", "-o", str(usage_path), *command],
            stdout=out,
            stderr=subprocess.PIPE,
            check=False,
        )
        wall = time.perf_counter() - start
    data = out_path.read_bytes()
    user, system, peak_kb = usage_path.read_text().split()[-3:]
    out_path.unlink()
    usage_path.unlink()
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return Run(wall=wall, cpu=float(user) + float(system), rss_mb=int(peak_kb) / 1024, stdout=data)


@dataclass(frozen=True)
class Pair:
    name: str
    ours: list[Run]
    peer: list[Run]

    def row(self, peer_name: str, target: str) -> str:
        def med(runs: list[Run], attr: str) -> float:
            return statistics.median(getattr(r, attr) for r in runs)

        ratio = statistics.median(a.wall / b.wall for a, b in zip(self.ours, self.peer, strict=True))
        return (
            f"| {self.name} | {med(self.ours, 'wall'):.2f} s | {med(self.ours, 'cpu'):.2f} s "
            f"| {med(self.ours, 'rss_mb'):.0f} MB | {peer_name} | {med(self.peer, 'wall'):.2f} s "
            f"| {med(self.peer, 'cpu'):.2f} s | {med(self.peer, 'rss_mb'):.0f} MB | {ratio:.2f}x | {target} |"
        )


def paired(name: str, ours: list[str], peer: list[str], runs: int, warmup: int = 1) -> Pair:
    for _ in range(warmup):
        run_reaped(ours)
        run_reaped(peer)
    a, b = [], []
    for i in range(runs):
        first, second = (ours, peer) if i % 2 == 0 else (peer, ours)
        x, y = run_reaped(first), run_reaped(second)
        a.append(x if first is ours else y)
        b.append(y if first is ours else x)
    return Pair(name, a, b)


def make_changed_copy(source: Path, target: Path, fraction: float, seed: int = 5) -> int:
    """A copy of every shard with ``fraction`` of rows changed (quality + 1); same files, same row groups."""
    target.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    changed = 0
    for path in sorted(source.glob("*.parquet")):
        parquet = pq.ParquetFile(path)
        with pq.ParquetWriter(target / path.name, parquet.schema_arrow, compression="zstd") as writer:
            for group in range(parquet.num_row_groups):
                table = parquet.read_row_group(group)
                mask = rng.random(table.num_rows) < fraction
                changed += int(mask.sum())
                quality = pc.if_else(
                    pa.array(mask), pc.add(table.column("quality"), 1.0), table.column("quality")
                )
                table = table.set_column(table.schema.get_field_index("quality"), "quality", quality)
                writer.write_table(table, row_group_size=table.num_rows)
    return changed


def duckdb_join(old: Path, new: Path) -> list[str]:
    differs = " OR ".join(f"o.{c} IS DISTINCT FROM n.{c}" for c in COLUMNS)
    sql = (
        "SELECT count(*) FILTER (WHERE o.id IS NULL), count(*) FILTER (WHERE n.id IS NULL), "
        f"count(*) FILTER (WHERE o.id IS NOT NULL AND n.id IS NOT NULL AND ({differs})) "
        f"FROM read_parquet('{old}/*.parquet') o "
        f"FULL OUTER JOIN read_parquet('{new}/*.parquet') n ON o.id = n.id"
    )
    code = f"import duckdb, json; print(json.dumps(duckdb.sql({sql!r}).fetchall()[0]))"
    return [PYTHON, "-c", code]


def pyarrow_row_group(path: Path, offset_in_shard: int) -> list[str]:
    code = (
        "import sys, pyarrow.parquet as pq\n"
        f"f = pq.ParquetFile({str(path)!r})\n"
        f"row, g = {offset_in_shard}, 0\n"
        "while row >= f.metadata.row_group(g).num_rows:\n"
        "    row -= f.metadata.row_group(g).num_rows; g += 1\n"
        "t = f.read_row_group(g)\n"
        "print(t.slice(row, 10).to_pylist()[0]['id'])\n"
    )
    return [PYTHON, "-c", code]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=1.0, help="corpus size in GB (default 1.0)")
    parser.add_argument("--runs", type=int, default=9, help="runs of head and find (default 9)")
    parser.add_argument("--diff-runs", type=int, default=3, help="runs of the diff (default 3)")
    parser.add_argument("--data", default=str(ROOT / "bench-data" / "inspect"))
    parser.add_argument("--skip-diff", action="store_true", help="only head and find (a quick run)")
    args = parser.parse_args()
    data = Path(args.data)
    old, new, registry = (
        data / f"corpus-{args.size}",
        data / f"changed-{args.size}",
        data / f"registry-{args.size}",
    )
    if not old.exists():
        make_corpus(old, int(args.size * 1e9), text_bytes=TEXT_BYTES)
    if not new.exists():
        make_changed_copy(old, new, 0.01)
    if not registry.exists():
        for folder in (old, new):
            subprocess.run(
                [
                    DSM,
                    "register",
                    str(folder),
                    "--name",
                    "corpus",
                    "--key",
                    "id",
                    "--registry",
                    str(registry),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
    for path in [*old.glob("*.parquet"), *new.glob("*.parquet")]:
        with open(path, "rb") as handle:
            while handle.read(8 << 20):
                pass  # into the page cache
    files = sorted(old.glob("*.parquet"))
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in files)
    last_rows = pq.ParquetFile(files[-1]).metadata.num_rows
    size = sum(p.stat().st_size for p in files)
    common = ["--registry", str(registry), "--cache-dir", str(data / "cache")]
    print(f"corpus: {len(files)} Parquet shards, {size / 1e9:.2f} GB, {rows:,} rows; load {os.getloadavg()}")

    head = paired(
        "`dsm head` 10 rows at the end",
        [DSM, "head", "corpus@1", "--offset", str(rows - 10), "-n", "10", *common],
        pyarrow_row_group(files[-1], last_rows - 10),
        args.runs,
    )
    find = paired(
        "`dsm find --row` near the end",
        [DSM, "find", "corpus@1", "--row", str(rows - 5), *common, "--json"],
        pyarrow_row_group(files[-1], last_rows - 5),
        args.runs,
    )
    diff = None
    if not args.skip_diff:
        diff = paired(
            "`dsm diff --rows --key id`, 1% changed",
            [DSM, "diff", "corpus@1", "corpus@2", "--rows", "--key", "id", "--json", *common],
            duckdb_join(old, new),
            args.diff_runs,
            warmup=0,
        )
        ours = json.loads(diff.ours[0].stdout)
        theirs = json.loads(diff.peer[0].stdout.decode().strip().splitlines()[-1])
        found = [ours["added"], ours["removed"], ours["changed"]]
        if found != theirs:
            raise SystemExit(f"the counts differ: dsm {found}, DuckDB {theirs}")
        print(f"diff counts (dsm = DuckDB): added {found[0]:,}, removed {found[1]:,}, changed {found[2]:,}")
    print(f"load after: {os.getloadavg()}\n")
    print(
        "| job | dsm wall | dsm CPU | dsm peak RSS | peer | peer wall | peer CPU | peer peak RSS "
        "| wall dsm/peer | target |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(head.row("pyarrow reads the row group", "< 0.5 s"))
    print(find.row("pyarrow reads the row group", "< 0.5 s"))
    if diff is not None:
        print(diff.row("DuckDB full outer join", "<= 1.5x, RSS < 1 GiB"))
    shutil.rmtree(data / "cache", ignore_errors=True)


if __name__ == "__main__":
    main()
