"""Every option of ``dsm bench``, checked before anything is read (a bad combination costs nothing, exit 2),
and frozen as :class:`BenchOptions`; and where the reports it asks for are written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsm.benchmark.results import Gates
from dsm.errors import InputError
from dsm.storage import location
from dsm.units import parse_number, parse_rate, parse_size, parse_whole, parse_workers

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "HTML_EXTENSIONS",
    "MODES",
    "PATTERNS",
    "RAW_EXTENSIONS",
    "BenchOptions",
    "bench_options",
    "check_output",
    "write_output",
]

DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024
"""Bytes per read request in ``bytes`` mode unless ``block_size`` says otherwise."""

MODES = ("bytes", "decode")
PATTERNS = ("sequential", "random")
RAW_EXTENSIONS = (".parquet", ".pq", ".csv")
HTML_EXTENSIONS = (".html", ".htm")


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """The options of one ``dsm bench`` run, checked."""

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


def check_output(path: str | None, extensions: tuple[str, ...], what: str) -> str | None:
    if path is None:
        return None
    if not str(path).lower().endswith(extensions):
        raise InputError(f"{what}: {path!r} must end in {' or '.join(extensions)}")
    return str(path)


def write_output(url: str, data: bytes, storage_options: Mapping[str, Any] | None) -> None:
    """Write a report file atomically (its folder made on local disk)."""
    parent, _, name = str(url).rstrip("/").rpartition("/")
    loc = location(parent or ".", storage_options)
    if loc.is_local:
        loc.makedirs()
    loc.write_bytes_atomic(name, data)


def bench_options(
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
) -> BenchOptions:
    """Every option checked before anything is read, so a bad combination costs nothing (exit 2)."""
    if mode not in MODES:
        raise InputError(f"mode: {mode!r} is not one of: {', '.join(MODES)}")
    if pattern not in PATTERNS:
        raise InputError(f"pattern: {pattern!r} is not one of: {', '.join(PATTERNS)}")
    counts = parse_workers(workers)
    length = None if duration is None else parse_number(duration, "duration", minimum=0.0, inclusive=False)
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
        warm = parse_number(warmup, "warmup", minimum=0.0)
        if length is not None and warm >= length:
            raise InputError(f"warmup: {warm:g} s must be shorter than the duration ({length:g} s)")
    else:
        warm = 0.0 if length is None or warmup_requests is not None else length / 10
    warm_requests = (
        None if warmup_requests is None else parse_whole(warmup_requests, "warmup_requests", minimum=0)
    )
    if max_regression is not None and not has_compare:
        raise InputError("max_regression: compares OTHER with REF; give --compare OTHER")
    gates = Gates(
        min_throughput=None if min_throughput is None else parse_rate(min_throughput, what="min_throughput"),
        max_p99=None if max_p99 is None else parse_number(max_p99, "max_p99", minimum=0.0, inclusive=False),
        max_regression=None
        if max_regression is None
        else parse_number(max_regression, "max_regression", minimum=0.0),
        max_errors=None if max_errors is None else parse_whole(max_errors, "max_errors", minimum=0),
    )
    return BenchOptions(
        workers=counts,
        duration=length,
        pattern=pattern,
        mode=mode,
        columns=columns,
        cold=bool(cold),
        block_size=size,
        warmup=warm,
        warmup_requests=warm_requests,
        seed=parse_whole(seed, "seed", minimum=0),
        repeat=parse_whole(repeat, "repeat", minimum=1),
        knee_threshold=parse_number(knee_threshold, "knee_threshold", minimum=0.0, inclusive=False),
        retries=parse_whole(retries, "retries", minimum=0),
        gates=gates,
        output=check_output(output, HTML_EXTENSIONS, "output"),
        raw=check_output(raw, RAW_EXTENSIONS, "raw"),
    )
