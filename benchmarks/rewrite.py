"""Rewrite benchmark: ``dsm reshard`` / ``dsm convert-format`` against DuckDB's ``COPY`` doing the same job.

Makes Parquet corpora of each shape and size asked, registers each, then times, each as a subprocess so
start-up is included (wall and CPU seconds and peak RSS from ``/usr/bin/time -v``; each run after a sync,
untimed, so that none pays for writing out the files of the run before it):

1. reshard Parquet -> Parquet (zstd, 8 files)   vs  COPY (SELECT * FROM read_parquet(..)) TO .. (zstd)
2. convert Parquet -> JSONL                     vs  COPY .. TO .. (FORMAT json)
3. convert JSONL -> Parquet (zstd)              vs  COPY (SELECT * FROM read_json(.., columns=..)) TO ..
4. shuffled reshard (seed 7, 8 files)           vs  COPY (SELECT * .. ORDER BY hash(id + 7)) TO ..

Shapes (``--shapes``):

- ``text``: id, url, text of 1-4 KB, a few numeric fields; 128 MB shards, row groups of 16,384 rows;
- ``one-group``: the same rows in files of 200,000 rows, each one row group;
- ``small-groups``: the same rows in 128 MB shards of 1,024-row row groups;
- ``web``: the ``text`` layout, its text punctuated as crawled web text is: line ends, quotes, tabs, now and
  then a backslash, and words that are not ASCII (escaping it for JSON adds about 1% to its bytes);
- ``numeric``: short rows of 48 numeric columns (int64, int32, float64, float32, timestamps); 128 MB shards,
  row groups of 131,072 rows.

Both tools use every core. dsm also checks every source checksum, takes every written file's checksum and
row fingerprint (from the bytes and batches as they are written: its default proof), proves the dataset
fingerprint and registers the result; DuckDB does none of that. Where a source row group of 16-64 MiB
decoded lies whole in one output file (the text and numeric shapes), dsm's reshard writes it as stored,
digested by decoding the bytes written (docs/rewrite.md); runs of smaller groups whole in one output file
(the small-groups shape) are assembled into one group each, their text columns from the source's pages
and the other columns encoded again; DuckDB decodes and encodes every row.
Targets: reshard at most 0.9x DuckDB's wall time, Parquet -> JSONL at most 0.8x, JSONL -> Parquet at most
1.0x, shuffled at most 1.2x; dsm's peak RSS under 1 GiB and flat across sizes.

    .venv/bin/python benchmarks/rewrite.py                               # every shape at 0.5 and 1.0 GB
    .venv/bin/python benchmarks/rewrite.py --sizes 0.1 --shapes numeric  # a quick run
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from _harness import as_installed, run_verbose

ROOT = Path(__file__).resolve().parent.parent
DSM = str(ROOT / ".venv" / "bin" / "dsm")
PYTHON = sys.executable
SHARD_BYTES = 128 << 20
_WORDS = 6000


_FOREIGN = ["café", "naïve", "über", "señor", "東京", "日本語", "Привет", "—", "€"]
"""Words of the prose pool that are not ASCII (two- and three-byte UTF-8)."""

_SEPARATORS = [b" ", b", ", b". ", b".\n", b".\n\n", b' "', b'" ', b"\t", b" \\ "]
_SEPARATOR_SHARES = [0.838, 0.06, 0.05, 0.015, 0.005, 0.015, 0.015, 0.001, 0.001]
"""How prose words are separated: spaces mostly, commas and full stops, a line or paragraph end about every
300 bytes, quotes, now and then a tab or a backslash (text pasted from code)."""


def _pool(rng: np.random.Generator, size: int, prose: bool = False) -> bytes:
    """``size`` bytes of Zipf-distributed pseudo-words: compresses like natural-language text. ``prose``:
    with the punctuation, line ends, quotes and non-ASCII words of text crawled from the web, which JSON
    writers must escape (escaping adds about 1% to its bytes)."""
    letters = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", dtype=np.uint8)
    vocab = []
    for _ in range(_WORDS):
        length = int(rng.integers(2, 11))
        vocab.append(bytes(letters[np.minimum(rng.geometric(0.18, length) - 1, 25)]))
    if prose:
        for i, word in enumerate(_FOREIGN):
            vocab[50 + 97 * i] = word.encode("utf-8")
    ranks = np.minimum(rng.zipf(1.2, size // 5), _WORDS) - 1
    if not prose:
        return b" ".join(vocab[i] for i in ranks.tolist())[:size]
    separators = rng.choice(len(_SEPARATORS), size=len(ranks), p=_SEPARATOR_SHARES)
    words = zip(ranks.tolist(), separators.tolist(), strict=True)
    return b"".join(vocab[i] + _SEPARATORS[j] for i, j in words)[:size]


@dataclass(frozen=True)
class Shape:
    """How a corpus is laid out: its rows, rows per file (None: by size) and rows per row group; ``prose``:
    its text punctuated as web text is (see :func:`_pool`)."""

    name: str
    numeric: bool
    row_group_rows: int
    file_rows: int | None = None
    prose: bool = False


SHAPES = {
    shape.name: shape
    for shape in (
        Shape("text", numeric=False, row_group_rows=16_384),
        Shape("one-group", numeric=False, row_group_rows=200_000, file_rows=200_000),
        Shape("small-groups", numeric=False, row_group_rows=1_024),
        Shape("web", numeric=False, row_group_rows=16_384, prose=True),
        Shape("numeric", numeric=True, row_group_rows=131_072),
    )
}


def make_corpus(
    folder: Path,
    target_bytes: int,
    shape: Shape = SHAPES["text"],
    seed: int = 1,
    text_bytes: tuple[int, int] = (1024, 4096),
) -> None:
    """Parquet shards until ``target_bytes`` are written: ~128 MB each (or ``file_rows`` rows each); each text
    is ``text_bytes`` long (inclusive range). The shards are written under ``<folder>.partial`` and the folder
    renamed when the last is closed, so that a run stopped half-way leaves no corpus a later run would take as
    made."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    pool = b"" if shape.numeric else _pool(rng, 64 << 20, shape.prose)
    schema = _numeric_schema() if shape.numeric else _schema()
    written, next_id, shard = 0, 0, 0
    while written < target_bytes:
        path = partial / f"corpus-{shard:05d}.parquet"
        rows_in_file = 0
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            while path.stat().st_size < SHARD_BYTES and written + path.stat().st_size < target_bytes:
                if shape.file_rows is not None and rows_in_file >= shape.file_rows:
                    break
                n = shape.row_group_rows
                table = (
                    _numeric_rows(rng, next_id, n)
                    if shape.numeric
                    else _rows(rng, pool, next_id, n, text_bytes)
                )
                writer.write_table(table, row_group_size=n)
                next_id += n
                rows_in_file += n
        written += path.stat().st_size
        shard += 1
    partial.rename(folder)


