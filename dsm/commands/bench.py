"""``dsm bench``: how fast a registered dataset reads, the way a training job reads it; and two side by side.

A run starts ``workers`` reader threads on one dataset and records every request: in ``bytes`` mode a block
read from the shard's file object, in ``decode`` mode one record batch from the format layer
(:func:`dsm.shards.iter_open_shard`). From the requests of a run come bytes/s, rows/s, files/s, latency and
time-to-first-byte percentiles, errors and retries, and when the first and the last worker ran out of work.
A sweep over several worker counts finds the knee; ``compare`` runs a second dataset in the same session,
interleaved with the first, and gates turn the figures into a verdict. See docs/bench.md for the definitions.

>>> report = bench("web@prod", workers="1,2,4", compare="web@next", max_regression=10)  # doctest: +SKIP
>>> report.passed, report.ref.knee.workers  # doctest: +SKIP
(True, 2)
"""

from __future__ import annotations

import math
import os
import platform
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import numpy as np
import pyarrow as pa

from dsm.benchmark.results import (
    BenchReport,
    ComparisonRow,
    DatasetBench,
    GateResult,
    Gates,
    Knee,
    KneeStep,
    Percentiles,
    Provenance,
    Repetition,
    RunFigures,
    WorkerResult,
    compare_results,
    evaluate_gates,
    find_knee,
    measure_run,
    worker_result,
)
from dsm.benchmark.runner import (
    CacheDrop,
    ErrorRecord,
    RunSpec,
    RunTimings,
    drop_caches,
    execute_run,
    prime_decoder,
    process_read_bytes,
)
from dsm.contract import Contract
from dsm.engine import NullProgress, Progress
from dsm.errors import InputError
from dsm.formats import get_format
from dsm.registry import Registry, resolve
from dsm.storage import Location, location, redact
from dsm.units import parse_rate, parse_size

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "BenchReport",
    "ComparisonRow",
    "DatasetBench",
    "ErrorRecord",
    "GateResult",
    "Gates",
    "Knee",
    "KneeStep",
    "Percentiles",
    "Provenance",
    "Repetition",
    "WorkerResult",
    "bench",
    "compare_results",
    "evaluate_gates",
    "find_knee",
    "parse_rate",
    "parse_size",
    "parse_workers",
    "write_html",
    "write_raw",
]

DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024
"""Bytes per read request in ``bytes`` mode unless ``block_size`` says otherwise."""

_MODES = ("bytes", "decode")
_PATTERNS = ("sequential", "random")
_RAW_EXTENSIONS = (".parquet", ".pq", ".csv")
_HTML_EXTENSIONS = (".html", ".htm")


# ---------------------------------------------------------------------------------------------- parsing


def parse_workers(value: int | str | Sequence[int]) -> tuple[int, ...]:
    """Worker counts from ``4``, ``"1,2,4,8"`` or ``[1, 2, 4]``: sorted, without duplicates, each >= 1.

    >>> parse_workers("4,1,2")
    (1, 2, 4)
    """
    if isinstance(value, bool):
        raise InputError(f"workers: expected a count or a list such as 1,2,4; got {value!r}")
    if isinstance(value, int):
        items: list[Any] = [value]
    elif isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    else:
        items = list(value)
    counts = []
    for item in items:
        try:
            count = int(item)
        except (TypeError, ValueError):
            raise InputError(
                f"workers: {item!r} is not a whole number (give a count or a list such as 1,2,4)"
            ) from None
        if count < 1 or str(count) != str(item).strip():
            raise InputError(f"workers: {item!r} must be a whole number of at least 1")
        counts.append(count)
    if not counts:
        raise InputError("workers: give at least one worker count, e.g. 4 or 1,2,4,8")
    return tuple(sorted(set(counts)))


# ---------------------------------------------------------------------------------------------- options


@dataclass(frozen=True, kw_only=True)
class _Options:
    workers: tuple[int, ...]
    duration: float | None
    pattern: str
    mode: str
    columns: tuple[str, ...] | None
    cold: bool
    block_size: int
    warmup: float
    warmup_requests: int | None
    seed: int
    repeat: int
    knee_threshold: float
    retries: int
    gates: Gates
    output: str | None
    raw: str | None

    def arguments(self, compare: str | None) -> dict[str, Any]:
        return {
            "workers": list(self.workers),
            "duration": self.duration,
            "pattern": self.pattern,
            "mode": self.mode,
            "columns": list(self.columns) if self.columns is not None else None,
            "cold": self.cold,
            "block_size": self.block_size if self.mode == "bytes" else None,
            "warmup": self.warmup if self.warmup_requests is None else None,
            "warmup_requests": self.warmup_requests,
            "seed": self.seed,
            "repeat": self.repeat,
            "knee_threshold": self.knee_threshold,
            "retries": self.retries,
            "compare": compare,
            **self.gates.to_dict(),
        }


