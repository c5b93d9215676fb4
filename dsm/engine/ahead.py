"""Running an iterator ahead of its reader in a background thread (:class:`ReadAhead`): decoding a shard
releases the GIL, so it overlaps with what the reader does with the batch before, a training step
(:mod:`dsm.read`) or a rewrite's encoding of its output (:mod:`dsm.rewrite`)."""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["ReadAhead"]

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

    def __init__(self, source: Iterator[T], depth: int = 1) -> None:
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

    def deepen(self, depth: int) -> None:
        """Let the thread run up to ``depth`` items ahead from now on (never fewer than before)."""
        shared = self._shared
        with shared.lock:
            if depth > shared.depth:
                shared.depth = depth
                shared.lock.notify_all()

    def close(self) -> None:
        self._shared.halt()
        if self._thread is not None and os.getpid() == self._pid:
            self._thread.join()
        self._done = True
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
