"""What reading CSV through dsm costs against pyarrow's own streaming CSV reader, on the same file.

    python benchmarks/csv_read.py [--rows 2000000] [--runs 7] [--dir DIR]

dsm's CSV reader is pyarrow's streaming reader plus the RFC 4180 quote check (every quote of the text,
with numpy) and the schema's casts; its row index (``index_shard``, for reads by position) is a scan of
the text with no parse. One process, page cache warm; runs of dsm and the peer alternate, medians of wall
and CPU seconds (every thread of the process) are reported. The file is quote-heavy on purpose: every
row has a quoted value with a doubled quote and a delimiter inside, six quotes a row.

There is no target: this measures what the quote check adds to a read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsm.formats.csv import CsvFormat  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string()), ("score", pa.float64())])


def make_file(path: Path, rows: int) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "text": pa.array([f'row {i} says "hi", then, {"x" * (i % 50)}' for i in range(rows)]),
            "score": pa.array([i * 0.5 for i in range(rows)]),
        },
        schema=SCHEMA,
    )
    pcsv.write_csv(table, path, pcsv.WriteOptions(quoting_style="needed"))


def timed_cpu(work: Callable[[], object]) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - start, time.process_time() - cpu


def ours(path: Path) -> int:
    with pa.OSFile(str(path)) as file:
        return sum(b.num_rows for b in CsvFormat().iter_batches(file, shard=path.name, schema=SCHEMA))


def ours_index(path: Path) -> int:
    with pa.OSFile(str(path)) as file:
        return CsvFormat().index_shard(file, shard=path.name, schema=SCHEMA).rows


def peer(path: Path) -> int:
    convert = pcsv.ConvertOptions(column_types=dict(zip(SCHEMA.names, SCHEMA.types, strict=True)))
    parse = pcsv.ParseOptions(newlines_in_values=True)
    with pcsv.open_csv(str(path), parse_options=parse, convert_options=convert) as reader:
        return sum(b.num_rows for b in reader)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=ROOT / "bench-data" / "csv")
    args = parser.parse_args()
    path = args.dir / f"quotes-{args.rows}.csv"
    make_file(path, args.rows)
    assert ours(path) == peer(path) == ours_index(path) == args.rows  # warm-up and a check
    runs: dict[str, list[tuple[float, float]]] = {"peer": [], "ours": [], "index": []}
    for _ in range(args.runs):
        runs["peer"].append(timed_cpu(lambda: peer(path)))
        runs["ours"].append(timed_cpu(lambda: ours(path)))
        runs["index"].append(timed_cpu(lambda: ours_index(path)))
    med = statistics.median
    print(f"file: {path.stat().st_size / 1e6:.0f} MB, {args.rows:,} rows, 6 quotes a row")
    print(f"load average at start of the runs: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| read | wall (median) | CPU-s (median) | wall / pyarrow |")
    print("|---|---|---|---|")
    peer_wall = [w for w, _ in runs["peer"]]
    for name, label in (
        ("peer", "pyarrow `open_csv`"),
        ("ours", "dsm `iter_batches`"),
        ("index", "dsm `index_shard`"),
    ):
        walls = [w for w, _ in runs[name]]
        ratio = med(o / p for o, p in zip(walls, peer_wall, strict=True))
        print(f"| {label} | {med(walls):.3f} s | {med(c for _, c in runs[name]):.3f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
