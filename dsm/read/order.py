"""The read order of one epoch, and how it is cut among ranks and workers: pure functions of the arguments.

An epoch's *global order* lists every row of the dataset once; a row's place in it is its *position*
(0 .. rows-1). Without shuffle, positions follow the contract: shard after shard, rows in file order. With
shuffle, the shards are permuted by the seed and epoch, and the rows of each shard are permuted within
fixed blocks of ``block_rows`` rows (blocks stay in file order, so a shard is still read front to back).

Permutations come from a counter-based hash (SplitMix64,
:func:`dsm.hashing.permutation.keyed_permutation`), not from a library generator whose streams may change
between releases: the same seed, epoch and contract give the same order forever. docs/reading.md is the
specification.

>>> order = EpochOrder(shard_rows=(3, 2), shuffle=False, seed=0, epoch=0, block_rows=4)
>>> [order.locate(p) for p in range(5)]
[(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
>>> split_ranges([(0, 10)], 3)
[[(0, 4)], [(4, 7)], [(7, 10)]]
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from dsm.hashing.permutation import keyed_permutation

__all__ = [
    "DEFAULT_BLOCK_ROWS",
    "EpochOrder",
    "Range",
    "Segment",
    "keyed_permutation",
    "range_rows",
    "rank_ranges",
    "remaining_ranges",
    "split_batches",
    "split_ranges",
]

DEFAULT_BLOCK_ROWS = 8192
"""Rows per shuffle block: rows are permuted within blocks of this many rows of one shard."""

Range = tuple[int, int]
"""Half-open range ``[start, stop)`` of positions in an epoch's global order."""

_TAG_SHARDS = 1
_TAG_BLOCK = 2


@dataclass(frozen=True, kw_only=True)
class Segment:
    """Positions ``[start, stop)`` of the global order that fall in one shard: its rows ``[row, row + n)``
    in the epoch's within-shard order (file order, or block-permuted order with shuffle)."""

    shard: int
    start: int
    stop: int
    row: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True, kw_only=True)
class EpochOrder:
    """The global order of one epoch over shards with ``shard_rows`` rows each (contract order)."""

    shard_rows: tuple[int, ...]
    shuffle: bool
    seed: int
    epoch: int
    block_rows: int = DEFAULT_BLOCK_ROWS
    _shards: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _offsets: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        count = len(self.shard_rows)
        if self.shuffle and count > 1:
            shards = tuple(int(i) for i in keyed_permutation(count, _TAG_SHARDS, self.seed, self.epoch))
        else:
            shards = tuple(range(count))
        offsets = [0]
        for index in shards:
            offsets.append(offsets[-1] + self.shard_rows[index])
        object.__setattr__(self, "_shards", shards)
        object.__setattr__(self, "_offsets", tuple(offsets))

    @property
    def total(self) -> int:
        """Rows in the epoch."""
        return self._offsets[-1]

    @property
    def shard_order(self) -> tuple[int, ...]:
        """Contract indexes of the shards in the order the epoch reads them."""
        return self._shards

    def shard_start(self, shard: int) -> int:
        """The position of the first row of contract shard ``shard``."""
        return self._offsets[self._shards.index(shard)]

    def locate(self, position: int) -> tuple[int, int]:
        """``(contract shard index, row in the epoch's within-shard order)`` of ``position``."""
        if not 0 <= position < self.total:
            raise IndexError(f"position {position} is outside the epoch (0..{self.total - 1})")
        slot = bisect.bisect_right(self._offsets, position) - 1
        return self._shards[slot], position - self._offsets[slot]

    def segments(self, start: int, stop: int) -> Iterator[Segment]:
        """The pieces of positions ``[start, stop)``, one per shard crossed, in order."""
        position = start
        while position < stop:
            slot = bisect.bisect_right(self._offsets, position) - 1
            end = min(stop, self._offsets[slot + 1])
            yield Segment(
                shard=self._shards[slot], start=position, stop=end, row=position - self._offsets[slot]
            )
            position = end

    def block_permutation(self, shard: int, block: int) -> np.ndarray:
        """The order of the rows of one block of ``shard`` (indexes within the block)."""
        size = min(self.block_rows, self.shard_rows[shard] - block * self.block_rows)
        return keyed_permutation(size, _TAG_BLOCK, self.seed, self.epoch, shard, block)

    def file_rows(self, shard: int, row: int, count: int) -> np.ndarray:
        """File rows of within-shard order rows ``[row, row + count)`` of ``shard`` (for tests and docs)."""
        if not self.shuffle:
            return np.arange(row, row + count, dtype=np.int64)
        out = []
        for index in range(row, row + count):
            block, within = divmod(index, self.block_rows)
            out.append(block * self.block_rows + int(self.block_permutation(shard, block)[within]))
        return np.array(out, dtype=np.int64)


