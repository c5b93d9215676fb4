"""Executors run the planned units of bulk work. A plan is a list of independent units; results come back
in plan order whatever the executor or worker count, so the same plan always gives the same output.

- :mod:`dsm.engine.base`: the shape every executor takes (:class:`Executor`), :class:`UnitFailure`,
  :class:`EngineReport` (where the units ran).
- :mod:`dsm.engine.local`: :class:`~dsm.engine.local.LocalExecutor`, threads (``mode="thread"``, the
  default) or forked processes (``mode="process"``) on this machine.
- :mod:`dsm.engine.ray`: ``RayExecutor``, one Ray core task per unit on a Ray cluster (``dsm[ray]``).
- :mod:`dsm.engine.progress`: the Progress protocol the CLI's bar implements.

A unit of work is a function plus its argument, both picklable where the executor leaves the process; a
unit's result comes back as data; progress goes through two callbacks called in the caller's process:
``on_done(index, result)`` as each unit finishes, and ``on_progress(nbytes)`` with what units report
(:func:`report_progress`). :func:`open_executor` picks an executor by name (``--engine local|ray``, else
``DSM_ENGINE``, else ``local``) from :data:`ENGINES`, and says what to
install when an engine's extra is missing.

>>> map_units(abs, [-1, 2, -3], workers=2)
[1, 2, 3]
>>> open_executor("local").name
'local'
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar, cast

from dsm.engine.base import (
    MODES,
    EngineReport,
    ErrorPolicy,
    Executor,
    Mode,
    UnitFailure,
    default_workers,
    unit_label,
)
from dsm.engine.local import LocalExecutor
from dsm.engine.progress import NullProgress, Progress, report_progress, rows_as_bytes, scaled
from dsm.errors import InputError
from dsm.units import parse_workers

__all__ = [
    "ENGINES",
    "ENGINE_ENV",
    "MODES",
    "EngineReport",
    "ErrorPolicy",
    "Executor",
    "LocalExecutor",
    "Mode",
    "NullProgress",
    "Progress",
    "UnitFailure",
    "default_workers",
    "engine_name",
    "map_units",
    "open_executor",
    "report_progress",
    "rows_as_bytes",
    "run_units",
    "scaled",
    "unit_label",
]

T = TypeVar("T")
R = TypeVar("R")

ENGINE_ENV = "DSM_ENGINE"
"""The environment variable that names the engine when ``--engine`` / ``engine=`` is not given."""

ENGINES: Mapping[str, tuple[str, str, str | None]] = {
    "local": ("dsm.engine.local", "LocalExecutor", None),
    "ray": ("dsm.engine.ray", "RayExecutor", "ray"),
}
"""Engine name -> (module, class, the ``dsm[...]`` extra that installs what it needs). Read-only: the
modules load only when their engine is chosen."""


def engine_name(engine: str | None) -> str:
    """The engine to use: ``engine``, else ``DSM_ENGINE``, else ``local``; an unknown name is refused."""
    name = (engine or os.environ.get(ENGINE_ENV, "") or "local").strip().lower()
    if name not in ENGINES:
        source = "" if engine else f" (from {ENGINE_ENV})"
        raise InputError(f"unknown engine {name!r}{source}: one of {', '.join(ENGINES)}")
    return name


def open_executor(
    engine: str | Executor | None = None,
    *,
    ray_address: str | None = None,
    workers: int | None = None,
) -> Executor:
    """The executor of one job: ``engine`` by name (see :func:`engine_name`), or an executor passed in
    (returned as it is, so that a caller can read its :meth:`~Executor.report` afterwards).

    ``ray_address`` (else ``RAY_ADDRESS``, else a local Ray started for the job) applies to ``ray`` only;
    given with another engine it is refused. A missing extra is an InputError naming it (``dsm[ray]``).
    """
    if engine is not None and not isinstance(engine, str):
        return engine
    name = engine_name(engine)
    if ray_address and name != "ray":
        raise InputError(f"--ray-address only applies with --engine ray (the engine is {name})")
    module_name, class_name, extra = ENGINES[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = exc.name or extra or name
        raise InputError(
            f"the {name} engine needs {missing}, which is not installed: pip install 'dsm[{extra}]'"
        ) from None
    cls = getattr(module, class_name)
    if name == "local":
        return cast(Executor, cls(workers=workers))
    return cast(Executor, cls.connect(address=ray_address, workers=workers))


def run_units(
    fn: Callable[[T], R],
    units: Sequence[T],
    *,
    workers: int | None = None,
    on_error: ErrorPolicy = "raise",
    mode: Mode = "thread",
    on_done: Callable[[int, R], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    executor: Executor | None = None,
) -> list[R | UnitFailure]:
    """Run ``fn`` on every unit with up to ``workers`` threads (or forked processes, or the tasks of
    ``executor``); results in unit order.

    ``on_error="raise"`` stops at the first failure (units not started are cancelled) and re-raises it;
    ``"skip"`` and ``"collect"`` return a :class:`UnitFailure` in that unit's place. ``on_progress`` gets
    what units report with :func:`report_progress` as they go.
    """
    if workers is not None:
        parse_workers(workers)  # a whole number in 1..MAX_WORKERS, on every engine, before anything starts
    runner: Executor = executor if executor is not None else LocalExecutor()
    return runner.run(
        fn, units, workers=workers, mode=mode, on_error=on_error, on_done=on_done, on_progress=on_progress
    )


def map_units(
    fn: Callable[[T], R],
    units: Sequence[T],
    *,
    workers: int | None = None,
    mode: Mode = "thread",
    on_done: Callable[[int, R], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    executor: Executor | None = None,
) -> list[R]:
    """``run_units`` with ``on_error="raise"``: every result, in unit order, or the first error."""
    return cast(
        list[R],
        run_units(
            fn,
            units,
            workers=workers,
            on_error="raise",
            mode=mode,
            on_done=on_done,
            on_progress=on_progress,
            executor=executor,
        ),
    )
