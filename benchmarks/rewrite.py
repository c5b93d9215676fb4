"""Rewrite benchmark: ``dsm reshard`` / ``dsm convert-format`` against DuckDB's ``COPY`` doing the same job.

Makes a text-heavy Parquet corpus (id, url, text of 1-4 KB, a few numeric fields; zstd) of each size asked,
registers it, then times, each as a subprocess so start-up is included and peak RSS comes from
``/usr/bin/time -v``:

1. reshard Parquet -> Parquet (zstd, 8 files)   vs  COPY (SELECT * FROM read_parquet(..)) TO .. (zstd)
2. convert Parquet -> JSONL                     vs  COPY .. TO .. (FORMAT json)
3. convert JSONL -> Parquet (zstd)              vs  COPY (SELECT * FROM read_json(.., columns=..)) TO ..
4. shuffled reshard (seed 7, 8 files)           vs  COPY (SELECT * .. ORDER BY hash(id + 7)) TO ..

Both tools use every core. dsm also checks every source checksum, takes every written file's checksum and
row fingerprint (from the bytes and batches as they are written: its default proof), proves the dataset
fingerprint and registers the result; DuckDB does none of that. Targets: unshuffled jobs at most 1.0x DuckDB's
wall time, shuffled at most 2.0x, dsm's peak RSS under 1 GiB and flat across sizes.

    .venv/bin/python benchmarks/rewrite.py                 # sizes 0.5 and 1.0 GB, data under bench-data/
    .venv/bin/python benchmarks/rewrite.py --sizes 0.1     # a quick run
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
DSM = str(ROOT / ".venv" / "bin" / "dsm")
PYTHON = sys.executable
SHARD_BYTES = 128 << 20
ROW_GROUP_ROWS = 16_384
_WORDS = 6000


def _pool(rng: np.random.Generator, size: int) -> bytes:
    """``size`` bytes of Zipf-distributed pseudo-words: compresses like natural-language text."""
    letters = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", dtype=np.uint8)
    vocab = []
    for _ in range(_WORDS):
        length = int(rng.integers(2, 11))
        vocab.append(bytes(letters[np.minimum(rng.geometric(0.18, length) - 1, 25)]))
    ranks = np.minimum(rng.zipf(1.2, size // 5), _WORDS) - 1
    text = b" ".join(vocab[i] for i in ranks.tolist())
    return text[:size]


def make_corpus(
    folder: Path, target_bytes: int, seed: int = 1, text_bytes: tuple[int, int] = (1024, 4096)
) -> None:
    """Parquet shards of ~128 MB until ``target_bytes`` are written (row groups of 16,384 rows); each text is
    ``text_bytes`` long (inclusive range)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pool = _pool(rng, 64 << 20)
    written, next_id, shard = 0, 0, 0
    while written < target_bytes:
        path = folder / f"corpus-{shard:05d}.parquet"
        with pq.ParquetWriter(path, _schema(), compression="zstd") as writer:
            while path.stat().st_size < SHARD_BYTES and written + path.stat().st_size < target_bytes:
                rows = _rows(rng, pool, next_id, ROW_GROUP_ROWS, text_bytes)
                writer.write_table(rows, row_group_size=ROW_GROUP_ROWS)
                next_id += ROW_GROUP_ROWS
        written += path.stat().st_size
        shard += 1


