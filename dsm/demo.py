"""A small sample dataset (text, numbers, PNG image bytes) as Parquet shards: ``python -m dsm.demo DIR``."""

from __future__ import annotations

import random
import struct
import sys
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["make_png", "make_sample_table", "write_sample"]

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


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "demo-data/web-sample")
    written = write_sample(target)
    print(f"wrote {len(written)} Parquet shards under {target}")
