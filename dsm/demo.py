"""A small sample dataset (text, numbers, PNG image bytes) as Parquet shards: ``python -m dsm.demo DIR``."""

from __future__ import annotations

import random
import struct
import sys
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["main", "make_png", "make_sample_table", "write_sample"]

_WORDS = [
    "data",
    "shard",
    "contract",
    "checksum",
    "row",
    "fingerprint",
    "train",
    "loader",
    "bucket",
    "region",
    "cutover",
    "verify",
    "arrow",
    "parquet",
    "token",
    "model",
    "batch",
    "epoch",
    "gradient",
    "tensor",
    "sample",
    "image",
    "caption",
    "corpus",
    "english",
    "deduplicated",
]


def make_png(width: int, height: int, seed: int) -> bytes:
    """A valid RGB PNG of a seeded colour gradient, built with zlib alone."""
    rng = random.Random(seed)
    r0, g0, b0 = rng.randrange(256), rng.randrange(256), rng.randrange(256)
    rows = b"".join(
        b"\x00" + bytes(v for x in range(width) for v in ((r0 + x * 8) % 256, (g0 + y * 8) % 256, b0))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def make_sample_table(rows: int = 3000, seed: int = 7) -> pa.Table:
    """Rows with an id, English-like text, a score, a language tag, a timestamp and a small PNG."""
    rng = random.Random(seed)
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "text": [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 40))) for _ in range(rows)],
            "score": [round(rng.random(), 6) for _ in range(rows)],
            "lang": [rng.choice(["en", "de", "fr", None]) for _ in range(rows)],
            "created": pa.array(
                [1_700_000_000_000_000 + i * 1_000_000 for i in range(rows)], pa.timestamp("us", "UTC")
            ),
            "image": pa.array([make_png(8, 8, i) for i in range(rows)], pa.binary()),
        }
    )


def write_sample(folder: Path, *, shards: int = 4, rows: int = 3000) -> list[Path]:
    """Write the sample table as ``shards`` Parquet files under ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    table = make_sample_table(rows)
    per = -(-rows // shards)
    paths = []
    for i in range(shards):
        path = folder / f"part-{i:05d}.parquet"
        pq.write_table(table.slice(i * per, per), path, compression="zstd")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """``python -m dsm.demo [FOLDER] [--shards N] [--rows N]``: write the sample dataset."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m dsm.demo",
        description="Write a small sample dataset (text, numbers, timestamps, PNG images) as Parquet shards.",
        epilog="Example: python -m dsm.demo demo-data/web && dsm register demo-data/web --name web",
    )
    parser.add_argument("folder", nargs="?", default="demo-data/web-sample", help="where to write the shards")
    parser.add_argument("--shards", type=int, default=4, help="number of Parquet files (default 4)")
    parser.add_argument("--rows", type=int, default=3000, help="rows in all (default 3000)")
    args = parser.parse_args(argv)
    if args.shards < 1 or args.rows < 1:
        parser.error("--shards and --rows must be at least 1")
    target = Path(args.folder)
    written = write_sample(target, shards=args.shards, rows=args.rows)
    print(f"wrote {len(written)} Parquet shards under {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
