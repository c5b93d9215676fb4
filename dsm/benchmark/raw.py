"""The raw request table of ``dsm bench --raw``: every request and every shard visit of every run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from dsm.benchmark.options import RAW_EXTENSIONS, check_output, write_output
from dsm.benchmark.results import BenchReport
from dsm.benchmark.runner import RunTimings

__all__ = ["raw_table", "write_raw"]


_RAW_SCHEMA = pa.schema(
    [
        ("dataset", pa.string()),
        ("workers", pa.int32()),
        ("repetition", pa.int32()),
        ("kind", pa.string()),
        ("worker", pa.int32()),
        ("shard", pa.string()),
        ("offset", pa.int64()),
        ("start_s", pa.float64()),
        ("latency_s", pa.float64()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
        ("measured", pa.bool_()),
        ("status", pa.string()),
    ]
)
_STATUS_NAMES = pa.array(["done", "failed", "stopped"])


def _run_table(
    dataset: str, workers: int, repetition: int, t: RunTimings, window_start: int, paths: pa.Array, mode: str
) -> pa.Table:
    n, m = t.req_start.size, t.shard_open.size
    requests = {
        "dataset": pa.array([dataset] * n, pa.string()),
        "workers": pa.array(np.full(n, workers, np.int32)),
        "repetition": pa.array(np.full(n, repetition, np.int32)),
        "kind": pa.array(["request"] * n, pa.string()),
        "worker": pa.array(t.req_worker.astype(np.int32)),
        "shard": paths.take(pa.array(t.req_shard)),
        "offset": pa.array(t.req_offset) if mode == "bytes" else pa.nulls(n, pa.int64()),
        "start_s": pa.array((t.req_start - t.t0_ns) / 1e9),
        "latency_s": pa.array((t.req_end - t.req_start) / 1e9),
        "bytes": pa.array(t.req_bytes),
        "rows": pa.array(t.req_rows) if mode == "decode" else pa.nulls(n, pa.int64()),
        "measured": pa.array(t.req_start >= window_start),
        "status": pa.nulls(n, pa.string()),
    }
    started = t.shard_first > 0
    shards = {
        "dataset": pa.array([dataset] * m, pa.string()),
        "workers": pa.array(np.full(m, workers, np.int32)),
        "repetition": pa.array(np.full(m, repetition, np.int32)),
        "kind": pa.array(["shard"] * m, pa.string()),
        "worker": pa.array(t.shard_worker.astype(np.int32)),
        "shard": paths.take(pa.array(t.shard_index)),
        "offset": pa.nulls(m, pa.int64()),
        "start_s": pa.array((t.shard_open - t.t0_ns) / 1e9),
        "latency_s": pa.array((t.shard_first - t.shard_open) / 1e9, mask=~started),
        "bytes": pa.nulls(m, pa.int64()),
        "rows": pa.nulls(m, pa.int64()),
        "measured": pa.array(t.shard_open >= window_start),
        "status": _STATUS_NAMES.take(pa.array(t.shard_status)),
    }
    return pa.concat_tables([pa.table(requests, schema=_RAW_SCHEMA), pa.table(shards, schema=_RAW_SCHEMA)])


def raw_table(report: BenchReport) -> pa.Table:
    """Every request (``kind="request"``: latency, bytes, and in bytes mode the block's offset) and every
    shard visit (``kind="shard"``: time to first byte as ``latency_s``, and its status) of every run, with
    ``start_s`` in seconds from the run's start and ``measured`` false for warm-up requests."""
    tables = []
    for bench_ in (report.ref, report.other):
        if bench_ is None:
            continue
        for result in bench_.results:
            if result.samples is None:
                continue
            paths = pa.array(result.samples.shard_paths, pa.string())
            for repetition, (t, window_start) in enumerate(result.samples.runs):
                tables.append(
                    _run_table(
                        bench_.dataset, result.workers, repetition, t, window_start, paths, report.mode
                    )
                )
    return pa.concat_tables(tables) if tables else _RAW_SCHEMA.empty_table()


def write_raw(report: BenchReport, path: str, *, storage_options: Mapping[str, Any] | None = None) -> None:
    """Write :func:`raw_table` to ``path``: Parquet (``.parquet``/``.pq``) or CSV (``.csv``), atomically."""
    check_output(path, RAW_EXTENSIONS, "raw")
    table = raw_table(report)
    sink = pa.BufferOutputStream()
    if str(path).lower().endswith(".csv"):
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sink)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, sink, compression="zstd")
    write_output(path, sink.getvalue().to_pybytes(), storage_options)
