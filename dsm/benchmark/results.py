"""The results of ``dsm bench`` and what is computed from measured runs: figures, percentiles, the knee.

:mod:`dsm.benchmark.gates` compares two datasets' results and checks the gates.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dsm.benchmark.runner import SHARD_DONE, ErrorRecord, RunTimings
from dsm.contract import Contract

__all__ = [
    "BenchReport",
    "ComparisonRow",
    "DatasetBench",
    "GateResult",
    "Gates",
    "Knee",
    "KneeStep",
    "Percentiles",
    "Provenance",
    "Repetition",
    "RunFigures",
    "WorkerResult",
    "figure_label",
    "find_knee",
    "measure_run",
    "plural",
    "worker_result",
]

_QUANTILES = (50.0, 90.0, 99.0, 99.9)
_MAX_ERROR_DETAILS = 50


# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class Percentiles:
    """Nearest-rank percentiles of a set of durations in seconds (``None`` when there were none).

    ``p99`` is the smallest observed value such that at least 99% of the values are at most it.
    """

    p50: float | None
    p90: float | None
    p99: float | None
    p999: float | None
    max: float | None
    count: int

    @classmethod
    def of_ns(cls, values: np.ndarray) -> Percentiles:
        if values.size == 0:
            return cls(p50=None, p90=None, p99=None, p999=None, max=None, count=0)
        n = values.size
        # nearest rank: the ceil(q/100 * n)-th smallest value (the epsilon keeps 99.9% of 1000 at rank 999)
        ranks = [min(n, max(1, math.ceil(q / 100.0 * n - 1e-9))) for q in _QUANTILES]
        seconds = np.partition(values, [r - 1 for r in ranks])[[r - 1 for r in ranks]] / 1e9
        return cls(
            p50=float(seconds[0]),
            p90=float(seconds[1]),
            p99=float(seconds[2]),
            p999=float(seconds[3]),
            max=float(values.max()) / 1e9,
            count=int(values.size),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "p999": self.p999,
            "max": self.max,
            "count": self.count,
        }


@dataclass(frozen=True, kw_only=True)
class Repetition:
    """The figures of one timed run (one worker count, one repetition)."""

    repetition: int
    elapsed_s: float
    bytes: int
    rows: int
    files: int
    requests: int
    bytes_per_s: float
    rows_per_s: float
    files_per_s: float
    first_done_s: float
    last_done_s: float
    warmup_requests_excluded: int
    caches: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "repetition": self.repetition,
            "elapsed_s": self.elapsed_s,
            "bytes": self.bytes,
            "rows": self.rows,
            "files": self.files,
            "requests": self.requests,
            "bytes_per_s": self.bytes_per_s,
            "rows_per_s": self.rows_per_s,
            "files_per_s": self.files_per_s,
            "first_done_s": self.first_done_s,
            "last_done_s": self.last_done_s,
            "warmup_requests_excluded": self.warmup_requests_excluded,
            "caches": self.caches,
        }


@dataclass(frozen=True, kw_only=True)
class _Samples:
    """Raw measurements kept for the HTML report and ``write_raw`` (not part of ``to_dict``)."""

    latency_ns: np.ndarray
    ttfb_ns: np.ndarray
    runs: tuple[tuple[RunTimings, int], ...]  # (timings, window start) per repetition
    shard_paths: tuple[str, ...]  # RunTimings' shard indexes point into this


@dataclass(frozen=True, kw_only=True)
class WorkerResult:
    """The figures at one worker count.

    Throughputs, elapsed and done times are medians over the repetitions; ``bytes``, ``rows``, ``files``,
    ``requests``, ``errors`` and ``retries`` are totals; latency and time-to-first-byte percentiles pool
    every measured request (or shard) of every repetition.
    """

    workers: int
    repetitions: tuple[Repetition, ...]
    elapsed_s: float
    bytes: int
    rows: int
    files: int
    requests: int
    bytes_per_s: float
    rows_per_s: float
    files_per_s: float
    latency_s: Percentiles
    ttfb_s: Percentiles
    errors: int
    retries: int
    error_details: tuple[ErrorRecord, ...]
    first_done_s: float
    last_done_s: float
    warmup_requests_excluded: int
    samples: _Samples | None = field(default=None, compare=False, repr=False)

    @property
    def tail_s(self) -> float:
        """How long the last worker read after the first one ran out of work."""
        return max(0.0, self.last_done_s - self.first_done_s)

    def metric(self, name: str) -> float:
        return float(getattr(self, name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "bytes_per_s": self.bytes_per_s,
            "rows_per_s": self.rows_per_s,
            "files_per_s": self.files_per_s,
            "latency_s": self.latency_s.to_dict(),
            "ttfb_s": self.ttfb_s.to_dict(),
            "errors": self.errors,
            "retries": self.retries,
            "error_details": [e.to_dict() for e in self.error_details],
            "bytes": self.bytes,
            "rows": self.rows,
            "files": self.files,
            "requests": self.requests,
            "elapsed_s": self.elapsed_s,
            "first_done_s": self.first_done_s,
            "last_done_s": self.last_done_s,
            "tail_s": self.tail_s,
            "warmup_requests_excluded": self.warmup_requests_excluded,
            "repetitions": [r.to_dict() for r in self.repetitions],
        }


@dataclass(frozen=True, kw_only=True)
class KneeStep:
    """Throughput gained from one measured worker count to the next, scaled to one doubling."""

    from_workers: int
    to_workers: int
    gain_per_doubling: float | None  # None when the lower count read nothing

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_workers": self.from_workers,
            "to_workers": self.to_workers,
            "gain_per_doubling": self.gain_per_doubling,
        }


@dataclass(frozen=True, kw_only=True)
class Knee:
    """Where adding readers stops helping: the smallest measured worker count from which the next measured
    count gains less than ``threshold`` per doubling (``None``: not reached, or fewer than two counts)."""

    workers: int | None
    metric: str
    threshold: float
    steps: tuple[KneeStep, ...]
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "metric": self.metric,
            "threshold": self.threshold,
            "steps": [s.to_dict() for s in self.steps],
            "note": self.note,
        }


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where the figures come from: the data, the storage, the software, the machine and the arguments."""

    dataset: str
    fingerprint: str | None
    location: str
    format: str
    shards: int
    bytes: int
    rows: int | None
    filesystem: Mapping[str, str]
    versions: Mapping[str, str]
    host: str
    cores: int | None
    python: str
    platform: str
    arguments: Mapping[str, Any]
    seed: int
    caches: Mapping[str, Any]
    started: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "fingerprint": self.fingerprint,
            "location": self.location,
            "format": self.format,
            "shards": self.shards,
            "bytes": self.bytes,
            "rows": self.rows,
            "filesystem": dict(self.filesystem),
            "versions": dict(self.versions),
            "host": self.host,
            "cores": self.cores,
            "python": self.python,
            "platform": self.platform,
            "arguments": dict(self.arguments),
            "seed": self.seed,
            "caches": dict(self.caches),
            "started": self.started,
        }


