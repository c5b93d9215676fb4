"""What long work reports to: the CLI passes a progress bar, the library default ignores it.

A job's bar counts the bytes of its data once, whatever the passes over them: work that reads every byte
twice (a checksum pass, then a decoding pass) advances each pass by its share (:func:`scaled`), so the
total is the size of the data and the bar is full when the job is. A unit of work reports as it goes with
:func:`report_progress`, which reaches the caller's bar from threads and from forked worker processes alike
(the executor connects it; see :mod:`dsm.engine.local`), so a bar moves within one long unit too.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

__all__ = [
    "NullProgress",
    "Passes",
    "Progress",
    "report_progress",
    "report_to",
    "reporting_to",
    "rows_as_bytes",
    "scaled",
]


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


class Passes:
    """A :class:`Progress` for work that goes over the same data ``passes`` times (a fraction where a pass
    reads part of it): each pass's bytes count ``1 / passes``, so the bar's total is the data's size once
    and it is full when the last pass is."""

    def __init__(self, progress: Progress, passes: float) -> None:
        self._progress = progress
        self._step = scaled(progress.advance, 1.0 / max(1, passes))
        self._lock = threading.Lock()

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        self._progress.start(total_bytes=total_bytes, total_units=total_units, description=description)

    def advance(self, nbytes: int) -> None:
        with self._lock:
            self._step(nbytes)

    def finish(self) -> None:
        self._progress.finish()


_SINK: contextvars.ContextVar[Callable[[int], None] | None] = contextvars.ContextVar(
    "dsm_unit_progress", default=None
)


def report_progress(nbytes: int) -> None:
    """From inside a unit of work: ``nbytes`` more of it are done (nothing happens outside an executor
    that listens, so units can always call it)."""
    sink = _SINK.get()
    if sink is not None and nbytes > 0:
        sink(nbytes)


def report_to(sink: Callable[[int], None] | None) -> None:
    """From now on in this context (a forked worker, for its whole life), :func:`report_progress` calls
    ``sink``."""
    _SINK.set(sink)


@contextlib.contextmanager
def reporting_to(sink: Callable[[int], None] | None) -> Iterator[None]:
    """Within the block, :func:`report_progress` calls ``sink`` (the executor's side of it)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def scaled(advance: Callable[[int], None], weight: float) -> Callable[[int], None]:
    """``advance`` for a pass that counts ``weight`` of each byte it handles (two passes: 0.5 each); the
    fractions are carried, so the pass adds up to ``weight`` times its bytes exactly (to a byte)."""
    carry = 0.0

    def step(nbytes: int) -> None:
        nonlocal carry
        carry += nbytes * weight
        whole = int(carry)
        if whole:
            carry -= whole
            advance(whole)

    return step


def rows_as_bytes(advance: Callable[[int], None], nbytes: int, nrows: int | None) -> Callable[[int], None]:
    """``advance`` fed with rows decoded from a shard of ``nbytes`` bytes and ``nrows`` rows: each row
    counts its share of the bytes, never more than ``nbytes`` in all (a shard with more rows than recorded
    stops advancing)."""
    done_rows = 0
    reported = 0

    def step(rows: int) -> None:
        nonlocal done_rows, reported
        done_rows += rows
        target = nbytes if not nrows else min(nbytes, nbytes * done_rows // nrows)
        if target > reported:
            advance(target - reported)
            reported = target

    return step