def range_rows(ranges: Sequence[Range]) -> int:
    """Positions in ``ranges``."""
    return sum(stop - start for start, stop in ranges)


def _cut(ranges: Sequence[Range], sizes: Sequence[int]) -> list[list[Range]]:
    """``ranges`` cut in order into consecutive pieces of ``sizes`` positions (the rest is dropped)."""
    pieces: list[list[Range]] = []
    queue = [tuple(r) for r in ranges if r[1] > r[0]]
    index = 0
    for size in sizes:
        piece: list[Range] = []
        while size > 0 and index < len(queue):
            start, stop = queue[index]
            take = min(size, stop - start)
            piece.append((start, start + take))
            size -= take
            if start + take == stop:
                index += 1
            else:
                queue[index] = (start + take, stop)
        pieces.append(piece)
    return pieces


def split_ranges(ranges: Sequence[Range], parts: int, *, equal: bool = False) -> list[list[Range]]:
    """Cut ``ranges`` (in order) into ``parts`` contiguous pieces.

    Pieces differ by at most one position, the first ones longer; with ``equal`` every piece has
    ``total // parts`` positions and the last ``total % parts`` are left out.
    """
    total = range_rows(ranges)
    share, extra = divmod(total, parts)
    sizes = [share] * parts if equal else [share + (1 if k < extra else 0) for k in range(parts)]
    return _cut(ranges, sizes)


def rank_ranges(total: int, rank: int, world_size: int, *, drop_last: bool) -> list[Range]:
    """The positions rank ``rank`` of ``world_size`` reads in an epoch of ``total`` rows: its piece of
    :func:`split_ranges` of ``[(0, total)]``, computed alone (nothing grows with ``world_size``)."""
    share, extra = divmod(total, world_size)
    if drop_last:
        start, size = rank * share, share
    else:
        start, size = rank * share + min(rank, extra), share + (1 if rank < extra else 0)
    return [(start, start + size)] if size > 0 else []


def split_batches(
    ranges: Sequence[Range], parts: int, batch_size: int, *, drop_last: bool
) -> list[list[Range]]:
    """Cut ``ranges`` into ``parts`` contiguous pieces of whole batches (DataLoader workers).

    Batches are dealt so that pieces differ by at most one batch, the first ones larger. The short last
    batch (none with ``drop_last``, where the short tail is left out) goes to the last of the pieces with
    the most batches: taking one batch from each piece in turn then ends with it.
    """
    total = range_rows(ranges)
    batches = total // batch_size if drop_last else -(-total // batch_size)
    usable = batches * batch_size if drop_last else total
    share, extra = divmod(batches, parts)
    counts = [share + (1 if k < extra else 0) for k in range(parts)]
    sizes = [count * batch_size for count in counts]
    if batches:
        short = extra - 1 if extra else parts - 1
        sizes[short] = usable - (sum(sizes) - sizes[short])
    return _cut(ranges, sizes)


def remaining_ranges(ranges: Sequence[Range], consumed: int) -> list[Range]:
    """``ranges`` without their first ``consumed`` positions."""
    out: list[Range] = []
    for start, stop in ranges:
        if consumed >= stop - start:
            consumed -= stop - start
            continue
        out.append((start + consumed, stop))
        consumed = 0
    return out