def _number(value: Any, what: str, *, minimum: float, inclusive: bool = True) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: {value!r} is not a number") from None
    if not math.isfinite(number) or number < minimum or (not inclusive and number == minimum):
        bound = f"at least {minimum:g}" if inclusive else f"more than {minimum:g}"
        raise InputError(f"{what}: {value!r} must be {bound}")
    return number


def _whole(value: Any, what: str, *, minimum: int) -> int:
    whole_float = isinstance(value, float) and value.is_integer()
    if isinstance(value, bool) or not (isinstance(value, (int, str)) or whole_float):
        raise InputError(f"{what}: {value!r} is not a whole number")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: {value!r} is not a whole number") from None
    if number < minimum:
        raise InputError(f"{what}: {value!r} must be at least {minimum}")
    return number


def _check_output(path: str | None, extensions: tuple[str, ...], what: str) -> str | None:
    if path is None:
        return None
    if not str(path).lower().endswith(extensions):
        raise InputError(f"{what}: {path!r} must end in {' or '.join(extensions)}")
    return str(path)


def _validate(
    *,
    workers: int | str | Sequence[int],
    duration: float | None,
    pattern: str,
    mode: str,
    columns: str | Sequence[str] | None,
    cold: bool,
    block_size: int | str | None,
    warmup: float | None,
    warmup_requests: int | None,
    seed: int,
    repeat: int,
    knee_threshold: float,
    retries: int,
    min_throughput: float | str | None,
    max_p99: float | None,
    max_regression: float | None,
    max_errors: int | None,
    has_compare: bool,
    output: str | None,
    raw: str | None,
) -> _Options:
    """Every option checked before anything is read, so a bad combination costs nothing (exit 2)."""
    if mode not in _MODES:
        raise InputError(f"mode: {mode!r} is not one of: {', '.join(_MODES)}")
    if pattern not in _PATTERNS:
        raise InputError(f"pattern: {pattern!r} is not one of: {', '.join(_PATTERNS)}")
    counts = parse_workers(workers)
    length = None if duration is None else _number(duration, "duration", minimum=0.0, inclusive=False)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    if columns is not None:
        if mode != "decode":
            raise InputError("columns: a projection needs --mode decode (bytes mode reads whole files)")
        columns = tuple(str(c) for c in columns)
        if not columns:
            raise InputError("columns: give at least one column name")
    if block_size is not None and mode != "bytes":
        raise InputError("block_size: applies to --mode bytes; decode mode reads the format's record batches")
    size = parse_size(block_size, what="block_size") if block_size is not None else DEFAULT_BLOCK_SIZE
    if warmup is not None and warmup_requests is not None:
        raise InputError("warmup and warmup_requests: give the warm-up in seconds or in requests, not both")
    if warmup is not None:
        warm = _number(warmup, "warmup", minimum=0.0)
        if length is not None and warm >= length:
            raise InputError(f"warmup: {warm:g} s must be shorter than the duration ({length:g} s)")
    else:
        warm = 0.0 if length is None or warmup_requests is not None else length / 10
    warm_requests = None if warmup_requests is None else _whole(warmup_requests, "warmup_requests", minimum=0)
    if max_regression is not None and not has_compare:
        raise InputError("max_regression: compares OTHER with REF; give --compare OTHER")
    gates = Gates(
        min_throughput=None if min_throughput is None else parse_rate(min_throughput, what="min_throughput"),
        max_p99=None if max_p99 is None else _number(max_p99, "max_p99", minimum=0.0, inclusive=False),
        max_regression=None
        if max_regression is None
        else _number(max_regression, "max_regression", minimum=0.0),
        max_errors=None if max_errors is None else _whole(max_errors, "max_errors", minimum=0),
    )
    return _Options(
        workers=counts,
        duration=length,
        pattern=pattern,
        mode=mode,
        columns=columns,
        cold=bool(cold),
        block_size=size,
        warmup=warm,
        warmup_requests=warm_requests,
        seed=_whole(seed, "seed", minimum=0),
        repeat=_whole(repeat, "repeat", minimum=1),
        knee_threshold=_number(knee_threshold, "knee_threshold", minimum=0.0, inclusive=False),
        retries=_whole(retries, "retries", minimum=0),
        gates=gates,
        output=_check_output(output, _HTML_EXTENSIONS, "output"),
        raw=_check_output(raw, _RAW_EXTENSIONS, "raw"),
    )


