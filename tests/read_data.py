"""Small registered datasets for the read-platform tests: unequal shards, ids 0..rows-1 in contract order."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import dsm
from dsm.contract import Contract

SIZES = (700, 1300, 400, 1100, 500)
ROWS = sum(SIZES)
ROW_GROUP = 128


def table(start: int, rows: int) -> pa.Table:
    """Rows ``start .. start+rows-1``: an id, a text of varying length, a score."""
    ids = list(range(start, start + rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "text": [f"row {i} " + "x" * (i % 23) for i in ids],
            "score": pa.array([i / 7 for i in ids], pa.float64()),
        }
    )


def shard_bytes(fmt: str, part: pa.Table) -> bytes:
    """One shard's file: Parquet with small row groups, or JSONL with a few blank lines."""
    if fmt == "parquet":
        sink = pa.BufferOutputStream()
        pq.write_table(part, sink, row_group_size=ROW_GROUP)
        return bytes(sink.getvalue().to_pybytes())
    if fmt != "jsonl":  # arrow, csv: written by dsm's own format writers
        import io

        from dsm.formats import get_format

        buffer = io.BytesIO()
        with get_format(fmt).open_writer(buffer, part.schema) as writer:
            for batch in part.to_batches(max_chunksize=300):
                writer.write_batch(batch)
        return buffer.getvalue()
    lines = []
    for row in part.to_pylist():
        lines.append(json.dumps(row))
        if row["id"] % 97 == 0:
            lines.append("")  # blank lines are not rows
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_shards(fs: Any, root: str, fmt: str, sizes: Sequence[int] = SIZES) -> list[str]:
    """Write the shards under ``root`` (a path on ``fs``); returns their names."""
    names = []
    start = 0
    for index, rows in enumerate(sizes):
        name = f"part-{index:05d}.{fmt}"
        with fs.open(f"{root.rstrip('/')}/{name}", "wb") as handle:
            handle.write(shard_bytes(fmt, table(start, rows)))
        names.append(name)
        start += rows
    return names


def register_local(
    tmp: Path, fmt: str, *, name: str = "reads", sizes: Sequence[int] = SIZES
) -> tuple[str, str]:
    """Write and register a dataset on local disk; returns ``(reference, registry)``."""
    from fsspec.implementations.local import LocalFileSystem

    folder = tmp / f"data-{fmt}"
    folder.mkdir(parents=True, exist_ok=True)
    write_shards(LocalFileSystem(), str(folder), fmt, sizes)
    registry = str(tmp / "registry")
    contract = dsm.register(str(folder), name=name, registry=registry)
    return contract.ref, registry


def ids(batches: Iterable[pa.RecordBatch]) -> list[int]:
    out: list[int] = []
    for batch in batches:
        out.extend(batch.column("id").to_pylist())
    return out


def batch_ids(batches: Iterable[pa.RecordBatch]) -> list[list[int]]:
    return [batch.column("id").to_pylist() for batch in batches]


def shard_of(contract: Contract, row_id: int) -> int:
    """The contract index of the shard holding ``row_id``."""
    start = 0
    for index, shard in enumerate(contract.shards):
        if row_id < start + (shard.rows or 0):
            return index
        start += shard.rows or 0
    raise ValueError(row_id)