def _numeric_schema() -> pa.Schema:
    kinds = [("f64", pa.float64(), 16), ("f32", pa.float32(), 12), ("i64", pa.int64(), 12)]
    kinds += [("i32", pa.int32(), 6), ("ts", pa.timestamp("us", tz="UTC"), 2)]
    fields = [pa.field("id", pa.int64())]
    fields += [pa.field(f"{prefix}_{i:02d}", type_) for prefix, type_, count in kinds for i in range(count)]
    return pa.schema(fields[:48])


def _numeric_rows(rng: np.random.Generator, first_id: int, n: int) -> pa.Table:
    """Feature-like numbers: rounded normals, small counts, ids, times a few seconds apart."""
    columns: dict[str, pa.Array] = {}
    for field in _numeric_schema():
        if field.name == "id":
            columns["id"] = pa.array(np.arange(first_id, first_id + n), pa.int64())
        elif pa.types.is_floating(field.type):
            values = np.round(rng.normal(0, 10, n), 3)
            columns[field.name] = pa.array(values.astype(field.type.to_pandas_dtype()), field.type)
        elif pa.types.is_timestamp(field.type):
            offsets = np.cumsum(rng.integers(0, 5_000_000, n)) + first_id * 2_500_000
            columns[field.name] = pa.array(1_700_000_000_000_000 + offsets, field.type)
        else:
            columns[field.name] = pa.array(rng.integers(0, 1000, n).astype(field.type.to_pandas_dtype()))
    return pa.table(columns, schema=_numeric_schema())


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
    # a cut through a character of more than one byte drops its pieces
    text = [
        pool[s : s + k].decode("utf-8", errors="ignore")
        for s, k in zip(starts.tolist(), lengths.tolist(), strict=True)
    ]
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
    cpu_seconds: float