# ---------------------------------------------------------------------------------------------- provenance


def _versions() -> dict[str, str]:
    from dsm import __version__

    found = {"dsm": __version__}
    for package in ("pyarrow", "fsspec", "numpy", "s3fs", "adlfs"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def _provenance(
    contract: Contract, loc: Location, options: _Options, compare: str | None, caches: Mapping[str, Any]
) -> Provenance:
    return Provenance(
        dataset=contract.ref,
        fingerprint=contract.fingerprint.unordered if contract.fingerprint else None,
        location=redact(contract.location),
        format=contract.format,
        shards=len(contract.shards),
        bytes=contract.total_bytes,
        rows=contract.total_rows,
        filesystem={
            "class": f"{type(loc.fs).__module__}.{type(loc.fs).__qualname__}",
            "protocol": loc.protocol,
        },
        versions=_versions(),
        host=socket.gethostname(),
        cores=os.cpu_count(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        platform=platform.platform(),
        arguments=options.arguments(compare),
        seed=options.seed,
        caches=caches,
        started=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def _cache_summary(cold: bool, drops: list[CacheDrop], loc: Location) -> dict[str, Any]:
    if not cold:
        where = "the page cache" if loc.is_local else f"{loc.protocol}:// and its client"
        return {
            "state": "warm",
            "cold_requested": False,
            "applied": False,
            "note": f"no cache was dropped: data read before may be served from {where}",
        }
    applied = bool(drops) and all(d.applied for d in drops)
    note = drops[-1].note if drops else "no run"
    if applied:
        note = f"before each of the {len(drops)} runs: {note}"
    return {"state": "cold" if applied else "warm", "cold_requested": True, "applied": applied, "note": note}


# ---------------------------------------------------------------------------------------------- bench


@dataclass(frozen=True, kw_only=True)
class _Target:
    contract: Contract
    loc: Location
    spec_base: dict[str, Any]


def _target(contract: Contract, options: _Options, storage_options: Mapping[str, Any] | None) -> _Target:
    loc = location(contract.location, storage_options)
    fmt = None
    schema: pa.Schema | None = None
    if options.mode == "decode":
        fmt = get_format(contract.format, **dict(contract.format_options))
        schema = contract.schema.to_arrow()
        if options.columns is not None:
            unknown = [c for c in options.columns if c not in contract.schema.names]
            if unknown:
                raise InputError(
                    f"columns: {', '.join(unknown)} not in {contract.ref} (its columns: "
                    f"{', '.join(contract.schema.names)})"
                )
    return _Target(
        contract=contract,
        loc=loc,
        spec_base={
            "loc": loc,
            "shards": contract.shards,
            "mode": options.mode,
            "pattern": options.pattern,
            "block_size": options.block_size,
            "seed": options.seed,
            "duration_ns": None if options.duration is None else int(options.duration * 1e9),
            "retries": options.retries,
            "fmt": fmt,
            "schema": schema,
            "columns": options.columns,
            # local files decode through native Arrow files, as dsm.open reads them (not the Python file
            # layer); their bytes then come from the process's read counter, which needs Linux
            "native": options.mode == "decode" and loc.is_local and process_read_bytes() is not None,
        },
    )


def _metric_for(contracts: Sequence[Contract]) -> str:
    return "rows_per_s" if all(c.total_rows is not None for c in contracts) else "bytes_per_s"


def bench(
    ref: str | Contract,
    *,
    compare: str | Contract | None = None,
    workers: int | str | Sequence[int] = 1,
    duration: float | None = None,
    pattern: str = "sequential",
    mode: str = "bytes",
    columns: str | Sequence[str] | None = None,
    cold: bool = False,
    block_size: int | str | None = None,
    warmup: float | None = None,
    warmup_requests: int | None = None,
    seed: int = 0,
    repeat: int = 1,
    knee_threshold: float = 0.1,
    retries: int = 2,
    min_throughput: float | str | None = None,
    max_p99: float | None = None,
    max_regression: float | None = None,
    max_errors: int | None = 0,
    output: str | None = None,
    raw: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> BenchReport:
    """Measure how ``ref`` reads (and ``compare``, interleaved with it), and check the gates.

    For each worker count in ``workers`` (``4``, ``"1,2,4,8"`` or a list), ``repeat`` times, a run reads the
    dataset with that many threads: one full pass, or for ``duration`` seconds (cycling over the shards).
    Runs go repetition by repetition, each one over the whole sweep; with ``compare``, they alternate REF,
    OTHER, REF, OTHER... so that both see the same conditions.

    - ``mode="bytes"`` reads each shard's file object in ``block_size`` blocks (default 8 MiB);
      ``mode="decode"`` decodes record batches through the format layer, projected to ``columns`` (a list
      or a comma-separated string). Local files decode through native Arrow files, and their bytes are the
      process's read counter over each run: call it where nothing else in the process reads meanwhile.
    - ``pattern="sequential"`` reads shards in contract order from their start; ``"random"`` reads shards
      in a permutation seeded by ``seed`` and, inside each, blocks (bytes) or row groups (decode, Parquet)
      in a seeded random order.
    - ``cold`` drops the page cache of each local file before each run (``posix_fadvise``); elsewhere the
      provenance says the figures are warm.
    - The warm-up (``warmup`` seconds, default 10% of ``duration`` or none on a full pass; or the first
      ``warmup_requests`` requests) is excluded from every figure, and each result says how many requests
      it excluded.
    - Gates (``min_throughput`` in bytes/s or a size such as ``"200MB/s"``, ``max_p99`` in seconds,
      ``max_regression`` in percent, ``max_errors``) become :class:`GateResult` rows; ``report.passed``
      says whether all held. A shard that fails to read is an error with its path; the run goes on.
    - ``output`` writes the HTML report, ``raw`` every request's timing (``.parquet`` or ``.csv``).

    Raises :class:`~dsm.errors.InputError` (or ``DatasetNotFound``) for bad options or an unknown dataset
    before anything is read.

    >>> report = bench("web-text@prod", workers=[1, 2, 4], mode="decode")  # doctest: +SKIP
    >>> report.ref.knee.workers, report.ref.results[0].latency_s.p99  # doctest: +SKIP
    (2, 0.0031)
    """
    options = _validate(
        workers=workers,
        duration=duration,
        pattern=pattern,
        mode=mode,
        columns=columns,
        cold=cold,
        block_size=block_size,
        warmup=warmup,
        warmup_requests=warmup_requests,
        seed=seed,
        repeat=repeat,
        knee_threshold=knee_threshold,
        retries=retries,
        min_throughput=min_throughput,
        max_p99=max_p99,
        max_regression=max_regression,
        max_errors=max_errors,
        has_compare=compare is not None,
        output=output,
        raw=raw,
    )
    contracts = [resolve(ref, registry, storage_options)]
    if compare is not None:
        contracts.append(resolve(compare, registry, storage_options))
    targets = [_target(c, options, storage_options) for c in contracts]
    for target in targets:
        fmt, schema = target.spec_base["fmt"], target.spec_base["schema"]
        if fmt is not None and schema is not None:
            prime_decoder(fmt, schema, options.columns)
    compare_ref = contracts[1].ref if len(contracts) > 1 else None

    progress = progress or NullProgress()
    runs_total = len(options.workers) * options.repeat * len(targets)
    expected = (
        sum(t.contract.total_bytes for t in targets) * len(options.workers) * options.repeat
        if options.duration is None
        else 0
    )
    names = " vs ".join(c.ref for c in contracts)
    shards = sum(len(t.contract.shards) for t in targets)
    progress.start(total_bytes=expected, total_units=shards, description=f"bench {names}, {runs_total} runs")
    measured: list[dict[int, list[tuple[RunTimings, RunFigures]]]] = [{} for _ in targets]
    drops: list[list[CacheDrop]] = [[] for _ in targets]
    try:
        # repetitions outermost: a noisy minute on the machine spreads over every worker count, and
        # REF and OTHER alternate at each step
        for repetition in range(options.repeat):
            for count in options.workers:
                for index, target in enumerate(targets):
                    caches = "warm"
                    if options.cold:
                        drop = drop_caches(target.loc, target.contract.shards)
                        drops[index].append(drop)
                        caches = "cold" if drop.applied else "warm"
                    spec = RunSpec(workers=count, **target.spec_base)
                    timings = execute_run(spec, on_poll=progress.advance)
                    if timings.interrupted:
                        raise KeyboardInterrupt
                    figures = measure_run(
                        timings,
                        target.contract,
                        mode=options.mode,
                        warmup_s=options.warmup,
                        warmup_requests=options.warmup_requests,
                        repetition=repetition,
                        caches=caches,
                    )
                    measured[index].setdefault(count, []).append((timings, figures))
    finally:
        progress.finish()

    metric = _metric_for(contracts)
    benches = []
    for index, target in enumerate(targets):
        paths = tuple(s.path for s in target.contract.shards)
        results = tuple(worker_result(count, measured[index][count], paths) for count in options.workers)
        knee = find_knee(
            [(r.workers, r.metric(metric)) for r in results], options.knee_threshold, metric=metric
        )
        caches_summary = _cache_summary(options.cold, drops[index], target.loc)
        benches.append(
            DatasetBench(
                dataset=target.contract.ref,
                provenance=_provenance(target.contract, target.loc, options, compare_ref, caches_summary),
                results=results,
                knee=knee,
            )
        )
    ref_bench = benches[0]
    other_bench = benches[1] if len(benches) > 1 else None
    notes = _notes(options, contracts, targets)
    report = BenchReport(
        ref=ref_bench,
        other=other_bench,
        comparison=compare_results(ref_bench, other_bench) if other_bench is not None else (),
        gates=evaluate_gates(ref_bench, other_bench, options.gates, metric=metric),
        metric=metric,
        mode=options.mode,
        pattern=options.pattern,
        notes=tuple(notes),
    )
    if options.raw is not None:
        write_raw(report, options.raw, storage_options=storage_options)
    if options.output is not None:
        write_html(report, options.output, storage_options=storage_options)
    return report


def _notes(options: _Options, contracts: Sequence[Contract], targets: Sequence[_Target]) -> list[str]:
    notes = []
    if options.warmup_requests is not None:
        notes.append(f"warm-up: the first {options.warmup_requests} requests of each run are excluded")
    elif options.warmup > 0:
        notes.append(
            f"warm-up: requests that started in the first {options.warmup:g} s of each run are excluded"
        )
    else:
        notes.append("warm-up: none (every request counts)")
    span = "one full pass" if options.duration is None else f"{options.duration:g} s"
    notes.append(f"each run: {span}, {options.mode} mode, {options.pattern} order, seed {options.seed}")
    if options.mode == "bytes":
        notes.append("rows in bytes mode: bytes read x each shard's rows per byte (from the contract)")
    if options.mode == "decode" and any(t.spec_base["native"] for t in targets):
        notes.append(
            "decode mode on local disk: shards are read through native Arrow files (as dsm.open reads them); "
            "bytes are what the process read during each run (/proc/self/io), shared among batches by rows"
        )
    formats = {c.format for c in contracts}
    if options.mode == "decode" and options.pattern == "random" and formats - {"parquet"}:
        notes.append(
            f"random decode: {', '.join(sorted(formats - {'parquet'}))} files decode only from their start: "
            "shards are read in random order, each from its start"
        )
    return notes


# ---------------------------------------------------------------------------------------------- files


def _write(url: str, data: bytes, storage_options: Mapping[str, Any] | None) -> None:
    parent, _, name = str(url).rstrip("/").rpartition("/")
    loc = location(parent or ".", storage_options)
    if loc.is_local:
        loc.makedirs()
    loc.write_bytes_atomic(name, data)


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
    _check_output(path, _RAW_EXTENSIONS, "raw")
    table = raw_table(report)
    sink = pa.BufferOutputStream()
    if str(path).lower().endswith(".csv"):
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sink)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, sink, compression="zstd")
    _write(path, sink.getvalue().to_pybytes(), storage_options)


def write_html(report: BenchReport, path: str, *, storage_options: Mapping[str, Any] | None = None) -> None:
    """Write the self-contained HTML report (inline SVG plots, no network needed) to ``path``, atomically."""
    from dsm.benchmark.html import render_html

    _check_output(path, _HTML_EXTENSIONS, "output")
    _write(path, render_html(report).encode("utf-8"), storage_options)
