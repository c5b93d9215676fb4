"""Row positions: how many one look may ask for, a uniform sample of them, consecutive runs of them, and
the positions a key lookup matched.

>>> sample_positions(10, 3, seed=1) == sample_positions(10, 3, seed=1)
True
>>> runs([1, 2, 3, 7, 8])
[(1, 4), (7, 9)]
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from dsm.errors import InputError

__all__ = ["MAX_ROWS", "KeyMatches", "check_count", "runs", "sample_positions"]

MAX_ROWS = 100_000
"""The most rows one look returns; iterate with ``dsm.open`` for more."""


@dataclass(frozen=True, kw_only=True)
class KeyMatches:
    """Positions of the rows whose key fields equal the values asked, and how many rows were read."""

    positions: tuple[int, ...]
    scanned_rows: int
    complete: bool
    """True when every row was looked at (``all``, or no match); False when the scan stopped early."""


def check_count(count: int) -> None:
    """Refuse a number of rows below 0 or above :data:`MAX_ROWS`, before anything is read."""
    if count < 0:
        raise InputError(f"the number of rows must be at least 0, got {count}")
    if count > MAX_ROWS:
        raise InputError(
            f"{count:,} rows is more than one look shows (at most {MAX_ROWS:,}); use dsm.open to iterate"
        )


def sample_positions(total: int, count: int, seed: int) -> list[int]:
    """``count`` distinct positions below ``total``, uniform, in increasing order; the same for the same
    arguments on every machine (Floyd's algorithm over :class:`random.Random`, memory O(count))."""
    if count < 0:
        raise InputError(f"sample size must be at least 0, got {count}")
    count = min(count, total)
    rng = random.Random(seed)
    chosen: set[int] = set()
    for j in range(total - count, total):
        pick = rng.randint(0, j)
        chosen.add(j if pick in chosen else pick)
    return sorted(chosen)


def runs(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive runs of increasing ``rows`` as ``(start, stop)``."""
    runs: list[list[int]] = []
    for row in rows:
        if runs and row == runs[-1][1]:
            runs[-1][1] = row + 1
        else:
            runs.append([row, row + 1])
    return [(start, stop) for start, stop in runs]
