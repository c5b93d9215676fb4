"""Rows of one shard of an open dataset, read forward from a row (after a seek), in the batches the format
gives; and the choice of the best seek point for a row. Used by :class:`~dsm.read.dataset.DatasetIterator`.

The format's batches are decoded one ahead in a background thread (:class:`ReadAhead`): decoding (which
releases the GIL) overlaps with whatever the caller does with the batch before, so a training step and the
next batch's decode share the machine's cores. At most :data:`READ_AHEAD` batches wait decoded.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

import pyarrow as pa

from dsm.errors import FormatError, SchemaError
from dsm.formats._common import describe_exception
from dsm.formats.base import SeekPoint

if TYPE_CHECKING:
    from dsm.read.dataset import Dataset

__all__ = ["READ_AHEAD", "ReadAhead", "ShardStream", "best_point", "concat"]

_DECODE_ERRORS = (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError)
_POINTS_KEPT = 4096

READ_AHEAD = 1
"""Decoded batches a stream keeps ready beyond the one its reader holds (one more is being decoded)."""

T = TypeVar("T")


class _Ahead(Generic[T]):
    """What a :class:`ReadAhead` shares with its thread (the thread never holds the ReadAhead itself, so
    an iterator dropped without ``close`` is collected, and its thread then told to stop)."""

    def __init__(self, source: Iterator[T], depth: int) -> None:
        self.source = source
        self.depth = depth
        self.ready: deque[tuple[bool, T | BaseException | None]] = deque()
        self.lock = threading.Condition()
        self.stop = False

    def halt(self) -> None:
        with self.lock:
            self.stop = True
            self.ready.clear()
            self.lock.notify_all()

    def fill(self) -> None:
        try:
            self._fill()
        finally:
            if self.stop:  # told to stop: release what the source holds (its file) from this thread
                close = getattr(self.source, "close", None)
                if close is not None:
                    close()

    def _fill(self) -> None:
        while True:
            with self.lock:
                while len(self.ready) >= self.depth and not self.stop:
                    self.lock.wait()
                if self.stop:
                    return
            try:
                item: tuple[bool, T | BaseException | None] = (True, next(self.source))
            except StopIteration:
                item = (False, None)
            except BaseException as exc:  # handed to the reader, who raises it in its own thread
                item = (False, exc)
            with self.lock:
                if self.stop:
                    return
                self.ready.append(item)
                self.lock.notify_all()
                if not item[0]:
                    return


class ReadAhead(Generic[T]):
    """``next()`` of an iterator run in a background thread, up to ``depth`` items ahead of the reader.

    Items, the end and any exception (raised where the reader would have met it) arrive in order. The
    thread starts on the first ``next()``, so making one costs nothing; :meth:`close` stops it (waiting
    for an item in progress) and closes the iterator; a ReadAhead dropped unclosed stops its thread when it
    is collected. In a forked child the parent's thread does not exist: there the iterator is advanced in
    the caller's thread.
    """

    def __init__(self, source: Iterator[T], depth: int = READ_AHEAD) -> None:
        self._source = source
        self._shared = _Ahead(source, max(int(depth), 1))
        self._done = False
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        weakref.finalize(self, self._shared.halt)

    def __iter__(self) -> ReadAhead[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        if os.getpid() != self._pid:  # a forked child: no thread of ours runs here
            return next(self._source)
        shared = self._shared
        if self._thread is None:
            self._thread = threading.Thread(target=shared.fill, name="dsm-read-ahead", daemon=True)
            self._thread.start()
        with shared.lock:
            while not shared.ready:
                shared.lock.wait()
            ok, value = shared.ready.popleft()
            shared.lock.notify_all()
        if ok:
            return value  # type: ignore[return-value]
        self._done = True
        if value is None:
            raise StopIteration
        raise value  # type: ignore[misc]

    def close(self) -> None:
        self._shared.halt()
        if self._thread is not None and os.getpid() == self._pid:
            self._thread.join()
        self._done = True
        close = getattr(self._source, "close", None)
        if close is not None:
            close()


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
                )
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
