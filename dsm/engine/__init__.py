"""Executors run the planned units of bulk work. A plan is a list of independent units; results come back
in plan order whatever the executor or worker count, so the same plan always gives the same output.

The shape every executor takes (the local one today, Ray next): a unit of work is a function plus its
argument, both picklable where the executor leaves the process; a unit's result comes back as data; and
progress goes through one callback, ``on_done(index, result)``, called in the caller's process as each unit
finishes. :class:`~dsm.engine.local.LocalExecutor` runs units in threads (``mode="thread"``, the default)
or forked processes (``mode="process"``).

>>> map_units(abs, [-1, 2, -3], workers=2)
[1, 2, 3]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, cast

from dsm.engine.local import MODES, ErrorPolicy, LocalExecutor, Mode, UnitFailure, default_workers
from dsm.engine.progress import NullProgress, Progress

__all__ = [
    "MODES",
    "ErrorPolicy",
    "Executor",
    "LocalExecutor",
    "Mode",
    "NullProgress",
    "Progress",
    "UnitFailure",
    "default_workers",
    "map_units",
    "run_units",
]

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn(unit)`` for every unit; results (or :class:`UnitFailure` under ``skip``/``collect``) in
    unit order; ``on_done(index, result)`` once per unit that succeeded."""

    name: str

    def run(
        self,
        fn: Callable[[T], R],
        units: Sequence[T],
        *,
        on_error: ErrorPolicy = "raise",
        on_done: Callable[[int, R], None] | None = None,
    ) -> list[R | UnitFailure]: ...


def run_units(
    fn: Callable[[T], R],
    units: Sequence[T],
    *,
    workers: int | None = None,
    on_error: ErrorPolicy = "raise",
    mode: Mode = "thread",
    on_done: Callable[[int, R], None] | None = None,
) -> list[R | UnitFailure]:
    """Run ``fn`` on every unit with up to ``workers`` threads (or forked processes); results in unit order.

    ``on_error="raise"`` stops at the first failure (units not started are cancelled) and re-raises it;
    ``"skip"`` and ``"collect"`` return a :class:`UnitFailure` in that unit's place.
    """
    return LocalExecutor(workers=workers, mode=mode).run(fn, units, on_error=on_error, on_done=on_done)


def map_units(
    fn: Callable[[T], R],
    units: Sequence[T],
    *,
    workers: int | None = None,
    mode: Mode = "thread",
    on_done: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``run_units`` with ``on_error="raise"``: every result, in unit order, or the first error."""
    return cast(list[R], run_units(fn, units, workers=workers, on_error="raise", mode=mode, on_done=on_done))
