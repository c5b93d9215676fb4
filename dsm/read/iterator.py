"""The iterator of an open dataset: one rank's share of one epoch as record batches, with ``state_dict`` /
``load_state_dict`` for exact resumption (see :mod:`dsm.read.dataset` for how a dataset is opened and
:mod:`dsm.read.state` for the state it saves).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dsm.errors import CheckFailed, DatasetNotFound, FormatError, InputError, SchemaError, StateError
from dsm.formats._common import checked_ahead
from dsm.formats.base import SeekPoint
from dsm.read.cache import CacheStats
from dsm.read.order import Range, Segment, range_rows, rank_ranges
from dsm.read.state import (
    IteratorState,
    ReadOrder,
    SkippedRows,
    check_dataset,
    mismatch,
)
from dsm.read.stream import ShardStream, best_point, concat
from dsm.storage import redact

if TYPE_CHECKING:
    from dsm.read.dataset import Dataset

__all__ = ["READ_BATCH_BYTES", "DatasetIterator", "ReadReport"]

_ON_ERROR = ("raise", "skip")
_SKIPPABLE = (FormatError, SchemaError, CheckFailed, DatasetNotFound)

READ_BATCH_BYTES = 16 << 20
"""Stored bytes a shard is decoded in at once (at most 65,536 rows, at least one batch): large enough that
batches are zero-copy slices of what the format decodes, small enough to bound memory for large rows."""
_MAX_READ_ROWS = 65_536


@dataclass(frozen=True, kw_only=True)
class ReadReport:
    """What one iterator did: rows and batches yielded (since it was made), rows skipped, cache activity."""

    dataset: str
    epoch: int
    rank: int
    world_size: int
    rows: int
    batches: int
    skipped: tuple[SkippedRows, ...]
    cache: CacheStats | None = None

    @property
    def skipped_rows(self) -> int:
        return sum(s.rows for s in self.skipped)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "epoch": self.epoch,
            "rank": self.rank,
            "world_size": self.world_size,
            "rows": self.rows,
            "batches": self.batches,
            "skipped_rows": self.skipped_rows,
            "skipped": [s.to_dict() for s in self.skipped],
            "cache": self.cache.to_dict() if self.cache else None,
        }


class DatasetIterator:
    """Record batches of one rank's share of one epoch, with ``state_dict`` / ``load_state_dict``.

    Made by :meth:`Dataset.iterator`. ``next(it)`` gives a ``pyarrow.RecordBatch``; :meth:`rows` gives dicts.
    """

    def __init__(
        self, dataset: Dataset, *, batch_size: int, order: ReadOrder, on_error: str = "raise"
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
        if on_error not in _ON_ERROR:
            raise InputError(f"on_error must be one of {', '.join(_ON_ERROR)}, got {on_error!r}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.on_error = on_error
        self.read_order = order
        self.order = order.epoch_order([int(s.rows or 0) for s in dataset.shards])
        rank, world_size, drop_last = order.rank, order.world_size, order.drop_last
        if world_size > self.order.total > 0:  # every rank refuses alike, not only those left without rows
            raise InputError(
                f"world_size {world_size:,} is more than the {self.order.total:,} rows of {dataset.ref}: "
                f"{world_size - self.order.total:,} rank(s) would get no rows; use a smaller world_size"
            )
        self._assignment: list[Range] = rank_ranges(self.order.total, rank, world_size, drop_last=drop_last)
        per_row = max(sum(s.bytes for s in dataset.shards) / max(self.order.total, 1), 1.0)
        # Rows decoded at once: a batch's worth (never more than this rank holds), or ~READ_BATCH_BYTES.
        wanted = min(self.batch_size, max(1, self.rows_assigned))
        self._read_rows = max(wanted, min(int(READ_BATCH_BYTES / per_row), _MAX_READ_ROWS))
        if order.shuffle and order.block_rows <= self._read_rows:  # decoded batches end on block bounds
            self._read_rows = self._read_rows // order.block_rows * order.block_rows
        # An empty dataset iterates to nothing; a rank left without rows of a non-empty one is a mistake.
        if self.order.total and (self.rows_assigned == 0 or (drop_last and self.rows_assigned < batch_size)):
            what = f"fewer rows than one batch of {batch_size}" if drop_last else "no rows"
            raise InputError(
                f"rank {rank} of {world_size} would get {what} of {dataset.ref} ({self.order.total} rows in "
                f"all): use a smaller world_size{' or batch_size' if drop_last else ''}"
            )
        self._cursor = 0
        self._skipped: list[SkippedRows] = []
        self._points: dict[int, list[SeekPoint]] = {}
        self._loaded_points: dict[int, list[SeekPoint]] = {}
        self._started = False
        self._batches: Iterator[tuple[pa.RecordBatch, list[tuple[int, int]]]] | None = None
        self._stream: ShardStream | None = None
        self._partial: tuple[pa.RecordBatch, list[tuple[int, int]], int] | None = None
        self._rows_yielded = 0
        self._batches_yielded = 0

    def __repr__(self) -> str:
        a = self.read_order
        return (
            f"DatasetIterator({self.dataset.ref!r}, batch_size={self.batch_size}, epoch={a.epoch}, "
            f"rank={a.rank}/{a.world_size}, cursor={self._cursor}/{self.rows_assigned})"
        )

    @property
    def order_arguments(self) -> dict[str, Any]:
        """The order's arguments as a state records them (``read_order.to_dict()``)."""
        return self.read_order.to_dict()

    # ----------------------------------------------------------------------------------------- public

    @property
    def rows_assigned(self) -> int:
        """Rows in this iterator's share of the epoch."""
        return range_rows(self._assignment)

    @property
    def rows_remaining(self) -> int:
        """Rows of the share not yet yielded or skipped."""
        return self.rows_assigned - self._cursor

    @property
    def skipped(self) -> tuple[SkippedRows, ...]:
        return tuple(self._skipped)

    def __iter__(self) -> DatasetIterator:
        return self

    def __next__(self) -> pa.RecordBatch:
        if self._partial is not None:  # rows() stopped inside a batch: hand out the rest of it
            batch, marks, taken = self._partial
            self._partial = None
            rest = batch.slice(taken)
            self._advance(marks, batch.num_rows)
            self._count(rest.num_rows)
            return rest
        batch, marks = self._next_batch()
        self._advance(marks, batch.num_rows)
        self._count(batch.num_rows)
        return batch

    def rows(self) -> Iterator[dict[str, Any]]:
        """The remaining rows as dicts; the state after each row resumes right after it."""
        while True:
            if self._partial is not None:
                batch, marks, taken = self._partial
            else:
                try:
                    batch, marks = self._next_batch()
                except StopIteration:
                    return
                taken = 0
            values = batch.slice(taken).to_pylist()
            for offset, value in enumerate(values, start=taken):
                self._partial = (batch, marks, offset + 1) if offset + 1 < batch.num_rows else None
                self._advance(marks, offset + 1)
                self._count(1, batch_done=offset + 1 == batch.num_rows)
                yield value

    def state_dict(self) -> dict[str, Any]:
        """A small JSON-serialisable dict from which a fresh iterator continues exactly after the last row
        yielded (see docs/reading.md, "State")."""
        seeks = []
        resume = self._resume_point()
        if resume is not None:
            shard, row = resume
            point = best_point([*self._points.get(shard, []), *self._loaded_points.get(shard, [])], row)
            if point is not None:
                seeks.append({"shard": self.dataset.shards[shard].path, **point.to_dict()})
        return IteratorState(
            dataset={
                "ref": self.dataset.ref,
                "fingerprint": self.dataset.identity,
                "rows": self.dataset.num_rows,
            },
            order=self.read_order,
            batch_size=self.batch_size,
            on_error=self.on_error,
            ranges=tuple(self._assignment),
            cursor=self._cursor,
            position=self._position(self._cursor),
            seeks=tuple(seeks),
            skipped=tuple(self._skipped),
        ).to_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state``: the next batch is the one the saving iterator would have yielded next.

        Refused (:class:`dsm.errors.StateError`, saying why) when the state is from another dataset
        version, another seed, epoch or rank layout, or when this iterator has started.
        """
        if self._started:
            raise StateError(
                "load_state_dict must come before the first batch: this iterator has started; make a new "
                "one with dataset.iterator(...) and load the state into it"
            )
        saved = IteratorState.from_dict(state)
        check_dataset(saved.dataset, self.dataset.ref, self.dataset.identity)
        current = self.read_order.to_dict()
        for name, value in saved.order.to_dict().items():
            if value != current[name]:
                raise StateError(mismatch(name, saved.order.to_dict(), current))
        saved.check_ranges(self.order.total)
        self._assignment = list(saved.ranges)
        self._cursor = saved.cursor
        self._skipped = list(saved.skipped)
        self._loaded_points = {}
        paths = {s.path: i for i, s in enumerate(self.dataset.shards)}
        for seek in saved.seeks:
            index = paths.get(str(seek.get("shard")))
            if index is not None:
                self._loaded_points.setdefault(index, []).append(SeekPoint.from_dict(seek))

    def report(self) -> ReadReport:
        """Rows and batches yielded by this iterator, rows skipped in this epoch share, cache activity."""
        cache = self.dataset.cache
        return ReadReport(
            dataset=self.dataset.ref,
            epoch=self.read_order.epoch,
            rank=self.read_order.rank,
            world_size=self.read_order.world_size,
            rows=self._rows_yielded,
            batches=self._batches_yielded,
            skipped=tuple(self._skipped),
            cache=cache.stats if cache is not None else None,
        )

    def close(self) -> None:
        """Release the shard being read."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self._batches = None

    def __enter__(self) -> DatasetIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------------- internals

    def _count(self, rows: int, *, batch_done: bool = True) -> None:
        self._rows_yielded += rows
        if batch_done:
            self._batches_yielded += 1

    def _advance(self, marks: list[tuple[int, int]], rows: int) -> None:
        """Move the cursor past the first ``rows`` rows of a batch whose pieces are ``marks`` (a piece of
        0 rows marks skipped rows: the cursor passes them as soon as the rows before them are taken)."""
        for first, count in marks:
            if rows < count:
                self._cursor = first + rows
                return
            self._cursor = first + count
            rows -= count

    def _next_batch(self) -> tuple[pa.RecordBatch, list[tuple[int, int]]]:
        if self._batches is None:
            if self._started:
                raise StopIteration
            self._started = True
            self._batches = self._produce()
        try:
            return next(self._batches)
        except StopIteration:
            self.close()
            self._batches = iter(())
            raise

    def _limit(self) -> int:
        total = self.rows_assigned
        if not self.read_order.drop_last:
            return total
        return self._cursor + (total - self._cursor) // self.batch_size * self.batch_size

    def _walk(self, start: int, stop: int) -> Iterator[tuple[Segment, int]]:
        """Segments of this share between cursor values ``start`` and ``stop``, with the cursor of each."""
        index = 0
        for first, last in self._assignment:
            size = last - first
            if index + size > start and index < stop:
                begin = first + max(start - index, 0)
                end = first + min(stop - index, size)
                for segment in self.order.segments(begin, end):
                    yield segment, index + (segment.start - first)
            index += size
            if index >= stop:
                return

    def _produce(self) -> Iterator[tuple[pa.RecordBatch, list[tuple[int, int]]]]:
        """Batches of ``batch_size`` rows with, for each, its pieces as ``(cursor of first row, rows)``."""
        limit = self._limit()
        plan = [segment.shard for segment, _ in self._walk(self._cursor, limit)]
        plan = [s for i, s in enumerate(plan) if i == 0 or plan[i - 1] != s]
        pieces: list[pa.RecordBatch] = []
        marks: list[tuple[int, int]] = []
        buffered = 0
        step = 0
        for segment, cursor in self._walk(self._cursor, limit):
            if plan and step < len(plan) and plan[step] == segment.shard:
                self.dataset.prefetch(plan[step + 1 : step + 3])
                step += 1
            done = 0
            try:
                for batch in self._read_segment(segment, self.batch_size - buffered):
                    if not buffered and batch.num_rows == self.batch_size:  # the common case: as it came
                        done += self.batch_size
                        yield batch, [(cursor + done - self.batch_size, self.batch_size)]
                        continue
                    offset = 0
                    while offset < batch.num_rows:
                        take = min(self.batch_size - buffered, batch.num_rows - offset)
                        pieces.append(batch.slice(offset, take) if take != batch.num_rows else batch)
                        marks.append((cursor + done, take))
                        offset += take
                        done += take
                        buffered += take
                        if buffered == self.batch_size:
                            yield concat(pieces), marks
                            pieces, marks, buffered = [], [], 0
            except _SKIPPABLE as exc:
                if self._stream is not None:
                    self._stream.close()
                    self._stream = None
                position = segment.start + done
                if self.on_error != "skip":
                    raise type(exc)(
                        f"{exc} [epoch position {position}, rank {self.read_order.rank}]"
                    ) from None
                skipped = SkippedRows(
                    shard=self.dataset.shards[segment.shard].path,
                    start=position,
                    stop=segment.stop,
                    row=segment.row + done,
                    error=redact(str(exc)),
                )
                self._skipped.append(skipped)
                if not pieces:  # nothing buffered: the cursor can move past the skipped rows now
                    self._cursor = max(self._cursor, cursor + segment.rows)
                else:
                    marks.append((cursor + segment.rows, 0))
        if pieces and not self.read_order.drop_last:
            yield concat(pieces), marks
        self._cursor = limit  # the share is done (with drop_last, a short tail is left unread)

    def _read_segment(self, segment: Segment, first: int) -> Iterator[pa.RecordBatch]:
        """The rows of ``segment`` in epoch order. Shuffled, they come in pieces of ``first`` rows (what
        completes the batch being assembled), then of ``batch_size``, each gathered straight from the
        decoded rows by index; in order, in the batches the format decodes."""
        if not self.order.shuffle:
            yield from self._stream_at(segment.shard, segment.row).read(segment.rows)
            return
        block_rows = self.order.block_rows
        low, high = segment.row, segment.row + segment.rows  # within-shard order = file rows, block-permuted
        start = low // block_rows * block_rows

        def pieces() -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
            """Each unit with the rows of it the segment reads, in the epoch's order."""
            for unit_start, unit in self._block_units(segment.shard, start, high):
                unit_stop = unit_start + unit.num_rows
                indexes = self._unit_indexes(segment.shard, unit_start, unit_stop)
                begin, end = max(low, unit_start) - unit_start, min(high, unit_stop) - unit_start
                yield unit, indexes[begin:end]

        size = first
        # Each unit is gathered on a helper thread while the one before is handed out in batches (the
        # helper holds the unit and its indexes only: a dropped iterator is still collected).
        for rows in checked_ahead(pieces(), _gathered):
            begin = 0
            while begin < rows.num_rows:
                take = min(size, rows.num_rows - begin)
                yield rows.slice(begin, take)
                begin += take
                size = size - take or self.batch_size

    def _block_units(self, shard: int, start: int, stop: int) -> Iterator[tuple[int, pa.RecordBatch]]:
        """The file rows from block boundary ``start`` to the end of the block holding row ``stop - 1``, as
        ``(first file row, batch)`` pieces of whole blocks: the decoded batches themselves where they hold
        whole blocks, one block joined from two batches where a batch ends inside one."""
        block_rows = self.order.block_rows
        shard_rows = self.dataset.shards[shard].rows or 0
        end = min(-(-stop // block_rows) * block_rows, shard_rows)
        carry: list[pa.RecordBatch] = []
        carried = 0
        position = start  # first file row not yet handed out
        for batch in self._stream_at(shard, start).read(end - start):
            if carry:  # finish the block the last batch ended in
                need = min(position + block_rows, end) - position - carried
                if batch.num_rows < need:
                    carry.append(batch)
                    carried += batch.num_rows
                    continue
                carry.append(batch.slice(0, need))
                joined = concat(carry)
                yield position, joined
                position += joined.num_rows
                batch = batch.slice(need)
                carry, carried = [], 0
            last = position + batch.num_rows
            whole = batch.num_rows if last == end else last // block_rows * block_rows - position
            if whole > 0:
                yield position, batch if whole == batch.num_rows else batch.slice(0, whole)
                position += whole
            if whole < batch.num_rows:
                carry, carried = [batch.slice(max(whole, 0))], batch.num_rows - max(whole, 0)
        if carry:
            yield position, concat(carry)

    def _unit_indexes(self, shard: int, start: int, stop: int) -> np.ndarray:
        """Rows of file rows ``[start, stop)`` (whole blocks) in the epoch's order, relative to ``start``."""
        block_rows = self.order.block_rows
        parts = [
            self.order.block_permutation(shard, block) + (block * block_rows - start)
            for block in range(start // block_rows, -(-stop // block_rows))
        ]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _stream_at(self, shard: int, row: int) -> ShardStream:
        stream = self._stream
        if stream is not None and stream.index == shard and stream.row == row:
            return stream
        if stream is not None:
            stream.close()
            self._stream = None
        previous = stream.index if stream is not None else None
        for other in [k for k in self._points if k not in (shard, previous)]:
            del self._points[other]  # points are kept for the shard being read and the one before
        points = self._points.setdefault(shard, [])
        seek = best_point([*points, *self._loaded_points.get(shard, [])], row)
        self._stream = ShardStream(self.dataset, shard, row, seek, self._read_rows, points)
        return self._stream

    def _position(self, cursor: int) -> int | None:
        """The epoch position at ``cursor`` in this share (None when the share is done)."""
        for first, last in self._assignment:
            if cursor < last - first:
                return first + cursor
            cursor -= last - first
        return None

    def _resume_point(self) -> tuple[int, int] | None:
        """``(shard, file row)`` where reading restarts after the cursor: the row, or its shuffle block."""
        position = self._position(self._cursor)
        if position is None:
            return None
        shard, row = self.order.locate(position)
        if self.order.shuffle:
            row = row // self.order.block_rows * self.order.block_rows
        return shard, row


def _gathered(piece: tuple[pa.RecordBatch, np.ndarray]) -> pa.RecordBatch:
    unit, indexes = piece
    return unit.take(pa.array(indexes))
