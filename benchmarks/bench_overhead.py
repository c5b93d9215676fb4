"""How much ``dsm bench`` itself costs: its figures against plain reads of the same files in the same run.

    python benchmarks/bench_overhead.py [--size-mb 512] [--runs 31] [--seconds 0.5] [--workers 1] [--dir ...]

With the data in the page cache, ``dsm bench --mode bytes`` should report a throughput within 10% of a plain
Python loop reading the same files (``open(path, "rb", buffering=0)`` and ``readinto`` a preallocated 8 MiB
buffer), and ``--mode decode`` rows/s within 10% of pyarrow's own ``ParquetFile(path).iter_batches()``. Runs
alternate dsm and the peer (who goes first alternates too), each reading the files round and round for
``--seconds``; a full pass of each mode first checks that dsm counts every byte and row. Exits 1 when the
median of the per-pair ratios is outside [0.9, 1.1]; the ratio of the best run of each is printed too (noise
from other work on the machine only ever slows a run down).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dsm
from dsm.commands.bench import bench

SHARD_BYTES = 64 << 20
BLOCK = 8 << 20


def text_column(rng: np.random.Generator, rows: int, mean_len: int) -> pa.Array:
    """Lowercase letters and spaces, lengths around ``mean_len`` (compresses about as well as real text)."""
    lengths = rng.integers(mean_len // 2, mean_len * 3 // 2, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    alphabet = np.frombuffer(b"etaoinshrdlucmfwypvbgkjqxz      ", dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), int(offsets[-1]))]
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


def ensure_dataset(folder: Path, total_bytes: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    shards = max(2, total_bytes // SHARD_BYTES)
    paths = [folder / f"part-{i:05d}.parquet" for i in range(shards)]
    for i, path in enumerate(paths):
        if path.exists():
            continue
        rng = np.random.default_rng(i)
        rows = SHARD_BYTES // 220
        table = pa.table(
            {
                "id": pa.array(np.arange(i * rows, (i + 1) * rows, dtype=np.int64)),
                "score": pa.array(rng.random(rows)),
                "tokens": pa.array(rng.integers(10, 4000, rows, dtype=np.int32)),
                "text": text_column(rng, rows, 200),
            }
        )
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp, compression="none", row_group_size=64 * 1024)
        tmp.rename(path)
    return paths


def in_threads(
    paths: list[Path], workers: int, read_one: Callable[[Path], int], seconds: float
) -> tuple[int, float]:
    """Read ``paths`` round and round with ``workers`` threads for ``seconds``; (total counted, seconds)."""
    lock = threading.Lock()
    turn = itertools.cycle(paths)
    totals = [0] * workers
    deadline = 0.0

    def work(index: int) -> None:
        while time.perf_counter() < deadline:
            with lock:
                path = next(turn)
            totals[index] += read_one(path)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    start = time.perf_counter()
    deadline = start + seconds
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(totals), time.perf_counter() - start


_buffers = threading.local()


def plain_bytes(path: Path) -> int:
    buffer = getattr(_buffers, "block", None)
    if buffer is None:  # one buffer per thread, as dsm bench has: no page faults after the first file
        buffer = _buffers.block = bytearray(BLOCK)
    total = 0
    with open(path, "rb", buffering=0) as handle:
        while True:
            got = handle.readinto(buffer)
            if not got:
                return total
            total += got


def plain_rows(path: Path) -> int:
    return sum(batch.num_rows for batch in pq.ParquetFile(path).iter_batches(batch_size=65_536))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=512)
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--seconds", type=float, default=0.5, help="length of each timed run")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--dir", default="bench-data/overhead")
    args = parser.parse_args()

    paths = ensure_dataset(Path(args.dir), args.size_mb << 20)
    registry = tempfile.mkdtemp(prefix="dsm-bench-overhead-")
    contract = dsm.register(str(Path(args.dir)), name="overhead", registry=registry)
    size = contract.total_bytes
    rows = contract.total_rows or 0
    # a full pass of each mode first: into the page cache, and the counts must be exact
    for mode in ("bytes", "decode"):
        full = bench(contract, mode=mode, workers=args.workers, block_size=BLOCK if mode == "bytes" else None)
        result = full.ref.results[0]
        if (result.bytes if mode == "bytes" else result.rows) != (
            size if mode == "bytes" else rows
        ) or result.errors:
            print(f"{mode}: a full pass read {result.bytes} bytes, {result.rows} rows", file=sys.stderr)
            return 2

    def ours(mode: str) -> float:
        block = BLOCK if mode == "bytes" else None
        report = bench(
            contract, mode=mode, workers=args.workers, block_size=block, duration=args.seconds, warmup=0
        )
        result = report.ref.results[0]
        if result.errors:
            raise SystemExit(f"dsm bench reported {result.errors} errors")
        return result.bytes_per_s if mode == "bytes" else result.rows_per_s

    results = []
    for name, unit, peer_read in (("bytes", "B/s", plain_bytes), ("decode", "rows/s", plain_rows)):
        ours_rates, peer_rates = [], []
        for run in range(args.runs):
            for side in ("ours", "peer") if run % 2 == 0 else ("peer", "ours"):  # alternate who goes first
                if side == "ours":
                    ours_rates.append(ours(name))
                else:
                    counted, seconds = in_threads(paths, args.workers, peer_read, args.seconds)
                    peer_rates.append(counted / seconds)
        pairs = statistics.median(a / b for a, b in zip(ours_rates, peer_rates, strict=True))
        best = max(ours_rates) / max(peer_rates)
        results.append(
            (name, unit, statistics.median(ours_rates), statistics.median(peer_rates), pairs, best)
        )

    peers = {"bytes": "python readinto loop", "decode": "pyarrow iter_batches"}
    print(
        f"{len(paths)} Parquet shards, {size / 1e6:.0f} MB, {rows:,} rows, "
        f"{args.workers} worker(s), page cache warm, {args.runs} runs of {args.seconds:g} s each"
    )
    print(
        "| mode | dsm bench (median) | peer (median) | dsm/peer, median of pairs | dsm/peer, best of each |"
    )
    print("|---|---|---|---|---|")
    ok = True
    for name, unit, ours_rate, peer_rate, pairs, best in results:
        scale = 1e9 if unit == "B/s" else 1e6
        prefix = "G" if unit == "B/s" else "M "
        print(
            f"| {name} | {ours_rate / scale:.2f} {prefix}{unit} | {peer_rate / scale:.2f} {prefix}{unit} "
            f"({peers[name]}) | {pairs:.3f} | {best:.3f} |"
        )
        ok = ok and 0.9 <= pairs <= 1.1
    print("within 10% (median of pairs)" if ok else "OUTSIDE 10% (median of pairs)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
