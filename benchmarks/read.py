"""The read platform against pyarrow: iterator throughput, and the cost of a resume late in the epoch.

    python benchmarks/read.py [--rows 4000000] [--shards 8] [--batch-sizes 1024,8192] [--runs 5] [--dir DIR]

Targets, on one registered Parquet dataset of ``--rows`` rows (page cache warm, one process), at each
batch size:

- in order: ``dsm.open(...).iterator(batch_size)`` over the whole epoch, at least 1.0x the rows per second
  of pyarrow's own ``ParquetFile.iter_batches(batch_size)`` over the same files;
- shuffled (``shuffle=True``, blocks of 8192 rows): at least 0.8x the same peer;
- resume: a fresh iterator that loads a state saved at 90% of the epoch and yields its first batch, at most
  2x the time a fresh iterator takes to yield its first batch at the start of the epoch (in order and
  shuffled).

Runs of ours and the peer alternate; medians are reported, with the CPU-seconds of each (dsm decodes one
batch ahead in a thread; pyarrow decodes columns on its own thread pool). A resume that replays (skips rows
by reading them) and the mean time of one batch mid-epoch are shown for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dsm  # noqa: E402
from dsm.read.dataset import Dataset  # noqa: E402


def text_column(rng: np.random.Generator, rows: int, mean_len: int) -> pa.Array:
    lengths = rng.integers(mean_len // 2, mean_len * 3 // 2, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    alphabet = np.frombuffer(b"etaoinshrdlucmfwypvbgkjqxz      ", dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), int(offsets[-1]))]
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


def make_dataset(folder: Path, rows: int, shards: int) -> tuple[str, str]:
    """Parquet shards of unequal sizes (row groups of 65,536 rows), registered; ``(ref, registry)``."""
    registry = folder / "registry"
    data = folder / "data"
    if not (registry / "bench-read").exists():
        data.mkdir(parents=True, exist_ok=True)
        weights = np.linspace(0.7, 1.3, shards)
        sizes = np.floor(weights / weights.sum() * rows).astype(int)
        sizes[-1] += rows - sizes.sum()
        start = 0
        for index, size in enumerate(sizes):
            rng = np.random.default_rng(index)
            table = pa.table(
                {
                    "id": pa.array(np.arange(start, start + size, dtype=np.int64)),
                    "text": text_column(rng, int(size), 120),
                    "score": pa.array(rng.random(int(size))),
                    "tokens": pa.array(rng.integers(10, 4000, int(size), dtype=np.int32)),
                }
            )
            pq.write_table(
                table, data / f"part-{index:05d}.parquet", row_group_size=65_536, compression="zstd"
            )
            start += int(size)
        dsm.register(str(data), name="bench-read", registry=str(registry))
    return "bench-read", str(registry)


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def timed_cpu(work: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (every thread of this process) of one run."""
    start, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - start, time.process_time() - cpu


def ours_epoch(ds: Dataset, batch_size: int, shuffle: bool = False) -> int:
    return sum(batch.num_rows for batch in ds.iterator(batch_size, shuffle=shuffle, seed=1))


def peer_epoch(files: list[Path], batch_size: int) -> int:
    rows = 0
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            rows += batch.num_rows
    return rows


def first_batch(ds: Dataset, batch_size: int, state: dict | None = None, shuffle: bool = False) -> None:
    it = ds.iterator(batch_size, shuffle=shuffle, seed=1)
    if state is not None:
        it.load_state_dict(state)
    next(it)
    it.close()


def replay_first_batch(ds: Dataset, batch_size: int, skip_rows: int) -> None:
    """What a loader without seeking does: read and drop the rows before the resume point."""
    it = ds.iterator(65_536)
    dropped = 0
    while dropped < skip_rows:
        dropped += next(it).num_rows
    it.close()