def timed(command: list[str], env: dict[str, str] | None = None) -> Run:
    """Wall time, CPU seconds (user + system) and peak RSS of a command, after a sync; its failure stops
    the benchmark."""
    run = run_verbose(command, env)
    return Run(seconds=run.wall, peak_rss_mb=run.rss_mb, cpu_seconds=run.cpu)


def duckdb(sql: str) -> list[str]:
    return [PYTHON, "-c", f"import duckdb; duckdb.sql({sql!r})"]


_DUCKDB_TYPES = {
    "int64": "BIGINT",
    "int32": "INTEGER",
    "double": "DOUBLE",
    "float": "FLOAT",
    "string": "VARCHAR",
}


def _columns(schema: pa.Schema) -> str:
    """DuckDB's ``columns=`` for ``read_json``: the same types as the contract gives dsm."""

    def duck(type_: pa.DataType) -> str:
        if pa.types.is_timestamp(type_):
            return "TIMESTAMPTZ" if type_.tz else "TIMESTAMP"
        return _DUCKDB_TYPES[str(type_)]

    return "{" + ", ".join(f"'{f.name}': '{duck(f.type)}'" for f in schema) + "}"


def median(runs: list[Run]) -> Run:
    """Median wall and CPU seconds, with the highest peak RSS seen over all runs (memory is not a typical
    case)."""
    return Run(
        seconds=float(np.median([r.seconds for r in runs])),
        peak_rss_mb=max(r.peak_rss_mb for r in runs),
        cpu_seconds=float(np.median([r.cpu_seconds for r in runs])),
    )


@dataclass(frozen=True)
class Result:
    """One job on one corpus: the medians of each tool's runs, and the medians of the pair-by-pair ratios
    (dsm's run over the DuckDB run right after it: a drift in the machine's speed moves both alike)."""

    shape: str
    job: str
    source_gb: float
    dsm: Run
    duckdb: Run
    wall_ratio: float
    cpu_ratio: float


