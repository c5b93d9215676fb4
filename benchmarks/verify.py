"""dsm verify and dsm register against the peers that do only part of their work, on the same files.

    python benchmarks/verify.py [--size-gb 4] [--deep-size-gb 1] [--runs 5] [--dir bench-data/verify]
                                [--stages] [--callgrind]

Jobs, each a whole process (start-up included), alternated with its peer; medians of ``--runs`` pairs, wall
and CPU seconds (user + system, worker processes included) and peak RSS:

- ``dsm verify`` (size and xxh3-128 of every shard) over ~4 GB of Parquet against ``xxhsum -H2`` over the
  same files: target at most 1.1x;
- ``dsm verify --deep`` (bytes, schema, rows, fingerprints) over ~1 GB against pyarrow decoding the same
  files with ``ParquetFile(p).iter_batches()`` and nothing else: target at most 1.25x;
- ``dsm register`` of the same ~1 GB (checksums, decode, fingerprints, a new contract) against the same
  decode: target at most 1.3x.

``--stages`` adds the CPU seconds of each stage of a deep verify in one process (checksum, decode, hash
through the compiled kernel and through the pure-Python path; see ``stages.py``), ``--callgrind`` their
instruction counts. The data is in the page cache. Needs ``xxhsum`` (Debian/Ubuntu package ``xxhash``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from _harness import HEADER, as_installed, compare

SHARD_BYTES = 256 << 20
BIN = Path(sys.executable).parent


def text_column(rng: np.random.Generator, rows: int, mean_len: int) -> pa.Array:
    """English-like lowercase text: random letters with spaces, lengths around ``mean_len``."""
    lengths = rng.integers(mean_len // 2, mean_len * 3 // 2, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    alphabet = np.frombuffer(b"etaoinshrdlucmfwypvbgkjqxz      ", dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), int(offsets[-1]))]
    return pa.LargeStringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())).cast(
        pa.string()
    )


def make_shard(path: Path, seed: int, target_bytes: int) -> None:
    rng = np.random.default_rng(seed)
    rows = target_bytes // 1100
    table = pa.table(
        {
            "id": pa.array(np.arange(seed * rows, (seed + 1) * rows, dtype=np.int64)),
            "url": pa.array([f"https://example.com/{seed}/{i}" for i in range(rows)]),
            "text": text_column(rng, rows, 1000),
            "score": pa.array(rng.random(rows)),
            "tokens": pa.array(rng.integers(10, 4000, rows, dtype=np.int32)),
        }
    )
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="none", row_group_size=64 * 1024)
    tmp.rename(path)


def ensure_dataset(folder: Path, total_bytes: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    shards = max(1, total_bytes // SHARD_BYTES)
    paths = [folder / f"part-{i:05d}.parquet" for i in range(shards)]
    for i, path in enumerate(paths):
        if not path.exists():
            print(f"writing {path} ...", file=sys.stderr)
            make_shard(path, i, SHARD_BYTES)
    return paths


def register(folder: Path, registry: Path, name: str) -> None:
    subprocess.run(
        [str(BIN / "dsm"), "register", str(folder), "--name", name, "--registry", str(registry)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def row_hashing() -> str:
    done = subprocess.run(
        [str(BIN / "python"), "-c", "import dsm.hashing.fingerprint_kernel as k; print(k.provenance())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-gb", type=float, default=4.0)
    parser.add_argument("--deep-size-gb", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("bench-data/verify"))
    parser.add_argument("--stages", action="store_true", help="also CPU seconds per stage (stages.py)")
    parser.add_argument("--callgrind", action="store_true", help="also instructions per stage (valgrind)")
    args = parser.parse_args()
    as_installed()
    xxhsum = shutil.which("xxhsum")
    if xxhsum is None:
        raise SystemExit("xxhsum is not installed (apt-get install xxhash)")

    big = ensure_dataset(args.dir / "bytes", int(args.size_gb * (1 << 30)))
    deep = ensure_dataset(args.dir / "deep", int(args.deep_size_gb * (1 << 30)))
    registry = args.dir / "registry"
    if registry.exists():
        shutil.rmtree(registry)
    register(args.dir / "bytes", registry, "bytes")
    register(args.dir / "deep", registry, "deep")
    size = sum(p.stat().st_size for p in big) / (1 << 30)
    deep_size = sum(p.stat().st_size for p in deep) / (1 << 30)
    scratch = args.dir / "register-runs"

    def fresh_scratch() -> None:
        shutil.rmtree(scratch, ignore_errors=True)

    dsm = str(BIN / "dsm")
    decode = (
        "import sys, pyarrow.parquet as pq\n"
        "for p in sys.argv[1:]:\n"
        "    for b in pq.ParquetFile(p).iter_batches(batch_size=65536):\n"
        "        pass\n"
    )
    peer_decode = [sys.executable, "-c", decode, *map(str, deep)]
    results = [
        compare(
            f"`dsm verify`, {size:.1f} GB, {len(big)} shards (peer: `xxhsum -H2`)",
            [dsm, "verify", "bytes", "--registry", str(registry)],
            [xxhsum, "-H2", *map(str, big)],
            runs=args.runs,
        ),
        compare(
            f"`dsm verify --deep`, {deep_size:.1f} GB, {len(deep)} shards (peer: pyarrow `iter_batches`)",
            [dsm, "verify", "deep", "--deep", "--registry", str(registry)],
            peer_decode,
            runs=args.runs,
        ),
        compare(
            f"`dsm register`, {deep_size:.1f} GB, {len(deep)} shards (peer: pyarrow `iter_batches`)",
            [dsm, "register", str(args.dir / "deep"), "--name", "again", "--registry", str(scratch)],
            peer_decode,
            runs=args.runs,
            before_ours=fresh_scratch,
        ),
    ]
    fresh_scratch()
    print(f"row hashing: {row_hashing()}; {os.cpu_count()} cores; load before: {os.getloadavg()}")
    print(HEADER)
    for result in results:
        print(result.row())
    stages = [str(BIN / "python"), str(Path(__file__).parent / "stages.py"), *map(str, deep)]
    stage_list = "--stages=checksum,pyarrow-decode,decode,decode+checksum,hash,hash-python"
    if args.stages:
        print(subprocess.run([*stages, stage_list], capture_output=True, text=True, check=True).stdout)
    if args.callgrind:
        counted = [*stages[:2], str(deep[0]), stage_list, "--callgrind"]
        print(subprocess.run(counted, capture_output=True, text=True, check=True).stdout)


if __name__ == "__main__":
    main()
