"""Row positions: choosing a uniform sample of them, and grouping them into consecutive runs.

>>> sample_positions(10, 3, seed=1) == sample_positions(10, 3, seed=1)
True
>>> runs([1, 2, 3, 7, 8])
[(1, 4), (7, 9)]
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from dsm.errors import InputError

__all__ = ["runs", "sample_positions"]


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
