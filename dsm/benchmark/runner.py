"""The timed part of ``dsm bench``: worker threads that read a dataset's shards and record every request.

Workers are threads: file I/O and Arrow decoding release the GIL. They take shards from one shared plan
(sequential: contract order; random: a seeded permutation per pass) until the plan is done (a full pass) or
the deadline passes. The loop records each request into arrays preallocated per worker (start, end, bytes,
rows, shard) and allocates nothing else per request, so the measurement costs well under a microsecond a
request. Everything is timed with ``time.perf_counter_ns``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pyarrow as pa

from dsm.benchmark.host import process_read_bytes
from dsm.contract import Shard
from dsm.errors import DsmError, FormatError, SchemaError
from dsm.formats import Format
from dsm.shards import fragment_count, iter_open_shard
from dsm.storage import Location, redact

__all__ = ["SHARD_DONE", "ErrorRecord", "RunSpec", "RunTimings", "execute_run"]

_NEVER = 1 << 62  # a deadline that never comes (full pass), as an int so the hot loop compares ints
_INITIAL_CAPACITY = 4096

# Shard outcomes in RunTimings.shard_status.
SHARD_DONE = 0
SHARD_FAILED = 1
SHARD_STOPPED = 2  # the deadline came while the shard was being read


@dataclass(frozen=True, kw_only=True)
class ErrorRecord:
    """A request that failed for good (after retries): which shard, what kind, and the message."""

    path: str
    kind: str  # missing | unreadable | storage
    message: str
    worker: int
    at_s: float  # seconds after the run started

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "message": self.message, "at_s": round(self.at_s, 6)}


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """What one timed run reads and how."""

    loc: Location
    shards: tuple[Shard, ...]
    mode: str  # bytes | decode
    pattern: str  # sequential | random
    workers: int
    block_size: int
    seed: int
    duration_ns: int | None  # None: one full pass
    retries: int
    fmt: Format | None = None
    schema: pa.Schema | None = None
    columns: tuple[str, ...] | None = None
    native: bool = False  # decode local files through a native Arrow file (as dsm.open does)


@dataclass(kw_only=True)
class RunTimings:
    """Everything one run recorded. Times are ``perf_counter_ns`` values; ``t0_ns`` is the start signal."""

    t0_ns: int
    # one entry per request (a block read, or one decoded batch)
    req_worker: np.ndarray
    req_start: np.ndarray
    req_end: np.ndarray
    req_bytes: np.ndarray
    req_rows: np.ndarray
    req_shard: np.ndarray
    req_offset: np.ndarray  # bytes mode: where the block starts in its file; decode mode: -1
    # one entry per shard visit (a shard read once in one pass)
    shard_worker: np.ndarray
    shard_index: np.ndarray
    shard_open: np.ndarray
    shard_first: np.ndarray  # end of the first request; 0 when none completed
    shard_done: np.ndarray
    shard_status: np.ndarray
    worker_done: np.ndarray  # when each worker found no more work
    errors: list[ErrorRecord] = field(default_factory=list)
    retries: int = 0
    interrupted: bool = False
    io_bytes: int | None = None  # native decode: bytes the process read during the run (/proc/self/io)


class _CountingReader:
    """A read-only proxy that counts the bytes read through it (decode mode: bytes taken from storage)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self.count += len(data)
        return data  # type: ignore[no-any-return]

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)
        self.count += n or 0
        return n  # type: ignore[no-any-return]

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)  # type: ignore[no-any-return]

    def tell(self) -> int:
        return self._raw.tell()  # type: ignore[no-any-return]

    def seekable(self) -> bool:
        return bool(self._raw.seekable())

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(self._raw.closed)

    def close(self) -> None:
        pass  # the worker closes the real file

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, (FormatError, SchemaError, pa.ArrowException, ValueError, EOFError)):
        return "unreadable"
    return "storage"


def _transient(exc: BaseException) -> bool:
    """Worth retrying: storage failures other than a missing file or a denied permission."""
    return (
        isinstance(exc, OSError)
        and not isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError))
        and not isinstance(exc, DsmError)
    )