@dataclass(frozen=True, kw_only=True)
class DatasetBench:
    """Every figure measured for one dataset: one :class:`WorkerResult` per worker count, and the knee."""

    dataset: str
    provenance: Provenance
    results: tuple[WorkerResult, ...]
    knee: Knee

    def result(self, workers: int) -> WorkerResult:
        for r in self.results:
            if r.workers == workers:
                return r
        raise KeyError(workers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "provenance": self.provenance.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "knee": self.knee.to_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    """One figure of REF and OTHER at one worker count, and ``ratio = other / ref``."""

    workers: int
    metric: str
    ref: float | None
    other: float | None
    ratio: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "metric": self.metric,
            "ref": self.ref,
            "other": self.other,
            "ratio": self.ratio,
        }


@dataclass(frozen=True, kw_only=True)
class GateResult:
    """One gate checked at one worker count for one dataset: what it asked, what was measured, the verdict."""

    name: str
    dataset: str
    workers: int
    threshold: float
    measured: float | None
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dataset": self.dataset,
            "workers": self.workers,
            "threshold": self.threshold,
            "measured": self.measured,
            "passed": self.passed,
            "detail": self.detail,
        }


@dataclass(frozen=True, kw_only=True)
class Gates:
    """Thresholds a benchmark must meet. ``None`` switches a gate off.

    - ``min_throughput``: bytes/s that the gated dataset must reach at every measured worker count.
    - ``max_p99``: seconds that its request latency p99 must not exceed at every worker count.
    - ``max_regression``: percent by which OTHER's throughput (the report's metric) may fall below REF's at
      the same worker count; needs a comparison.
    - ``max_errors``: failed requests allowed per worker count, for REF and OTHER alike (default 0).

    The gated dataset is OTHER when comparing (the candidate), else REF.
    """

    min_throughput: float | None = None
    max_p99: float | None = None
    max_regression: float | None = None
    max_errors: int | None = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_throughput": self.min_throughput,
            "max_p99": self.max_p99,
            "max_regression": self.max_regression,
            "max_errors": self.max_errors,
        }