def _schema() -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.int64()),
            ("url", pa.string()),
            ("text", pa.string()),
            ("n_tokens", pa.int32()),
            ("quality", pa.float64()),
            ("lang_score", pa.float32()),
            ("crawled_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def _rows(
    rng: np.random.Generator, pool: bytes, first_id: int, n: int, text_bytes: tuple[int, int] = (1024, 4096)
) -> pa.Table:
    lengths = rng.integers(text_bytes[0], text_bytes[1] + 1, n)
    starts = rng.integers(0, len(pool) - text_bytes[1] - 1, n)
    text = [pool[s : s + k].decode("ascii") for s, k in zip(starts.tolist(), lengths.tolist(), strict=True)]
    hosts = rng.integers(0, 50_000, n)
    urls = [f"https://site{h}.example.com/page/{first_id + i}" for i, h in enumerate(hosts.tolist())]
    return pa.table(
        {
            "id": pa.array(np.arange(first_id, first_id + n), pa.int64()),
            "url": urls,
            "text": text,
            "n_tokens": pa.array((lengths // 4).astype(np.int32)),
            "quality": pa.array(rng.random(n)),
            "lang_score": pa.array(rng.random(n).astype(np.float32)),
            "crawled_at": pa.array(
                1_700_000_000_000_000 + np.arange(n) * 1000 + first_id, pa.timestamp("us", tz="UTC")
            ),
        },
        schema=_schema(),
    )


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float


def timed(command: list[str], env: dict[str, str] | None = None) -> Run:
    """Wall time and peak RSS (``/usr/bin/time -v``) of a command; its failure stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(command)}")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return Run(seconds=seconds, peak_rss_mb=int(match.group(1)) / 1024 if match else float("nan"))


def duckdb(sql: str) -> list[str]:
    return [PYTHON, "-c", f"import duckdb; duckdb.sql({sql!r})"]


def _columns() -> str:
    types = {
        "id": "BIGINT",
        "url": "VARCHAR",
        "text": "VARCHAR",
        "n_tokens": "INTEGER",
        "quality": "DOUBLE",
        "lang_score": "FLOAT",
        "crawled_at": "TIMESTAMPTZ",
    }
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in types.items()) + "}"


def median(runs: list[Run]) -> Run:
    """The median wall time, with the highest peak RSS seen over all runs (memory is not a typical case)."""
    return Run(
        seconds=float(np.median([r.seconds for r in runs])), peak_rss_mb=max(r.peak_rss_mb for r in runs)
    )


def bench_size(work: Path, size_gb: float, registry: str, repeat: int) -> list[tuple[str, float, Run, Run]]:
    data = ROOT / "bench-data" / f"corpus-{size_gb:g}gb"
    if not data.exists():
        print(f"making {size_gb:g} GB of Parquet under {data} ...", file=sys.stderr)
        make_corpus(data, int(size_gb * 1e9))
    source_bytes = sum(p.stat().st_size for p in data.glob("*.parquet"))
    name = f"corpus-{str(size_gb).replace('.', '_')}"
    env = {**os.environ, "DSM_REGISTRY": registry}
    subprocess.run([DSM, "register", str(data), "--name", name], check=True, env=env, capture_output=True)
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    glob = f"{data}/*.parquet"
    file_size = f"{max(1, source_bytes // 8)}B"
    jobs = [
        (
            "reshard parquet->parquet zstd",
            [
                DSM,
                "reshard",
                f"{name}@1",
                str(out / "dsm-reshard"),
                "--num-shards",
                "8",
                "--compression",
                "zstd",
                "--json",
            ],
            duckdb(
                f"COPY (SELECT * FROM read_parquet('{glob}')) TO '{out}/duck-reshard' "
                f"(FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '{file_size}')"
            ),
        ),
        (
            "convert parquet->jsonl",
            [DSM, "convert-format", f"{name}@1", str(out / "dsm-jsonl"), "--format", "jsonl", "--json"],
            duckdb(f"COPY (SELECT * FROM read_parquet('{glob}')) TO '{out}/duck.jsonl' (FORMAT json)"),
        ),
        (
            "convert jsonl->parquet zstd",
            [
                DSM,
                "convert-format",
                f"{name}@3",
                str(out / "dsm-jsonl-parquet"),
                "--format",
                "parquet",
                "--compression",
                "zstd",
                "--json",
            ],
            duckdb(
                f"COPY (SELECT * FROM read_json('{out}/dsm-jsonl/*.jsonl', format='newline_delimited', "
                f"columns={_columns()})) TO '{out}/duck-jsonl-parquet' (FORMAT parquet, COMPRESSION zstd, "
                f"FILE_SIZE_BYTES '{file_size}')"
            ),
        ),
        (
            "shuffled reshard (seed 7)",
            [
                DSM,
                "reshard",
                f"{name}@1",
                str(out / "dsm-shuffle"),
                "--num-shards",
                "8",
                "--shuffle",
                "--seed",
                "7",
                "--json",
            ],
            duckdb(
                f"COPY (SELECT * FROM read_parquet('{glob}') ORDER BY hash(id + 7)) TO '{out}/duck-shuffle' "
                f"(FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '{file_size}')"
            ),
        ),
    ]
    results = []
    for label, dsm_cmd, duck_cmd in jobs:
        dsm_runs, duck_runs = [], []
        for _ in range(repeat):  # alternate the two tools so that load from elsewhere hits both alike
            shutil.rmtree(dsm_cmd[3], ignore_errors=True)
            dsm_runs.append(timed(dsm_cmd, env))
            for previous in out.glob("duck*"):  # COPY refuses a folder that is not empty
                shutil.rmtree(previous) if previous.is_dir() else previous.unlink()
            duck_runs.append(timed(duck_cmd, env))
        dsm_run, duck_run = median(dsm_runs), median(duck_runs)
        results.append((label, source_bytes / 1e9, dsm_run, duck_run))
        print(
            f"  {label}: dsm {dsm_run.seconds:.1f}s {dsm_run.peak_rss_mb:.0f} MB, duckdb "
            f"{duck_run.seconds:.1f}s {duck_run.peak_rss_mb:.0f} MB",
            file=sys.stderr,
        )
    shutil.rmtree(out, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="0.5,1.0", help="corpus sizes in GB, comma-separated")
    parser.add_argument("--work", default=str(ROOT / "bench-data" / "rewrite-runs"), help="scratch folder")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each job per tool; the median is shown"
    )
    args = parser.parse_args()
    work = Path(args.work)
    registry = str(work / "registry")
    shutil.rmtree(registry, ignore_errors=True)
    rows = []
    for size in [float(s) for s in args.sizes.split(",")]:
        rows += bench_size(work, size, registry, args.repeat)
    print(
        f"\n{os.cpu_count()} cores; each job a subprocess (start-up included); data in the page cache; "
        f"median of {args.repeat} alternating runs (peak RSS: the highest seen)\n"
    )
    print("| job | source GB | dsm s | DuckDB s | dsm / DuckDB | dsm peak RSS MB | DuckDB peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for label, gb, d, k in rows:
        print(
            f"| {label} | {gb:.2f} | {d.seconds:.1f} | {k.seconds:.1f} | {d.seconds / k.seconds:.2f}x "
            f"| {d.peak_rss_mb:.0f} | {k.peak_rss_mb:.0f} |"
        )


if __name__ == "__main__":
    main()
