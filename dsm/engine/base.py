"""What every executor shares: the shape of one (:class:`Executor`), a unit that failed, and the report of
where the units ran (:class:`EngineReport`).

A unit of work is a function plus its argument. Executors that leave the process (forked workers, a Ray
cluster) pickle both, so a job's function is a top-level function, or a :func:`functools.partial` of one
over the job's context (locations, plan, formats): data only, never an open file or a progress bar.
Progress reaches the caller through one callback, ``on_done(index, result)``, called in the caller's
process as each unit finishes.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

__all__ = [
    "MODES",
    "EngineReport",
    "ErrorPolicy",
    "Executor",
    "Mode",
    "UnitFailure",
    "default_workers",
    "telling_idle",
    "unit_label",
    "workers_idle",
]

T = TypeVar("T")
R = TypeVar("R")
ErrorPolicy = Literal["raise", "skip", "collect"]
Mode = Literal["thread", "process"]
MODES: tuple[Mode, ...] = ("thread", "process")


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


_IDLE: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "dsm_workers_idle", default=None
)


def workers_idle() -> bool:
    """From inside a unit of work: whether a worker of the executor running it is left without a unit (every
    unit has started and fewer run than there are workers), so that this unit may use what that worker
    leaves free. False where the executor does not say (forked workers, a cluster) or outside one."""
    idle = _IDLE.get()
    return idle is not None and idle()


@contextlib.contextmanager
def telling_idle(idle: Callable[[], bool] | None) -> Iterator[None]:
    """Within the block, :func:`workers_idle` asks ``idle`` (the executor's side of it)."""
    token = _IDLE.set(idle)
    try:
        yield
    finally:
        _IDLE.reset(token)


@dataclass(frozen=True, kw_only=True)
class UnitFailure:
    """A unit that raised, kept under ``on_error="collect"`` or ``"skip"``."""

    index: int
    error: BaseException


@dataclass(frozen=True, kw_only=True)
class EngineReport:
    """Where a job's units ran: the engine, the cluster (its address, credentials hidden; None for the
    local engine), the nodes that ran units and their CPUs, how many unit attempts were retries (None when
    the engine cannot say), and the seconds spent starting or reaching the engine."""

    engine: str
    address: str | None = None
    nodes: int = 1
    cpus: int = 1
    retries: int | None = 0
    startup_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "address": self.address,
            "nodes": self.nodes,
            "cpus": self.cpus,
            "retries": self.retries,
            "startup_seconds": round(self.startup_seconds, 3),
        }


class Executor(Protocol):
    """Runs ``fn(unit)`` for every unit; results (or :class:`UnitFailure` under ``skip``/``collect``) in
    unit order; ``on_done(index, result)`` once per unit that succeeded, in the caller's process;
    ``on_progress(nbytes)`` with what units report (:func:`~dsm.engine.progress.report_progress`), as they
    go where the executor can say (threads, forked workers), else as each unit finishes (Ray).

    ``workers`` and ``mode`` say how the local executor runs this kind of work (threads for a store's I/O,
    the cores, or forked processes for work that holds the GIL); an executor that runs units elsewhere
    keeps the cap it was opened with (``--workers``) and may ignore both.
    """

    @property
    def name(self) -> str: ...

    def run(
        self,
        fn: Callable[[T], R],
        units: Sequence[T],
        *,
        workers: int | None = None,
        mode: Mode | None = None,
        on_error: ErrorPolicy = "raise",
        on_done: Callable[[int, R], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[R | UnitFailure]: ...

    def report(self) -> EngineReport: ...


def unit_label(fn: Callable[..., Any], unit: Any) -> str:
    """``copy_units part-00003-of-00008.parquet``: what a unit is, for messages and task names (its
    function and the file it is about; never a URL or an option, so never a credential)."""
    inner = getattr(fn, "func", fn)
    name = getattr(inner, "__name__", type(inner).__name__).strip("_")
    for attribute in ("path", "shard"):
        value = getattr(unit, attribute, None)
        if isinstance(value, str):
            return f"{name} {value}"
        nested = getattr(value, "path", None)
        if isinstance(nested, str):
            return f"{name} {nested}"
    return name
