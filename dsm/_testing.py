"""Crash points for tests: ``DSM_TEST_KILL_AT=POINT`` makes the process SIGKILL itself there.

``DSM_TEST_KILL_SIGNAL=SIGINT`` sends that signal instead (SIGINT: what Ctrl-C does, a
``KeyboardInterrupt``). This module is the one place the variables are read, once, when dsm loads (tests
set them for the process they start). Points:

============  =========================================================================================
``units:N``   a rewrite (``convert-format``, ``reshard``) has journaled N completed units (counted where
              the job runs, the driver, whatever the engine, as it hears of them: the units of a chain
              that reads its rows once when the chain's last is done)
``copy:N``    the same point inside a cutover's copy stage (the copy is the cutover's one rewrite)
``exit:FILE`` the process writing output file FILE (a Ray worker, or this process on the local engine)
              exits with ``os._exit`` after its first batch, on the first attempt of its unit only: a
              worker that dies mid-unit, which Ray retries
``plan``      after the measurements, before the stage's record
``verify``    after the target was verified and checked, before the stage's record
``shadow``    after the benchmark and the sample comparison, before the stage's record
``switch``    right after the alias moved, before the stage's record
``complete``  after the old version was marked deprecated (and its data deleted), before the record
``rollback``  right after the alias moved back, before the rollback's record
============  =========================================================================================

A crash there is the worst moment for a journal: the work is done and nothing says so. ``exit:FILE``
fires in the processes that run units: an executor that starts them elsewhere forwards the armed point
(:func:`worker_point`, :func:`arm_worker`) and says which attempt of a unit is running (:func:`set_attempt`).
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = [
    "KILL_ENV",
    "SIGNAL_ENV",
    "arm_worker",
    "kill_point",
    "set_attempt",
    "unit_journaled",
    "worker_point",
    "writing",
]

KILL_ENV = "DSM_TEST_KILL_AT"
SIGNAL_ENV = "DSM_TEST_KILL_SIGNAL"
_UNIT_POINTS = ("units", "copy")
_WORKER_POINTS = ("exit",)
_EXIT_STATUS = 70


def _armed(value: str) -> tuple[str, str] | None:
    value = value.strip()
    if not value:
        return None
    stage, _, point = value.partition(":")
    return stage, point


_ARMED = _armed(os.environ.get(KILL_ENV, ""))
_SIGNAL = signal.Signals[os.environ.get(SIGNAL_ENV, "") or "SIGKILL"]
_units_lock = threading.Lock()
_units_journaled = 0
_attempt = 0


def _kill() -> None:
    os.kill(os.getpid(), _SIGNAL)


def kill_point(stage: str) -> None:
    """SIGKILL this process if ``DSM_TEST_KILL_AT`` names this stage."""
    if _ARMED is not None and _ARMED[0] == stage and stage not in (*_UNIT_POINTS, *_WORKER_POINTS):
        _kill()


def worker_point() -> str | None:
    """The armed point when it fires where units run (``exit:FILE``), for an executor to forward."""
    if _ARMED is not None and _ARMED[0] in _WORKER_POINTS:
        return f"{_ARMED[0]}:{_ARMED[1]}"
    return None


def arm_worker(point: str | None) -> None:
    """Arm a point the driver forwarded (a worker read its own environment once, when dsm loaded)."""
    global _ARMED
    if point:
        _ARMED = _armed(point)


def set_attempt(attempt: int) -> None:
    """Which attempt of its unit this process runs now (0: the first), as the executor knows it."""
    global _attempt
    _attempt = attempt


def writing(path: str) -> None:
    """Exit this process at ``exit:FILE`` once output ``path`` has its first batch, on a first attempt."""
    if _ARMED is not None and _ARMED[0] == "exit" and _ARMED[1] == path and _attempt == 0:
        os._exit(_EXIT_STATUS)


def unit_journaled() -> None:
    """Count a rewrite unit recorded in its journal; SIGKILL this process at the N-th of ``units:N``."""
    global _units_journaled
    if _ARMED is None or _ARMED[0] not in _UNIT_POINTS or not _ARMED[1].isdigit():
        return
    with _units_lock:
        _units_journaled += 1
        if _units_journaled == int(_ARMED[1]):  # once: a signal that does not kill is not sent again
            _kill()