def state_at(ds: Dataset, batch_size: int, fraction: float, shuffle: bool = False) -> dict:
    it = ds.iterator(batch_size, shuffle=shuffle, seed=1)
    target = int(ds.num_rows * fraction)
    while it.rows_assigned - it.rows_remaining + batch_size <= target:
        next(it)
    return it.state_dict()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--batch-sizes", default="1024,8192", help="comma-separated batch sizes")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=ROOT / "bench-data" / "read")
    args = parser.parse_args()

    ref, registry = make_dataset(args.dir, args.rows, args.shards)
    ds = dsm.open(ref, registry=registry)
    files = sorted((args.dir / "data").glob("*.parquet"))
    size = sum(f.stat().st_size for f in files)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    med = statistics.median
    print(f"dataset: {ds.num_rows:,} rows, {len(files)} Parquet shards, {size / 1e6:.0f} MB")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| measure | dsm (median) | peer (median) | ratio | target |")
    print("|---|---|---|---|---|")
    for b in sizes:
        assert ours_epoch(ds, b) == peer_epoch(files, b) == ds.num_rows  # warm-up and a check
        runs: dict[str, list[tuple[float, float]]] = {"peer": [], "ours": [], "shuffled": []}
        for _ in range(args.runs):
            runs["peer"].append(timed_cpu(lambda b=b: peer_epoch(files, b)))
            runs["ours"].append(timed_cpu(lambda b=b: ours_epoch(ds, b)))
            runs["shuffled"].append(timed_cpu(lambda b=b: ours_epoch(ds, b, shuffle=True)))
        peer_wall = [w for w, _ in runs["peer"]]
        for name, label, target in (("ours", "in order", ">= 1.0x"), ("shuffled", "shuffled", ">= 0.8x")):
            walls = [w for w, _ in runs[name]]
            ratio = med(p / o for o, p in zip(walls, peer_wall, strict=True))
            cpu = med(c for _, c in runs[name])
            print(
                f"| epoch, {label}, batch {b} | {ds.num_rows / med(walls) / 1e6:.2f} M rows/s, "
                f"{cpu:.2f} CPU-s | pyarrow iter_batches {ds.num_rows / med(peer_wall) / 1e6:.2f} M rows/s, "
                f"{med(c for _, c in runs['peer']):.2f} CPU-s | {ratio:.2f}x | {target} |"
            )

    b = sizes[0]
    state = state_at(ds, b, 0.9)
    shuffled_state = state_at(ds, b, 0.9, shuffle=True)
    first_batch(ds, b)
    start, resume, resume_shuffled, start_shuffled = [], [], [], []
    for _ in range(args.runs * 4):
        start.append(timed(lambda: first_batch(ds, b)))
        resume.append(timed(lambda: first_batch(ds, b, state)))
        start_shuffled.append(timed(lambda: first_batch(ds, b, shuffle=True)))
        resume_shuffled.append(timed(lambda: first_batch(ds, b, shuffled_state, shuffle=True)))
    replay = med(timed(lambda: replay_first_batch(ds, b, int(ds.num_rows * 0.9))) for _ in range(3))
    print(
        f"| resume at 90% + first batch {b} | {med(resume) * 1e3:.1f} ms | first batch of a fresh iterator "
        f"{med(start) * 1e3:.1f} ms | {med(r / s for r, s in zip(resume, start, strict=True)):.2f}x | <= 2x |"
    )
    pairs = zip(resume_shuffled, start_shuffled, strict=True)
    print(
        f"| same, shuffled (block of 8192 rows) | {med(resume_shuffled) * 1e3:.1f} ms | "
        f"{med(start_shuffled) * 1e3:.1f} ms | {med(r / s for r, s in pairs):.2f}x | <= 2x |"
    )
    print(f"| resume by replaying 90% (no seek) | {replay * 1e3:.0f} ms | | {replay / med(start):.0f}x | - |")
    steady = med(timed(lambda: ours_epoch(ds, b)) for _ in range(3)) / -(-ds.num_rows // b)
    print(
        f"| for scale: one batch mid-epoch (epoch time / batches) | {steady * 1e3:.2f} ms | | "
        f"resume = {med(resume) / steady:.0f}x | - |"
    )
    print()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
