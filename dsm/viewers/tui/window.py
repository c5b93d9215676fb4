"""The rows a lazy table holds: blocks of consecutive rows around what is on screen, read in a worker thread.

A :class:`RowWindow` knows how many rows there are (from the contract, nothing read) and keeps at most a few
blocks of them; the table says which rows are on screen (:meth:`RowWindow.want`), a worker thread reads the
blocks holding them first and then the blocks next to them (prefetch), one at a time, and the least recently
shown blocks are dropped once the window holds more than its budget of rows or bytes. Nothing here knows
about Textual: the widget (:mod:`dsm.viewers.tui.table`) runs :meth:`RowWindow.serve` in a thread worker.

>>> window = RowWindow(1_000, lambda offset, count: list(range(offset, offset + count)), block_rows=100)
>>> window.want(150, 170)
>>> window.load(window.next_block(timeout=0))
>>> window.get(160), window.get(260)
(160, None)
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from dsm.errors import DsmError

__all__ = ["BLOCK_ROWS", "RowWindow"]

T = TypeVar("T")

BLOCK_ROWS = 128
"""Rows read at once: a few screens, so that scrolling within them reads nothing."""

MAX_BLOCKS = 48
"""Blocks kept at most (about 6,000 rows), whatever the size of the dataset."""

MAX_BYTES = 64 << 20
"""Bytes of values (texts, chat turns) kept at most, as :func:`weight` estimates them."""


class RowWindow(Generic[T]):
    """``total`` rows, of which only blocks of ``block_rows`` around the screen are held.

    ``fetch(offset, count)`` reads rows (it runs in the worker thread, one call at a time); ``weight(row)``
    estimates a row's bytes for the memory budget. Errors of a fetch (a :class:`DsmError`) are kept per
    block and shown in its rows instead of ending the app.
    """

    def __init__(
        self,
        total: int,
        fetch: Callable[[int, int], Sequence[T]],
        *,
        block_rows: int = BLOCK_ROWS,
        prefetch: int = 1,
        max_blocks: int = MAX_BLOCKS,
        max_bytes: int = MAX_BYTES,
        weight: Callable[[T], int] | None = None,
    ) -> None:
        self.total = total
        self.block_rows = block_rows
        self.prefetch = prefetch
        self.max_blocks = max(max_blocks, 2 * prefetch + 4)
        self.max_bytes = max_bytes
        self._fetch = fetch
        self._weight = weight
        self._blocks: OrderedDict[int, tuple[Sequence[T], int]] = OrderedDict()
        self._errors: dict[int, str] = {}
        self._wanted: list[int] = []
        self._shown: set[int] = set()
        self._cond = threading.Condition()
        self._closed = False
        self.last_read_seconds: float | None = None
        """How long the last block took to read (the status line shows it)."""
        self.history: deque[int] = deque(maxlen=1000)
        """The blocks read, in order (the last thousand): tests check that only blocks near the screen are."""

    def __repr__(self) -> str:
        return f"RowWindow(total={self.total}, blocks={sorted(self._blocks)})"

    # ------------------------------------------------------------------------------------ what is held

    def block_of(self, position: int) -> int:
        return position // self.block_rows

    def get(self, position: int) -> T | None:
        """Row ``position`` if its block is held, else None."""
        found = self._blocks.get(position // self.block_rows)
        if found is None:
            return None
        rows = found[0]
        index = position % self.block_rows
        return rows[index] if index < len(rows) else None

    def error(self, position: int) -> str | None:
        """Why the block of ``position`` could not be read, if it could not."""
        return self._errors.get(position // self.block_rows)

    def ready(self, first: int, last: int) -> bool:
        """Whether every row ``first`` to ``last`` (inclusive, clipped to the rows there are) is held or
        known to be unreadable."""
        last = min(last, self.total - 1)
        if last < first:
            return True
        return all(
            b in self._blocks or b in self._errors
            for b in range(self.block_of(first), self.block_of(last) + 1)
        )

    @property
    def held_rows(self) -> int:
        return sum(len(rows) for rows, _ in self._blocks.values())

    @property
    def held_bytes(self) -> int:
        return sum(size for _, size in self._blocks.values())

    def rows(self) -> Iterator[tuple[int, T]]:
        """``(position, row)`` of every row held, in position order."""
        for block in sorted(self._blocks):
            rows = self._blocks.get(block, ((), 0))[0]
            for index, row in enumerate(rows):
                yield block * self.block_rows + index, row

    def search(self, matches: Callable[[T], bool], start: int, *, forward: bool = True) -> int | None:
        """The first held row after ``start`` (before it, backwards) for which ``matches`` holds, wrapping
        around the held rows once; None when no held row matches."""
        held = [(p, r) for p, r in self.rows()]
        if not forward:
            held.reverse()
        later = [(p, r) for p, r in held if (p > start if forward else p < start)]
        earlier = [(p, r) for p, r in held if (p <= start if forward else p >= start)]
        for position, row in later + earlier:
            if matches(row):
                return position
        return None

    # ----------------------------------------------------------------------------------- what to read

    def want(self, first: int, last: int, *, cursor: int | None = None) -> None:
        """Rows ``first`` to ``last`` are on screen (and row ``cursor``, which may be far from them while
        a jump scrolls): read their blocks first, then ``prefetch`` blocks on each side of the screen;
        blocks wanted before and no longer near the screen are not read. The work is bounded by the
        screen's height, never by the distance between the screen and the cursor."""
        if self.total == 0:
            return
        first = max(0, min(first, self.total - 1))
        last = max(first, min(last, self.total - 1))
        lo, hi = self.block_of(first), self.block_of(last)
        order = list(range(lo, hi + 1))
        if cursor is not None and 0 <= cursor < self.total and not lo <= self.block_of(cursor) <= hi:
            order.insert(0, self.block_of(cursor))
        shown = set(order)
        for step in range(1, self.prefetch + 1):
            order += [hi + step, lo - step]
        top = self.block_of(self.total - 1)
        with self._cond:
            self._shown = shown
            for block in shown:
                if block in self._blocks:
                    self._blocks.move_to_end(block)
            self._evict()  # a smaller screen than the last gives back what it held beyond the budget
            self._wanted = [
                b
                for b in dict.fromkeys(order)
                if 0 <= b <= top and b not in self._blocks and b not in self._errors
            ]
            self._cond.notify_all()

    def next_block(self, timeout: float | None = None) -> int | None:
        """The next block to read (waiting up to ``timeout`` seconds for one), or None."""
        with self._cond:
            if not self._wanted and not self._closed:
                self._cond.wait(timeout)
            if self._closed or not self._wanted:
                return None
            return self._wanted.pop(0)

    def load(self, block: int | None) -> None:
        """Read ``block`` (in the calling thread) and hold it, dropping the least recently shown blocks
        beyond the budget; a :class:`DsmError` is kept as the block's error."""
        if block is None or block in self._blocks:
            return
        offset = block * self.block_rows
        count = min(self.block_rows, self.total - offset)
        started = time.perf_counter()
        try:
            rows = list(self._fetch(offset, count))
        except DsmError as exc:
            with self._cond:
                self._errors[block] = str(exc)
            return
        self.last_read_seconds = time.perf_counter() - started
        size = sum(self._weight(r) for r in rows) if self._weight else 0
        with self._cond:
            self.history.append(block)
            self._blocks[block] = (rows, size)
            self._evict()

    def _evict(self) -> None:
        while len(self._blocks) > self.max_blocks or (
            len(self._blocks) > 1 and self.held_bytes > self.max_bytes
        ):
            victim = next((b for b in self._blocks if b not in self._shown), None)
            if victim is None:
                return
            del self._blocks[victim]

    def forget(self) -> None:
        """Drop every block and error (the rows are read again when shown)."""
        with self._cond:
            self._blocks.clear()
            self._errors.clear()

    # ---------------------------------------------------------------------------------- the worker

    def serve(self, cancelled: Callable[[], bool], loaded: Callable[[int], object]) -> None:
        """Read the wanted blocks one at a time until :meth:`close` (or ``cancelled()``), calling
        ``loaded(block)`` after each one (from this thread)."""
        while not self._closed and not cancelled():
            block = self.next_block(timeout=0.25)
            if block is None:
                continue
            self.load(block)
            loaded(block)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
