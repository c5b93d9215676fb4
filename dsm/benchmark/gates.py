"""Two datasets side by side, and the gates that turn measured figures into a verdict.

>>> Gates(max_errors=0).to_dict()["max_errors"]
0
"""

from __future__ import annotations

from collections.abc import Callable

from dsm.benchmark.results import ComparisonRow, DatasetBench, GateResult, Gates, WorkerResult, plural
from dsm.errors import InputError

__all__ = ["Gates", "compare_results", "evaluate_gates"]


def _percentile_getter(kind: str, quantile: str) -> Callable[[WorkerResult], float | None]:
    def get(result: WorkerResult) -> float | None:
        value: float | None = getattr(getattr(result, f"{kind}_s"), quantile)
        return value

    return get


def compare_results(ref: DatasetBench, other: DatasetBench) -> tuple[ComparisonRow, ...]:
    """Each figure of ``ref`` and ``other`` at each worker count both measured, with ``other / ref``."""
    getters: list[tuple[str, Callable[[WorkerResult], float | None]]] = [
        ("bytes_per_s", lambda r: r.bytes_per_s),
        ("rows_per_s", lambda r: r.rows_per_s),
        ("files_per_s", lambda r: r.files_per_s),
    ]
    for kind in ("latency", "ttfb"):
        for q in ("p50", "p90", "p99", "p999", "max"):
            getters.append((f"{kind}_{q}_s", _percentile_getter(kind, q)))
    getters += [
        ("first_done_s", lambda r: r.first_done_s),
        ("last_done_s", lambda r: r.last_done_s),
        ("tail_s", lambda r: r.tail_s),
        ("errors", lambda r: float(r.errors)),
        ("retries", lambda r: float(r.retries)),
    ]
    rows = []
    other_counts = {r.workers for r in other.results}
    for a in ref.results:
        if a.workers not in other_counts:
            continue
        b = other.result(a.workers)
        for name, get in getters:
            x, y = get(a), get(b)
            ratio = None if x is None or y is None or x == 0 else y / x
            rows.append(ComparisonRow(workers=a.workers, metric=name, ref=x, other=y, ratio=ratio))
    return tuple(rows)


def evaluate_gates(
    ref: DatasetBench, other: DatasetBench | None, gates: Gates, *, metric: str = "rows_per_s"
) -> tuple[GateResult, ...]:
    """Check ``gates`` against measured figures (see :class:`Gates` for which dataset each gate reads).

    Every gate is checked at every worker count, and gives one :class:`GateResult` each.
    """
    if gates.max_regression is not None and other is None:
        raise InputError("max_regression compares two datasets: give compare=OTHER (--compare)")
    candidate = other if other is not None else ref
    results: list[GateResult] = []
    for r in candidate.results:
        if gates.min_throughput is not None:
            results.append(
                GateResult(
                    name="min_throughput",
                    dataset=candidate.dataset,
                    workers=r.workers,
                    threshold=gates.min_throughput,
                    measured=r.bytes_per_s,
                    passed=r.bytes_per_s >= gates.min_throughput,
                    detail=f"bytes/s with {plural(r.workers)} must be at least {gates.min_throughput:.6g}",
                )
            )
        if gates.max_p99 is not None:
            p99 = r.latency_s.p99
            results.append(
                GateResult(
                    name="max_p99",
                    dataset=candidate.dataset,
                    workers=r.workers,
                    threshold=gates.max_p99,
                    measured=p99,
                    passed=p99 is not None and p99 <= gates.max_p99,
                    detail=f"latency p99 with {plural(r.workers)} must be at most {gates.max_p99:g} s"
                    + ("" if p99 is not None else " (no request was measured)"),
                )
            )
    if gates.max_regression is not None and other is not None:
        counts = {r.workers for r in other.results}
        for a in ref.results:
            if a.workers not in counts:
                continue
            base, new = a.metric(metric), other.result(a.workers).metric(metric)
            drop = None if base <= 0 else (1.0 - new / base) * 100.0
            results.append(
                GateResult(
                    name="max_regression",
                    dataset=other.dataset,
                    workers=a.workers,
                    threshold=gates.max_regression,
                    measured=drop,
                    passed=drop is not None and drop <= gates.max_regression,
                    detail=f"{metric.replace('_per_s', '/s')} of {other.dataset} may fall at most "
                    f"{gates.max_regression:g}% below {ref.dataset} with {plural(a.workers)}"
                    + ("" if drop is not None else f" ({ref.dataset} read nothing)"),
                )
            )
    if gates.max_errors is not None:
        for bench_ in (ref, other):
            if bench_ is None:
                continue
            for r in bench_.results:
                results.append(
                    GateResult(
                        name="max_errors",
                        dataset=bench_.dataset,
                        workers=r.workers,
                        threshold=float(gates.max_errors),
                        measured=float(r.errors),
                        passed=r.errors <= gates.max_errors,
                        detail=f"failed requests with {plural(r.workers)} must be at most {gates.max_errors}"
                        + (
                            f" (first: {r.error_details[0].path}: {r.error_details[0].message})"
                            if r.error_details
                            else ""
                        ),
                    )
                )
    return tuple(results)
