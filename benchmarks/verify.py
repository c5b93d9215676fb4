"""dsm verify against xxhsum -H2 (bytes), and dsm verify --deep against pyarrow decoding alone (rows).

    python benchmarks/verify.py [--size-gb 4] [--deep-size-gb 1] [--runs 5] [--dir bench-data/verify]

Targets: ``dsm verify`` at most 1.5x xxhsum's wall time over the same ~4 GB of Parquet in the page cache,
start-up included; ``dsm verify --deep`` at most 2x the time of pyarrow decoding the same ~1 GB.
Needs ``xxhsum`` (Debian/Ubuntu package ``xxhash``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from _harness import HEADER, compare

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
    import subprocess

    subprocess.run(
        [str(BIN / "dsm"), "register", str(folder), "--name", name, "--registry", str(registry)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-gb", type=float, default=4.0)
    parser.add_argument("--deep-size-gb", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("bench-data/verify"))
    args = parser.parse_args()
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

    dsm = str(BIN / "dsm")
    decode = (
        "import sys, pyarrow.parquet as pq\n"
        "for p in sys.argv[1:]:\n"
        "    for b in pq.ParquetFile(p).iter_batches(batch_size=65536):\n"
        "        pass\n"
    )
    results = [
        compare(
            f"verify, {size:.1f} GB, {len(big)} shards (peer: xxhsum -H2)",
            [dsm, "verify", "bytes", "--registry", str(registry)],
            [xxhsum, "-H2", *map(str, big)],
            runs=args.runs,
        ),
        compare(
            f"verify --deep, {deep_size:.1f} GB, {len(deep)} shards (peer: pyarrow iter_batches)",
            [dsm, "verify", "deep", "--deep", "--registry", str(registry)],
            [sys.executable, "-c", decode, *map(str, deep)],
            runs=args.runs,
        ),
    ]
    print(HEADER)
    for result in results:
        print(result.row())


if __name__ == "__main__":
    main()
