"""Engines execute planned units of work. A plan is a list of independent units; results come back in plan
order whatever the engine or worker count, so the same plan always gives the same output.

The local engine is a thread pool: the heavy work (hashing, Arrow decoding and encoding, file I/O) releases
the GIL, and threads share in-process filesystems such as ``memory://``.

>>> run_units(lambda x: x * 2, [1, 2, 3], workers=2)
[2, 4, 6]
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar, cast

__all__ = [
    "ErrorPolicy",
    "NullProgress",
    "Progress",
    "UnitFailure",
    "default_workers",
    "map_units",
    "run_units",
]

T = TypeVar("T")
R = TypeVar("R")
ErrorPolicy = Literal["raise", "skip", "collect"]


class Progress(Protocol):
    """What long work reports to (the CLI passes a progress bar; the library default ignores it)."""

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def finish(self) -> None: ...


class NullProgress:
    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass(frozen=True, kw_only=True)
class UnitFailure:
    """A unit that raised, kept under ``on_error="collect"`` or ``"skip"``."""

    index: int
    error: BaseException


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def run_units(
    fn: Callable[[T], R],
    units: Sequence[T],
    *,
    workers: int | None = None,
    on_error: ErrorPolicy = "raise",
) -> list[R | UnitFailure]:
    """Run ``fn`` on every unit with up to ``workers`` threads; results in unit order.

    ``on_error="raise"`` stops at the first failure (units not started are cancelled) and re-raises it;
    ``"skip"`` and ``"collect"`` return a :class:`UnitFailure` in that unit's place.
    """
    workers = max(1, min(workers or default_workers(), len(units) or 1))
    if workers == 1:
        return [_call(fn, unit, i, on_error) for i, unit in enumerate(units)]
    results: list[R | UnitFailure | None] = [None] * len(units)
    stop = threading.Event()

    def task(index: int) -> None:
        if stop.is_set():
            return
        try:
            results[index] = fn(units[index])
        except BaseException as exc:
            if on_error == "raise":
                stop.set()
                raise
            results[index] = UnitFailure(index=index, error=exc)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dsm") as pool:
        futures: list[Future[None]] = [pool.submit(task, i) for i in range(len(units))]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future.done() and future.exception() is not None:
                for other in futures:
                    other.cancel()
                raise future.exception()  # type: ignore[misc]
    return results  # type: ignore[return-value]


def _call(fn: Callable[[T], R], unit: T, index: int, on_error: ErrorPolicy) -> R | UnitFailure:
    try:
        return fn(unit)
    except Exception as exc:
        if on_error == "raise":
            raise
        return UnitFailure(index=index, error=exc)


def map_units(fn: Callable[[T], R], units: Sequence[T], *, workers: int | None = None) -> list[R]:
    """``run_units`` with ``on_error="raise"``: every result, in unit order, or the first error."""
    return cast(list[R], run_units(fn, units, workers=workers, on_error="raise"))