@dataclass(frozen=True, kw_only=True)
class BenchReport:
    """The outcome of :func:`bench`: REF's figures, OTHER's when comparing, the side by side, the gates.

    ``passed`` is True when every gate held. ``metric`` is the throughput that the knee and the regression
    gate use: ``rows_per_s`` when every shard of the datasets has a row count, else ``bytes_per_s``.
    """

    ref: DatasetBench
    other: DatasetBench | None
    comparison: tuple[ComparisonRow, ...]
    gates: tuple[GateResult, ...]
    metric: str
    mode: str
    pattern: str
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def failed_gates(self) -> list[GateResult]:
        return [g for g in self.gates if not g.passed]

    def to_dict(self) -> dict[str, Any]:
        out = self.ref.to_dict()
        out.update(
            {
                "mode": self.mode,
                "pattern": self.pattern,
                "metric": self.metric,
                "compare": self.other.to_dict() if self.other is not None else None,
                "comparison": [c.to_dict() for c in self.comparison],
                "gates": [g.to_dict() for g in self.gates],
                "passed": self.passed,
                "notes": list(self.notes),
            }
        )
        return out


# ---------------------------------------------------------------------------------------------- analysis


def plural(workers: int) -> str:
    """``1 worker``, ``4 workers``."""
    return "1 worker" if workers == 1 else f"{workers} workers"


def find_knee(
    points: Sequence[tuple[int, float]], threshold: float = 0.1, *, metric: str = "rows_per_s"
) -> Knee:
    """The knee of a concurrency sweep.

    For consecutive measured worker counts ``a < b`` with throughputs ``T(a)``, ``T(b)``, the gain per
    doubling is ``(T(b) / T(a)) ** (1 / log2(b / a)) - 1`` (for ``b = 2a`` simply ``T(b) / T(a) - 1``). The
    knee is the smallest ``a`` whose gain to the next count is below ``threshold``: from there on, doubling
    the readers adds less than that fraction. ``None`` when every step gains at least ``threshold``.

    >>> find_knee([(1, 100.0), (2, 180.0), (4, 190.0)], 0.1).workers
    2
    """
    ordered = sorted(points)
    steps: list[KneeStep] = []
    knee: int | None = None
    for (a, ta), (b, tb) in itertools.pairwise(ordered):
        gain = None if ta <= 0 else (tb / ta) ** (1.0 / math.log2(b / a)) - 1.0
        steps.append(KneeStep(from_workers=a, to_workers=b, gain_per_doubling=gain))
        if knee is None and gain is not None and gain < threshold:
            knee = a
    if len(ordered) < 2:
        note = "one worker count was measured: give a sweep (e.g. --workers 1,2,4,8) to find the knee"
    elif knee is None:
        note = (
            f"not reached: every step up to {ordered[-1][0]} workers gains at least {threshold:.0%} "
            "per doubling; try more workers"
        )
    else:
        unit = metric.replace("_per_s", "/s")
        note = f"{plural(knee)}: from there, doubling the workers adds less than {threshold:.0%} {unit}"
    return Knee(workers=knee, metric=metric, threshold=threshold, steps=tuple(steps), note=note)


@dataclass(frozen=True, kw_only=True)
class RunFigures:
    repetition: Repetition
    latency_ns: np.ndarray
    ttfb_ns: np.ndarray
    window_start: int


