"""Rows of one shard of an open dataset, read forward from a row (after a seek), in the batches the format
gives; and the choice of the best seek point for a row. Used by :class:`~dsm.read.dataset.DatasetIterator`.

The format's batches are decoded one ahead in a background thread (:class:`~dsm.engine.ahead.ReadAhead`):
decoding (which releases the GIL) overlaps with whatever the caller does with the batch before, so a
training step and the next batch's decode share the machine's cores. At most :data:`READ_AHEAD` batches
wait decoded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from dsm.engine.ahead import ReadAhead
from dsm.errors import FormatError, SchemaError
from dsm.formats._common import describe_exception
from dsm.formats.base import SeekPoint

if TYPE_CHECKING:
    from dsm.read.dataset import Dataset

__all__ = ["READ_AHEAD", "ShardStream", "best_point", "concat"]

_DECODE_ERRORS = (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError)
_POINTS_KEPT = 4096

READ_AHEAD = 1
"""Decoded batches a stream keeps ready beyond the one its reader holds (one more is being decoded)."""


class ShardStream:
    """Rows of one shard read forward from a row; keeps the seek points the format hands out."""

    def __init__(
        self,
        dataset: Dataset,
        index: int,
        row: int,
        seek: SeekPoint | None,
        batch_rows: int,
        points: list[SeekPoint],
    ) -> None:
        self.index = index
        self.shard = dataset.contract.shards[index]
        self.row = row
        self._points = points
        self._stack = contextlib.ExitStack()
        self._head: pa.RecordBatch | None = None
        try:
            handle = self._stack.enter_context(dataset.open_shard(index))
            self._batches = ReadAhead(
                dataset.format.iter_batches_from(
                    handle,
                    shard=self.shard.path,
                    start_row=row,
                    seek=seek,
                    schema=dataset._full_schema,
                    columns=list(dataset.columns) if dataset.columns else None,
                    batch_rows=batch_rows,
                ),
                depth=READ_AHEAD,
            )
            self._stack.callback(self._batches.close)
        except BaseException:
            self._stack.close()
            raise

    def _next(self) -> pa.RecordBatch:
        try:
            batch, point = next(self._batches)
        except StopIteration:
            raise FormatError(
                f"shard {self.shard.path}: ended at row {self.row}, the contract records "
                f"{self.shard.rows} rows: the file changed after registration; run `dsm verify`"
            ) from None
        except (FormatError, SchemaError):
            raise
        except _DECODE_ERRORS as exc:
            raise FormatError(
                f"shard {self.shard.path}: cannot be decoded ({describe_exception(exc)})"
            ) from None
        except OSError as exc:
            if type(exc) is not OSError:  # storage failures are subclasses; pyarrow's decode errors are not
                raise
            raise FormatError(
                f"shard {self.shard.path}: cannot be decoded ({describe_exception(exc)})"
            ) from None
        if point is not None:
            self._points.append(point)
            if len(self._points) > _POINTS_KEPT:
                del self._points[: len(self._points) - _POINTS_KEPT]
        return batch

    def read(self, count: int) -> Iterator[pa.RecordBatch]:
        """The next ``count`` rows, in the batches the format gives (FormatError if the shard ends first)."""
        while count > 0:
            head = self._head if self._head is not None else self._next()
            rows = head.num_rows
            if rows <= count:
                self._head = None
                self.row += rows
                count -= rows
                if rows:
                    yield head
            else:
                self._head = head.slice(count)
                self.row += count
                yield head.slice(0, count)
                return

    def take(self, count: int) -> list[pa.RecordBatch]:
        """The next ``count`` rows as a list of batches."""
        return list(self.read(count))

    def close(self) -> None:
        self._head = None
        self._stack.close()


def concat(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    return pieces[0] if len(pieces) == 1 else pa.concat_batches(pieces)


def best_point(points: Sequence[SeekPoint], row: int) -> SeekPoint | None:
    best = None
    for point in points:
        if point.row <= row and (best is None or point.row > best.row):
            best = point
    return best
