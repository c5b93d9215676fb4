"""The local executor: the units of a plan on this machine, in threads or in forked processes.

Threads suit work whose heavy parts release the GIL (hashing bytes, Arrow decoding and encoding, file and
network I/O) and share in-process filesystems such as ``memory://``. Forked processes suit work that holds
the GIL (hashing string values one by one): each unit then needs a picklable function and arguments, and
returns picklable data (the shape every executor takes, see :mod:`dsm.engine`).

What a unit reports with :func:`~dsm.engine.progress.report_progress` reaches ``on_progress`` in the
caller's process: directly from threads; from forked workers through a shared counter that a thread of the
caller reads ten times a second.

>>> LocalExecutor(workers=2).run(abs, [-1, 2, -3])
[1, 2, 3]
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from dsm.engine.base import (
    MODES,
    EngineReport,
    ErrorPolicy,
    Mode,
    UnitFailure,
    default_workers,
    telling_idle,
)
from dsm.engine.progress import report_to, reporting_to
from dsm.units import parse_workers

__all__ = ["LocalExecutor"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class LocalExecutor:
    """Runs ``fn(unit)`` for every unit with up to ``workers`` threads (``mode="thread"``) or forked worker
    processes (``mode="process"``); one worker, or one unit, runs in the calling thread. ``workers`` and
    ``mode`` are the defaults of :meth:`run`, which may give its own."""

    workers: int | None = None
    mode: Mode = "thread"
    name: str = "local"

    def __post_init__(self) -> None:
        if self.workers is not None:
            parse_workers(self.workers)  # a whole number in 1..MAX_WORKERS, checked before anything starts

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
    ) -> list[R | UnitFailure]:
        """Every unit's result (or :class:`UnitFailure`) in unit order.

        ``on_error="raise"`` stops at the first failure (units not started are cancelled) and re-raises it;
        ``"skip"`` and ``"collect"`` return a :class:`UnitFailure` in that unit's place. ``on_done(index,
        result)`` is called once per unit that succeeded, as it finishes; ``on_progress(nbytes)`` as units
        report work done (:func:`~dsm.engine.progress.report_progress`).
        """
        mode = mode or self.mode
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        workers = max(1, min(workers or self.workers or default_workers(), len(units) or 1))
        if workers == 1:
            done: list[R | UnitFailure] = []
            with reporting_to(on_progress):
                for index, unit in enumerate(units):
                    value = _call(fn, unit, index, on_error, on_done)
                    done.append(value)
            return done
        if mode == "process":
            return _in_processes(fn, units, workers, on_error, on_done, on_progress)
        return _in_threads(fn, units, workers, on_error, on_done, on_progress)

    def report(self) -> EngineReport:
        """This machine: one node, its cores (or ``workers``), no retries (a failed unit fails the job)."""
        return EngineReport(engine=self.name, cpus=self.workers or default_workers())


def _call(
    fn: Callable[[T], R],
    unit: T,
    index: int,
    on_error: ErrorPolicy,
    on_done: Callable[[int, R], None] | None,
) -> R | UnitFailure:
    try:
        result = fn(unit)
    except Exception as exc:
        if on_error == "raise":
            raise
        return UnitFailure(index=index, error=exc)
    if on_done is not None:
        on_done(index, result)
    return result


def _in_threads(
    fn: Callable[[T], R],
    units: Sequence[T],
    workers: int,
    on_error: ErrorPolicy,
    on_done: Callable[[int, R], None] | None,
    on_progress: Callable[[int], None] | None,
) -> list[R | UnitFailure]:
    results: list[R | UnitFailure | None] = [None] * len(units)
    stop = threading.Event()
    counts = threading.Lock()
    started = finished = 0

    def idle() -> bool:
        """Every unit has started and a worker has none (what :func:`workers_idle` asks)."""
        return started == len(units) and started - finished < workers

    def task(index: int) -> None:
        nonlocal started, finished
        if stop.is_set():
            return
        with counts:
            started += 1
        try:
            with reporting_to(on_progress), telling_idle(idle):
                results[index] = result = fn(units[index])
        except BaseException as exc:
            if on_error == "raise":
                stop.set()
                raise
            results[index] = UnitFailure(index=index, error=exc)
            return
        finally:
            with counts:
                finished += 1
        if on_done is not None:
            on_done(index, result)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dsm") as pool:
        futures: list[Future[None]] = [pool.submit(task, i) for i in range(len(units))]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future.done() and future.exception() is not None:
                for other in futures:
                    other.cancel()
                raise future.exception()  # type: ignore[misc]
    return results  # type: ignore[return-value]


def _in_processes(
    fn: Callable[[T], R],
    units: Sequence[T],
    workers: int,
    on_error: ErrorPolicy,
    on_done: Callable[[int, R], None] | None,
    on_progress: Callable[[int], None] | None,
) -> list[R | UnitFailure]:
    # fork: the workers start with this process's imports and state (no re-import per worker), and the
    # unit's function is found by reference; results come back pickled.
    context = multiprocessing.get_context("fork")
    with _counted(context, on_progress) as counter:
        return _run_forked(fn, units, workers, on_error, on_done, context, counter)


@contextmanager
def _counted(context: Any, on_progress: Callable[[int], None] | None) -> Iterator[Any]:
    """A counter forked workers add their reported bytes to, read by a thread that calls ``on_progress``
    with what was added since it last looked (and once more at the end)."""
    if on_progress is None:
        yield None
        return
    counter = context.Value("q", 0)
    done = threading.Event()
    seen = 0

    def drain() -> None:
        nonlocal seen
        now = counter.value
        if now > seen:
            on_progress(now - seen)
            seen = now

    def poll() -> None:
        while not done.wait(0.1):
            drain()

    poller = threading.Thread(target=poll, name="dsm-progress", daemon=True)
    poller.start()
    try:
        yield counter
    finally:
        done.set()
        poller.join()
        drain()


def _worker_reports_to(counter: Any) -> None:
    """Initializer of a forked worker: what its units report is added to the caller's counter (None: the
    caller does not listen)."""
    if counter is None:
        return

    def add(nbytes: int) -> None:
        with counter.get_lock():
            counter.value += nbytes

    report_to(add)  # for the life of the worker process


def _run_forked(
    fn: Callable[[T], R],
    units: Sequence[T],
    workers: int,
    on_error: ErrorPolicy,
    on_done: Callable[[int, R], None] | None,
    context: Any,
    counter: Any,
) -> list[R | UnitFailure]:
    results: list[R | UnitFailure] = []
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_worker_reports_to, initargs=(counter,)
    ) as pool:
        futures = [pool.submit(fn, unit) for unit in units]
        try:
            for index, future in enumerate(futures):
                try:
                    result = future.result()
                except Exception as exc:
                    if on_error == "raise":
                        raise
                    results.append(UnitFailure(index=index, error=exc))
                    continue
                results.append(result)
                if on_done is not None:
                    on_done(index, result)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return results
