"""Crash points for tests: ``DSM_TEST_KILL_AT=STAGE[:POINT]`` makes the process SIGKILL itself there.

This module is the one place the variable is read. Points (the first one of a stage is its default):

==========  ===========================================================================================
``copy:N``  after the rewrite has completed N output units (delegated to the rewrite's own crash hook)
``plan``    after the measurements, before the stage's record
``verify``  after the target was verified and checked, before the stage's record
``shadow``  after the benchmark and the sample comparison, before the stage's record
``switch``  right after the alias moved, before the stage's record
``complete`` after the old version was marked deprecated (and its data deleted), before the record
``rollback`` right after the alias moved back, before the rollback's record
==========  ===========================================================================================

A crash there is the worst moment for the journal: the work is done and nothing says so.
"""

from __future__ import annotations

import os
import signal

__all__ = ["KILL_ENV", "copy_crash_units", "kill_point"]

KILL_ENV = "DSM_TEST_KILL_AT"


def _armed() -> tuple[str, str] | None:
    value = os.environ.get(KILL_ENV, "").strip()
    if not value:
        return None
    stage, _, point = value.partition(":")
    return stage, point


def kill_point(stage: str, point: str = "") -> None:
    """SIGKILL this process if ``DSM_TEST_KILL_AT`` names this stage (and this point, when it names one)."""
    armed = _armed()
    if armed is not None and armed[0] == stage and armed[1] in ("", point):
        os.kill(os.getpid(), signal.SIGKILL)


def copy_crash_units() -> int | None:
    """N of ``DSM_TEST_KILL_AT=copy:N``: the copy dies once the rewrite has completed N units."""
    armed = _armed()
    if armed is None or armed[0] != "copy" or not armed[1].isdigit():
        return None
    return int(armed[1])
