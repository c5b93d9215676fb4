"""Crash points for tests: ``DSM_TEST_KILL_AT=POINT`` makes the process SIGKILL itself there.

This module is the one place the variable is read, once, when dsm loads (tests set it for the process they
start). Points:

============  =========================================================================================
``units:N``   a rewrite (``convert-format``, ``reshard``) has journaled N completed units
``copy:N``    the same point inside a cutover's copy stage (the copy is the cutover's one rewrite)
``plan``      after the measurements, before the stage's record
``verify``    after the target was verified and checked, before the stage's record
``shadow``    after the benchmark and the sample comparison, before the stage's record
``switch``    right after the alias moved, before the stage's record
``complete``  after the old version was marked deprecated (and its data deleted), before the record
``rollback``  right after the alias moved back, before the rollback's record
============  =========================================================================================

A crash there is the worst moment for a journal: the work is done and nothing says so.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["KILL_ENV", "kill_point", "unit_journaled"]

KILL_ENV = "DSM_TEST_KILL_AT"
_UNIT_POINTS = ("units", "copy")


def _armed(value: str) -> tuple[str, str] | None:
    value = value.strip()
    if not value:
        return None
    stage, _, point = value.partition(":")
    return stage, point


_ARMED = _armed(os.environ.get(KILL_ENV, ""))
_units_lock = threading.Lock()
_units_journaled = 0


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_point(stage: str) -> None:
    """SIGKILL this process if ``DSM_TEST_KILL_AT`` names this stage."""
    if _ARMED is not None and _ARMED[0] == stage and stage not in _UNIT_POINTS:
        _kill()


def unit_journaled() -> None:
    """Count a rewrite unit recorded in its journal; SIGKILL this process at the N-th of ``units:N``."""
    global _units_journaled
    if _ARMED is None or _ARMED[0] not in _UNIT_POINTS or not _ARMED[1].isdigit():
        return
    with _units_lock:
        _units_journaled += 1
        if _units_journaled >= int(_ARMED[1]):
            _kill()
