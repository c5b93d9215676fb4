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

from collections.abc import Mapping, Sequence
from typing import Any

from dsm._moved import forwarding
from dsm.benchmark.html import write_html as _write_html
from dsm.benchmark.options import bench_options
from dsm.benchmark.raw import write_raw as _write_raw
from dsm.benchmark.results import BenchReport
from dsm.benchmark.sweep import run_bench
from dsm.contract import Contract
from dsm.engine import Progress
from dsm.registry import Registry, resolve

__all__ = ["BenchReport", "bench"]

# Names this module re-exported before the engine had a package of its own: importable from here until
# dsm 0.3, with a warning that says where each lives now.
_MOVED = {
    "DEFAULT_BLOCK_SIZE": "dsm.benchmark.options",
    "ComparisonRow": "dsm.benchmark.results",
    "DatasetBench": "dsm.benchmark.results",
    "ErrorRecord": "dsm.benchmark.runner",
    "GateResult": "dsm.benchmark.results",
    "Gates": "dsm.benchmark.results",
    "Knee": "dsm.benchmark.results",
    "KneeStep": "dsm.benchmark.results",
    "Percentiles": "dsm.benchmark.results",
    "Provenance": "dsm.benchmark.results",
    "Repetition": "dsm.benchmark.results",
    "WorkerResult": "dsm.benchmark.results",
    "compare_results": "dsm.benchmark.gates",
    "evaluate_gates": "dsm.benchmark.gates",
    "find_knee": "dsm.benchmark.results",
    "parse_rate": "dsm.units",
    "parse_size": "dsm.units",
    "parse_workers": "dsm.units",
    "write_html": "dsm.benchmark.html",
    "write_raw": "dsm.benchmark.raw",
}


__getattr__ = forwarding(__name__, _MOVED)


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
    options = bench_options(
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
    report = run_bench(contracts, options, storage_options=storage_options, progress=progress)
    if options.raw is not None:
        _write_raw(report, options.raw, storage_options=storage_options)
    if options.output is not None:
        _write_html(report, options.output, storage_options=storage_options)
    return report
