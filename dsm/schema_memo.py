"""Answers computed from Arrow schemas, kept for the schemas seen last (:class:`SchemaMemo`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import pyarrow as pa

__all__ = ["SchemaMemo"]

R = TypeVar("R")


class SchemaMemo(Generic[R]):
    """``compute(*schemas)``, kept for the last few schema tuples it was asked about. A writer or a
    converter sees the same schemas batch after batch; Arrow's equality (metadata aside: ``compute`` must
    not look at it) finds them again at a fraction of the cost of the Python walk over every field that
    ``compute`` does. Safe to share between threads (at worst an answer is computed twice)."""

    def __init__(self, compute: Callable[..., R], kept: int = 16) -> None:
        self._compute = compute
        self._kept = kept
        self._known: list[tuple[tuple[pa.Schema, ...], R]] = []

    def __call__(self, *schemas: pa.Schema) -> R:
        for known, answer in list(self._known):
            if all(a.equals(b) for a, b in zip(known, schemas, strict=True)):
                return answer
        answer = self._compute(*schemas)
        self._known = [(schemas, answer), *self._known[: self._kept - 1]]
        return answer
