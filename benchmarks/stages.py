"""CPU seconds (or instructions) per stage of dsm's work on the same files: checksum, decode, hash, encode.

    python benchmarks/stages.py FILE... [--format parquet] [--schema-of FILE] [--encode parquet,jsonl]
    python benchmarks/stages.py FILE... --callgrind                 # instruction counts (valgrind)

Each stage runs in this one process over every file in turn, the way a dsm worker does: ``checksum`` is
xxh3-128 of the file's bytes (read in 8 MiB blocks), ``decode`` dsm's format reader under the schema
(for JSONL: parsing with the contract's schema), ``decode+checksum`` both from one read (how ``register``
and ``verify --deep`` read: :func:`dsm.shards.read_once`), ``hash`` the row fingerprint of the decoded batches
(through the compiled kernel and through the pure-Python path), ``encode`` dsm's writer for each format
asked into a sink that drops the bytes. Pyarrow's own decode (``ParquetFile.iter_batches``) is shown as
the peer. CPU seconds are ``time.process_time()`` (every thread of the process); where they are too
noisy on a shared machine, ``--callgrind`` counts instructions instead: each stage runs in its own
process under ``valgrind --tool=callgrind`` over the same whole files, minus a process that only loads the
same modules (so start-up is not counted); the hash and encode stages, minus one that only decodes. The
kernel's copies of file data (reads) are not instructions of the process and are not counted.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsm.formats import get_format  # noqa: E402
from dsm.hashing import fingerprint_kernel  # noqa: E402
from dsm.hashing.checksum import file_checksum  # noqa: E402
from dsm.hashing.fingerprint import digest_batch  # noqa: E402
from dsm.shards import read_once  # noqa: E402
from dsm.storage import location  # noqa: E402

STAGES = (
    "checksum",
    "pyarrow-decode",
    "decode",
    "decode+checksum",
    "hash",
    "hash-python",
    "encode-parquet",
    "encode-jsonl",
)


class _Drop(io.RawIOBase):
    """A sink that counts and drops what is written."""

    def __init__(self) -> None:
        self.written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self.written += n
        return n


def _decoded(path: Path, fmt_name: str, schema: pa.Schema, rows: int | None) -> Iterator[pa.RecordBatch]:
    fmt = get_format(fmt_name)
    left = rows
    with pa.OSFile(str(path), "rb") as handle:
        for batch in fmt.iter_batches(handle, shard=path.name, schema=schema):
            if left is not None:
                if left <= 0:
                    return
                batch = batch.slice(0, left)
                left -= batch.num_rows
            yield batch


def _with_kernel(mode: str, work: Callable[[], None]) -> None:
    before = os.environ.get(fingerprint_kernel.ENV_VAR)
    os.environ[fingerprint_kernel.ENV_VAR] = mode
    try:
        work()
    finally:
        if before is None:
            os.environ.pop(fingerprint_kernel.ENV_VAR, None)
        else:
            os.environ[fingerprint_kernel.ENV_VAR] = before


def run_stage(
    stage: str,
    paths: list[Path],
    fmt_name: str,
    schema: pa.Schema,
    rows: int | None,
    batches: list[list[Any]],
) -> None:
    """Do ``stage`` over ``paths``; ``batches`` holds each file's decoded batches (filled by ``decode``)."""
    if stage == "checksum":
        for path in paths:
            with open(path, "rb") as handle:
                file_checksum(handle)
    elif stage == "pyarrow-decode":
        for path in paths:
            for _ in pq.ParquetFile(path).iter_batches(batch_size=65536):
                pass
    elif stage == "decode":  # as a worker decodes: each batch dropped once used
        for path in paths:
            for _ in _decoded(path, fmt_name, schema, rows):
                pass
    elif stage == "decode+checksum":  # one read: decoded through read_once, the checksum from its bytes
        loc = location(str(paths[0].parent))
        fmt = get_format(fmt_name)
        for path in paths:
            with read_once(loc, path.name) as opened:
                for _ in fmt.iter_batches(opened.file, shard=path.name, schema=schema):  # type: ignore[arg-type]
                    pass
                opened.finish()
    elif stage == "keep-decoded":  # untimed: the batches the hash and encode stages work on
        batches[:] = [list(_decoded(path, fmt_name, schema, rows)) for path in paths]
    elif stage in ("hash", "hash-python"):

        def digest() -> None:
            for file_batches in batches:
                for batch in file_batches:
                    digest_batch(batch)

        _with_kernel("compiled" if stage == "hash" else "python", digest)
    elif stage.startswith("encode-"):
        fmt = get_format(stage.removeprefix("encode-"))
        for file_batches in batches:
            sink = _Drop()
            with fmt.open_writer(sink, schema) as writer:  # type: ignore[arg-type]
                for batch in file_batches:
                    writer.write_batch(batch)
    elif stage != "none":
        raise SystemExit(f"unknown stage {stage}")


def cpu_seconds(paths: list[Path], fmt_name: str, schema: pa.Schema, stages: list[str]) -> dict[str, float]:
    """CPU seconds of each stage over every file (decode first, so later stages reuse its batches)."""
    batches: list[list[Any]] = []
    out = {}
    for stage in stages:
        needs_batches = stage in ("hash", "hash-python") or stage.startswith("encode-")
        if needs_batches and not batches:
            run_stage("keep-decoded", paths, fmt_name, schema, None, batches)
        start = time.process_time()
        run_stage(stage, paths, fmt_name, schema, None, batches)
        out[stage] = time.process_time() - start
    return out


def instructions(paths: list[Path], fmt_name: str, schema_of: Path, stages: list[str]) -> dict[str, int]:
    """Instructions of each stage under callgrind over ``paths``, start-up subtracted."""

    def counted(steps: list[str]) -> int:
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "callgrind.out"
            command = [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                *map(str, paths),
                "--format",
                fmt_name,
                "--schema-of",
                str(schema_of),
                "--run",
                ",".join(steps),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(done.stderr[-2000:])
            match = re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE)
            if match is None:
                raise SystemExit("no summary line in the callgrind output")
            return int(match.group(1))

    base = counted(["none"])
    kept = counted(["keep-decoded"])
    result = {}
    for stage in stages:
        if stage in ("hash", "hash-python") or stage.startswith("encode-"):
            result[stage] = counted(["keep-decoded", stage]) - kept
        else:
            result[stage] = counted([stage]) - base
    return result


def schema_of(path: Path) -> pa.Schema:
    return pq.read_schema(path).remove_metadata()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--format", default="parquet")
    parser.add_argument("--schema-of", type=Path, help="a Parquet file whose schema the files are read with")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead of CPU seconds")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one callgrind child: these stages, no report
    args = parser.parse_args()
    schema_file = args.schema_of or args.files[0]
    schema = schema_of(schema_file)
    stages = [s for s in args.stages.split(",") if s]
    if args.format != "parquet":
        stages = [s for s in stages if s != "pyarrow-decode"]
    if args.run:
        batches: list[list[Any]] = []
        for stage in args.run.split(","):
            run_stage(stage, args.files, args.format, schema, None, batches)
        return
    size = sum(p.stat().st_size for p in args.files)
    if args.callgrind:
        counts = instructions(args.files, args.format, schema_file, stages)
        print(json.dumps({"bytes": size, "instructions": counts}, indent=1))
        return
    seconds = cpu_seconds(args.files, args.format, schema, stages)
    print(json.dumps({"bytes": size, "cpu_seconds": {k: round(v, 3) for k, v in seconds.items()}}, indent=1))


if __name__ == "__main__":
    main()
