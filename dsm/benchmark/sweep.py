"""Running a benchmark: for each repetition and worker count, each dataset in turn (REF and OTHER
alternate, so both see the same conditions), one run of :mod:`dsm.benchmark.runner`; then the figures, the
knee, the comparison and the gates, with the provenance of every dataset.
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pyarrow as pa

from dsm._version import __version__
from dsm.benchmark.gates import compare_results, evaluate_gates
from dsm.benchmark.host import CacheDrop, drop_caches, prime_decoder, process_read_bytes
from dsm.benchmark.options import BenchOptions
from dsm.benchmark.results import (
    BenchReport,
    DatasetBench,
    Provenance,
    RunFigures,
    find_knee,
    measure_run,
    worker_result,
)
from dsm.benchmark.runner import RunSpec, RunTimings, execute_run
from dsm.contract import Contract
from dsm.engine import NullProgress, Progress
from dsm.errors import InputError
from dsm.formats import get_format
from dsm.storage import Location, location, redact
from dsm.units import utc_now_text

__all__ = ["run_bench"]


def _versions() -> dict[str, str]:
    found = {"dsm": __version__}
    for package in ("pyarrow", "fsspec", "numpy", "s3fs", "adlfs"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def _provenance(
    contract: Contract, loc: Location, options: BenchOptions, compare: str | None, caches: Mapping[str, Any]
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
        started=utc_now_text(),
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


@dataclass(frozen=True, kw_only=True)
class _Target:
    contract: Contract
    loc: Location
    spec_base: dict[str, Any]


def _target(contract: Contract, options: BenchOptions, storage_options: Mapping[str, Any] | None) -> _Target:
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


def run_bench(
    contracts: Sequence[Contract],
    options: BenchOptions,
    *,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> BenchReport:
    """Measure how ``contracts[0]`` reads (and ``contracts[1]``, interleaved with it) under ``options``."""
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
    return report


def _notes(options: BenchOptions, contracts: Sequence[Contract], targets: Sequence[_Target]) -> list[str]:
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