class _Shared:
    """State the workers share: the plan position (under a lock) and the deadline."""

    def __init__(self, spec: RunSpec) -> None:
        self.lock = threading.Lock()
        self.next_visit = 0
        self.count = len(spec.shards)
        self.passes = 1 if spec.duration_ns is None else None
        self.deadline = _NEVER
        self.go = threading.Event()
        self.t0 = 0
        self._orders: dict[int, list[int]] = {}
        self._pattern = spec.pattern
        self._seed = spec.seed

    def order(self, pass_no: int) -> list[int]:
        order = self._orders.get(pass_no)
        if order is None:
            if self._pattern == "random":
                order = np.random.default_rng([self._seed, pass_no]).permutation(self.count).tolist()
            else:
                order = list(range(self.count))
            self._orders[pass_no] = order
        return order

    def take(self) -> tuple[int, int] | None:
        """The next (pass, shard index) to read, or None when the plan is done."""
        with self.lock:
            if self.count == 0:
                return None
            pass_no, position = divmod(self.next_visit, self.count)
            if self.passes is not None and pass_no >= self.passes:
                return None
            self.next_visit += 1
            return pass_no, self.order(pass_no)[position]


class _Worker:
    """One reader thread with its own preallocated timing arrays."""

    def __init__(self, index: int, spec: RunSpec, shared: _Shared) -> None:
        self.index = index
        self.spec = spec
        self.shared = shared
        self.fs = spec.loc.fs
        self.paths = [spec.loc.path(s.path) for s in spec.shards]
        # No request returns more than the largest file: a --block-size beyond it allocates no more.
        largest = max((s.bytes for s in spec.shards), default=0)
        self.buffer = (
            bytearray(max(1, min(spec.block_size, largest))) if spec.mode == "bytes" else bytearray()
        )
        capacity = _INITIAL_CAPACITY
        if spec.duration_ns is None and spec.mode == "bytes":
            blocks = sum(-(-max(s.bytes, 1) // spec.block_size) for s in spec.shards)
            # enough for a fair share of a full pass, within reason (the arrays grow when needed)
            capacity = min(1 << 20, max(16, blocks // spec.workers + len(spec.shards) + 16))
        self.capacity = capacity
        self.n = 0
        self.start = np.zeros(capacity, np.int64)
        self.end = np.zeros(capacity, np.int64)
        self.nbytes = np.zeros(capacity, np.int64)
        self.rows = np.zeros(capacity, np.int64)
        self.shard = np.zeros(capacity, np.int64)
        self.offset = np.full(capacity, -1, np.int64)
        self.visits: list[tuple[int, int, int, int, int]] = []  # shard, open, first, done, status
        self.errors: list[ErrorRecord] = []
        self.retries = 0
        self.done_ns = 0
        self.failure: BaseException | None = None
        if spec.mode == "decode" and spec.fmt is None:
            raise ValueError("a decode run needs the dataset's format")
        self.fmt: Format = spec.fmt  # type: ignore[assignment]

    # -- recording -------------------------------------------------------------------------------------

    def _grow(self) -> None:
        extra = self.capacity
        self.start = np.concatenate([self.start, np.zeros(extra, np.int64)])
        self.end = np.concatenate([self.end, np.zeros(extra, np.int64)])
        self.nbytes = np.concatenate([self.nbytes, np.zeros(extra, np.int64)])
        self.rows = np.concatenate([self.rows, np.zeros(extra, np.int64)])
        self.shard = np.concatenate([self.shard, np.zeros(extra, np.int64)])
        self.offset = np.concatenate([self.offset, np.full(extra, -1, np.int64)])
        self.capacity += extra

    def _error(self, shard_index: int, exc: BaseException) -> None:
        path = redact(self.spec.loc.url_of(self.spec.shards[shard_index].path))
        message = redact(str(exc)) or type(exc).__name__
        at = (time.perf_counter_ns() - self.shared.t0) / 1e9
        self.errors.append(
            ErrorRecord(path=path, kind=_error_kind(exc), message=message, worker=self.index, at_s=at)
        )

    # -- the loop --------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self.shared.go.wait()
            read = self._read_bytes if self.spec.mode == "bytes" else self._read_decoded
            while True:
                visit = self.shared.take()
                if visit is None:
                    break
                pass_no, shard_index = visit
                if not read(pass_no, shard_index):
                    break
        except BaseException as exc:  # a bug, not a storage failure: re-raised by the main thread
            self.failure = exc
        finally:
            self.done_ns = time.perf_counter_ns()

    def _open(self, shard_index: int) -> IO[bytes] | None:
        """Open a shard, retrying transient failures; None (and an error recorded) when it cannot be."""
        attempt = 0
        while True:
            try:
                if self.spec.native:
                    return pa.OSFile(self.paths[shard_index], "rb")  # type: ignore[return-value]
                return self.fs.open(self.paths[shard_index], "rb")  # type: ignore[no-any-return]
            except Exception as exc:
                if _transient(exc) and attempt < self.spec.retries:
                    attempt += 1
                    self.retries += 1
                    continue
                self._error(shard_index, exc)
                return None

    def _offsets(self, pass_no: int, shard_index: int) -> list[int]:
        size = self.spec.shards[shard_index].bytes
        block = self.spec.block_size
        blocks = -(-size // block)
        order = np.random.default_rng([self.spec.seed, pass_no, shard_index]).permutation(blocks)
        return (order * block).tolist()  # type: ignore[no-any-return]

    def _read_bytes(self, pass_no: int, shard_index: int) -> bool:
        """Read one shard in blocks; False when the deadline passed (stop taking work)."""
        perf = time.perf_counter_ns
        shared = self.shared
        t_open = perf()
        handle = self._open(shard_index)
        if handle is None:
            self.visits.append((shard_index, t_open, 0, perf(), SHARD_FAILED))
            return perf() < shared.deadline
        buffer = self.buffer
        offsets = self._offsets(pass_no, shard_index) if self.spec.pattern == "random" else None
        first = 0
        status = SHARD_DONE
        position = 0
        k = 0
        try:
            while True:
                if offsets is not None:
                    if k == len(offsets):
                        break
                    position = offsets[k]
                    k += 1
                t1 = perf()
                try:
                    if offsets is not None:
                        handle.seek(position)
                    got = handle.readinto(buffer)  # type: ignore[attr-defined]
                except Exception as exc:
                    handle, got = self._retry_read(handle, shard_index, position, exc)
                    if handle is None:
                        status = SHARD_FAILED
                        break
                t2 = perf()
                if not got:
                    if offsets is None:
                        break
                    continue
                i = self.n
                if i == self.capacity:
                    self._grow()
                self.start[i] = t1
                self.end[i] = t2
                self.nbytes[i] = got
                self.shard[i] = shard_index
                self.offset[i] = position
                self.n = i + 1
                if not first:
                    first = t2
                if offsets is None:
                    position += got
                if t2 >= shared.deadline:
                    status = SHARD_STOPPED
                    break
        finally:
            if handle is not None:
                handle.close()
        done = perf()
        self.visits.append((shard_index, t_open, first, done, status))
        return status != SHARD_STOPPED and done < shared.deadline

    def _retry_read(
        self, handle: IO[bytes], shard_index: int, position: int, exc: Exception
    ) -> tuple[IO[bytes] | None, int]:
        """Re-open the shard at ``position`` and read the block again, up to ``retries`` times."""
        attempt = 0
        while _transient(exc) and attempt < self.spec.retries:
            attempt += 1
            self.retries += 1
            with contextlib.suppress(Exception):
                handle.close()
            try:
                handle = self.fs.open(self.paths[shard_index], "rb")
                handle.seek(position)
                return handle, handle.readinto(self.buffer)  # type: ignore[attr-defined]
            except Exception as again:
                exc = again
        self._error(shard_index, exc)
        with contextlib.suppress(Exception):
            handle.close()
        return None, 0

    def _read_decoded(self, pass_no: int, shard_index: int) -> bool:
        """Decode one shard through the format layer, one request per record batch."""
        perf = time.perf_counter_ns
        shared = self.shared
        spec = self.spec
        fmt = self.fmt
        path = spec.shards[shard_index].path
        attempt = 0
        t_open = perf()
        while True:
            raw = self._open(shard_index)
            if raw is None:
                self.visits.append((shard_index, t_open, 0, perf(), SHARD_FAILED))
                return perf() < shared.deadline
            # a native file is not wrapped (that would put the Python file layer back): its bytes come from
            # the process's read counter after the run
            counting = None if spec.native else _CountingReader(raw)
            source: Any = raw if counting is None else counting
            first = 0
            status = SHARD_DONE
            counted = 0
            retry = False
            try:
                fragments = None
                if spec.pattern == "random":
                    count = fragment_count(source, spec.loc, path, fmt)
                    fragments = (
                        np.random.default_rng([spec.seed, pass_no, shard_index]).permutation(count).tolist()
                    )
                batches = iter_open_shard(
                    source,
                    spec.loc,
                    path,
                    fmt,
                    schema=spec.schema,
                    columns=spec.columns,
                    fragments=fragments,
                )
                while True:
                    t1 = perf()
                    batch = next(batches, None)
                    t2 = perf()
                    if batch is None:
                        break
                    i = self.n
                    if i == self.capacity:
                        self._grow()
                    self.start[i] = t1
                    self.end[i] = t2
                    if counting is not None:
                        self.nbytes[i] = counting.count - counted
                        counted = counting.count
                    self.rows[i] = batch.num_rows
                    self.shard[i] = shard_index
                    self.n = i + 1
                    if not first:
                        first = t2
                    if t2 >= shared.deadline:
                        status = SHARD_STOPPED
                        break
            except Exception as exc:
                # a decoder cannot resume mid-stream: retry only a shard that failed before its first batch
                if not first and _transient(exc) and attempt < spec.retries:
                    attempt += 1
                    self.retries += 1
                    retry = True
                else:
                    self._error(shard_index, exc)
                    status = SHARD_FAILED
            finally:
                raw.close()
            if not retry:
                break
        done = perf()
        self.visits.append((shard_index, t_open, first, done, status))
        return status != SHARD_STOPPED and done < shared.deadline


def execute_run(spec: RunSpec, *, on_poll: Callable[[int], None] | None = None) -> RunTimings:
    """Run ``spec.workers`` reader threads over the plan once and return what they recorded.

    ``on_poll(new_bytes)`` is called from this thread a few times a second (for a progress bar), never
    from the workers. Ctrl-C stops the workers at their next request; the timings say ``interrupted``.
    With ``spec.native``, the bytes of the run are the process's read counter over the run, attributed to
    the batches in proportion to their rows (a native file cannot count per read without the Python layer).
    """
    shared = _Shared(spec)
    workers = [_Worker(i, spec, shared) for i in range(spec.workers)]
    threads = [
        threading.Thread(target=w.run, name=f"dsm-bench-{i}", daemon=True) for i, w in enumerate(workers)
    ]
    for thread in threads:
        thread.start()
    read_before = process_read_bytes() if spec.native else None

    def read_so_far() -> int:
        if read_before is not None:
            return (process_read_bytes() or read_before) - read_before
        return sum(int(w.nbytes[: w.n].sum()) for w in workers)

    shared.t0 = time.perf_counter_ns()
    if spec.duration_ns is not None:
        shared.deadline = shared.t0 + spec.duration_ns
    shared.go.set()
    interrupted = False
    reported = 0
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
                if on_poll is not None:
                    total = read_so_far()
                    on_poll(total - reported)
                    reported = total
    except KeyboardInterrupt:
        interrupted = True
        shared.deadline = 0  # every worker stops after its current request
        for thread in threads:
            thread.join()
    read_after = process_read_bytes() if read_before is not None else None
    for w in workers:
        if w.failure is not None:
            raise w.failure
    timings = _collect(workers, shared.t0, interrupted)
    if read_before is not None and read_after is not None:
        timings.io_bytes = read_after - read_before
        _attribute_bytes(timings, timings.io_bytes)
    return timings


def _attribute_bytes(timings: RunTimings, total: int) -> None:
    """Share ``total`` bytes among the requests by their rows, so that the shares add up to ``total``."""
    rows = timings.req_rows
    if rows.size == 0 or int(rows.sum()) == 0:
        return
    cumulative = np.round(np.cumsum(rows, dtype=np.float64) * (total / float(rows.sum()))).astype(np.int64)
    timings.req_bytes = np.diff(cumulative, prepend=0)


def _collect(workers: list[_Worker], t0: int, interrupted: bool) -> RunTimings:
    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    visits = [(w.index, *v) for w in workers for v in w.visits]
    columns = np.array(visits, dtype=np.int64).reshape(-1, 6) if visits else np.zeros((0, 6), np.int64)
    return RunTimings(
        t0_ns=t0,
        req_worker=cat([np.full(w.n, w.index, np.int64) for w in workers]),
        req_start=cat([w.start[: w.n] for w in workers]),
        req_end=cat([w.end[: w.n] for w in workers]),
        req_bytes=cat([w.nbytes[: w.n] for w in workers]),
        req_rows=cat([w.rows[: w.n] for w in workers]),
        req_shard=cat([w.shard[: w.n] for w in workers]),
        req_offset=cat([w.offset[: w.n] for w in workers]),
        shard_worker=columns[:, 0].copy(),
        shard_index=columns[:, 1].copy(),
        shard_open=columns[:, 2].copy(),
        shard_first=columns[:, 3].copy(),
        shard_done=columns[:, 4].copy(),
        shard_status=columns[:, 5].copy(),
        worker_done=np.array([w.done_ns for w in workers], np.int64),
        errors=sorted((e for w in workers for e in w.errors), key=lambda e: e.at_s),
        retries=sum(w.retries for w in workers),
        interrupted=interrupted,
    )