def bench_size(work: Path, shape: Shape, size_gb: float, registry: str, repeat: int) -> list[Result]:
    suffix = "" if shape.name == "text" else f"-{shape.name}"
    data = ROOT / "bench-data" / f"corpus{suffix}-{size_gb:g}gb"
    if not data.exists():
        print(f"making {size_gb:g} GB of {shape.name} Parquet under {data} ...", file=sys.stderr)
        make_corpus(data, int(size_gb * 1e9), shape)
    source_bytes = sum(p.stat().st_size for p in data.glob("*.parquet"))
    schema = pq.read_schema(next(data.glob("*.parquet"))).remove_metadata()
    name = f"corpus{suffix}-{str(size_gb).replace('.', '_')}"
    env = {**os.environ, "DSM_REGISTRY": registry}
    subprocess.run([DSM, "register", str(data), "--name", name], check=True, env=env, capture_output=True)
    # The JSONL source of the JSONL -> Parquet job: made once per corpus (untimed), read by both tools.
    jsonl = work / f"{name}-jsonl"
    shutil.rmtree(jsonl, ignore_errors=True)
    subprocess.run(
        [DSM, "convert-format", name, str(jsonl), "--format", "jsonl", "--name", f"{name}-jsonl"],
        check=True,
        env=env,
        capture_output=True,
    )
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    glob = f"{data}/*.parquet"
    # Outputs are registered under another name, so that the source's versions stay as they are.
    output = ["--name", f"{name}-out", "--json"]
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
                *output,
            ],
            duckdb(
                f"COPY (SELECT * FROM read_parquet('{glob}')) TO '{out}/duck-reshard' "
                f"(FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '{file_size}')"
            ),
        ),
        (
            "convert parquet->jsonl",
            [DSM, "convert-format", f"{name}@1", str(out / "dsm-jsonl"), "--format", "jsonl", *output],
            duckdb(f"COPY (SELECT * FROM read_parquet('{glob}')) TO '{out}/duck.jsonl' (FORMAT json)"),
        ),
        (
            "convert jsonl->parquet zstd",
            [
                DSM,
                "convert-format",
                f"{name}-jsonl",
                str(out / "dsm-jsonl-parquet"),
                "--format",
                "parquet",
                "--compression",
                "zstd",
                *output,
            ],
            duckdb(
                f"COPY (SELECT * FROM read_json('{jsonl}/*.jsonl', format='newline_delimited', "
                f"columns={_columns(schema)})) TO '{out}/duck-jsonl-parquet' "
                f"(FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '{file_size}')"
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
                *output,
            ],
            duckdb(
                f"COPY (SELECT * FROM read_parquet('{glob}') ORDER BY hash(id + 7)) TO '{out}/duck-shuffle' "
                f"(FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '{file_size}')"
            ),
        ),
    ]
    results = []
    for label, dsm_cmd, duck_cmd in jobs:
        if JOB_FILTER and not any(j in label for j in JOB_FILTER):
            continue
        dsm_runs, duck_runs = [], []
        for _ in range(repeat):  # alternate the two tools so that load from elsewhere hits both alike
            shutil.rmtree(dsm_cmd[3], ignore_errors=True)
            # and the version the run before published: else dsm finds it "already published" (and
            # now refuses, its files being gone), and a repeat would time nothing
            shutil.rmtree(Path(registry) / f"{name}-out", ignore_errors=True)
            dsm_runs.append(timed(dsm_cmd, env))
            for previous in out.glob("duck*"):  # COPY refuses a folder that is not empty
                shutil.rmtree(previous) if previous.is_dir() else previous.unlink()
            duck_runs.append(timed(duck_cmd, env))
        dsm_run, duck_run = median(dsm_runs), median(duck_runs)
        pairs = list(zip(dsm_runs, duck_runs, strict=True))
        results.append(
            Result(
                shape.name,
                label,
                source_bytes / 1e9,
                dsm_run,
                duck_run,
                wall_ratio=float(np.median([a.seconds / b.seconds for a, b in pairs])),
                cpu_ratio=float(np.median([a.cpu_seconds / b.cpu_seconds for a, b in pairs])),
            )
        )
        print(
            f"  {shape.name} {label}: dsm {dsm_run.seconds:.1f}s ({dsm_run.cpu_seconds:.1f} CPU-s) "
            f"{dsm_run.peak_rss_mb:.0f} MB, duckdb {duck_run.seconds:.1f}s "
            f"({duck_run.cpu_seconds:.1f} CPU-s) {duck_run.peak_rss_mb:.0f} MB; "
            f"load {os.getloadavg()[0]:.1f}",
            file=sys.stderr,
        )
    shutil.rmtree(out, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="0.5,1.0", help="corpus sizes in GB, comma-separated")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"corpus shapes: {', '.join(SHAPES)}")
    parser.add_argument("--jobs", help="only the jobs whose label contains one of these, comma-separated")
    parser.add_argument("--work", default=str(ROOT / "bench-data" / "rewrite-runs"), help="scratch folder")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each job per tool; the median is shown"
    )
    args = parser.parse_args()
    as_installed()
    work = Path(args.work)
    registry = str(work / "registry")
    shutil.rmtree(registry, ignore_errors=True)
    unknown = set(args.shapes.split(",")) - set(SHAPES)
    if unknown:
        raise SystemExit(f"unknown shape(s) {', '.join(sorted(unknown))}; known: {', '.join(SHAPES)}")
    global JOB_FILTER
    JOB_FILTER = [j for j in (args.jobs or "").split(",") if j]
    load_before = os.getloadavg()
    rows = []
    for shape in args.shapes.split(","):
        for size in [float(s) for s in args.sizes.split(",")]:
            rows += bench_size(work, SHAPES[shape], size, registry, args.repeat)
    print(
        f"\n{os.cpu_count()} cores; each job a subprocess (start-up included); data in the page cache; "
        f"medians of {args.repeat} alternating runs, ratios the median of the pairs' ratios (peak RSS: the "
        f"highest seen); load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}\n"
    )
    print(
        "| shape | job | source GB | dsm s | DuckDB s | dsm / DuckDB | dsm CPU-s | DuckDB CPU-s "
        "| CPU dsm / DuckDB | dsm peak RSS MB | DuckDB peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        d, k = r.dsm, r.duckdb
        print(
            f"| {r.shape} | {r.job} | {r.source_gb:.2f} | {d.seconds:.1f} | {k.seconds:.1f} "
            f"| {r.wall_ratio:.2f}x | {d.cpu_seconds:.1f} | {k.cpu_seconds:.1f} | {r.cpu_ratio:.2f}x "
            f"| {d.peak_rss_mb:.0f} | {k.peak_rss_mb:.0f} |"
        )


JOB_FILTER: list[str] = []


if __name__ == "__main__":
    main()