def measure_run(
    t: RunTimings,
    contract: Contract,
    *,
    mode: str,
    warmup_s: float,
    warmup_requests: int | None,
    repetition: int,
    caches: str,
) -> RunFigures:
    """The figures of one run, over the requests that started after the warm-up."""
    starts = t.req_start
    if warmup_requests:
        window_start = (
            int(np.partition(starts, warmup_requests)[warmup_requests])
            if warmup_requests < starts.size
            else None
        )
    else:
        window_start = t.t0_ns + int(warmup_s * 1e9)
    window_end = int(t.worker_done.max()) if t.worker_done.size else t.t0_ns
    if window_start is None:
        measured = np.zeros(starts.size, dtype=bool)
        window_start = window_end
    else:
        measured = starts >= window_start
    elapsed_ns = max(0, window_end - window_start)
    nbytes = int(t.req_bytes[measured].sum())
    if mode == "decode":
        rows = int(t.req_rows[measured].sum())
    else:
        # bytes mode decodes no rows: a request stands for its share of the shard's rows (contract)
        density = np.array(
            [(s.rows or 0) / s.bytes if s.bytes else 0.0 for s in contract.shards], dtype=np.float64
        )
        rows = (
            round(float((t.req_bytes[measured] * density[t.req_shard[measured]]).sum()))
            if density.size
            else 0
        )
    visits = t.shard_open >= window_start
    files = int(np.count_nonzero(visits & (t.shard_status == SHARD_DONE)))
    started = visits & (t.shard_first > 0)
    ttfb = (t.shard_first - t.shard_open)[started]
    latency = (t.req_end - t.req_start)[measured]
    elapsed = elapsed_ns / 1e9
    done = t.worker_done - t.t0_ns

    def per_s(x: int) -> float:
        return x / elapsed if elapsed > 0 else 0.0

    return RunFigures(
        repetition=Repetition(
            repetition=repetition,
            elapsed_s=elapsed,
            bytes=nbytes,
            rows=rows,
            files=files,
            requests=int(np.count_nonzero(measured)),
            bytes_per_s=per_s(nbytes),
            rows_per_s=per_s(rows),
            files_per_s=per_s(files),
            first_done_s=float(done.min()) / 1e9 if done.size else 0.0,
            last_done_s=float(done.max()) / 1e9 if done.size else 0.0,
            warmup_requests_excluded=int(starts.size - np.count_nonzero(measured)),
            caches=caches,
        ),
        latency_ns=latency,
        ttfb_ns=ttfb,
        window_start=window_start,
    )


def worker_result(
    workers: int, runs: list[tuple[RunTimings, RunFigures]], shard_paths: tuple[str, ...]
) -> WorkerResult:
    reps = [f.repetition for _, f in runs]
    errors = [e for t, _ in runs for e in t.errors]
    latency = np.concatenate([f.latency_ns for _, f in runs]) if runs else np.zeros(0, np.int64)
    ttfb = np.concatenate([f.ttfb_ns for _, f in runs]) if runs else np.zeros(0, np.int64)

    def median(get: Callable[[Repetition], float]) -> float:
        return float(statistics.median(get(r) for r in reps)) if reps else 0.0

    return WorkerResult(
        workers=workers,
        repetitions=tuple(reps),
        elapsed_s=median(lambda r: r.elapsed_s),
        bytes=sum(r.bytes for r in reps),
        rows=sum(r.rows for r in reps),
        files=sum(r.files for r in reps),
        requests=sum(r.requests for r in reps),
        bytes_per_s=median(lambda r: r.bytes_per_s),
        rows_per_s=median(lambda r: r.rows_per_s),
        files_per_s=median(lambda r: r.files_per_s),
        latency_s=Percentiles.of_ns(latency),
        ttfb_s=Percentiles.of_ns(ttfb),
        errors=len(errors),
        retries=sum(t.retries for t, _ in runs),
        error_details=tuple(errors[:_MAX_ERROR_DETAILS]),
        first_done_s=median(lambda r: r.first_done_s),
        last_done_s=median(lambda r: r.last_done_s),
        warmup_requests_excluded=sum(r.warmup_requests_excluded for r in reps),
        samples=_Samples(
            latency_ns=latency,
            ttfb_ns=ttfb,
            runs=tuple((t, f.window_start) for t, f in runs),
            shard_paths=shard_paths,
        ),
    )


def figure_label(metric: str) -> str:
    """``latency_p999_s`` -> ``latency p99.9``; ``bytes_per_s`` -> ``bytes/s``."""
    text = metric.replace("_per_s", "/s").replace("p999", "p99.9")
    text = text[:-2] if text.endswith("_s") else text
    return text.replace("_", " ")
