"""Long work a page asks for (a row diff, a verify), run one at a time in a worker thread of the server.

A job is keyed by what it computes (``("diff", "web@1", "web@2", ("id",))``): asking again for the same key
returns the same job, running or finished, so a page that polls never starts the work twice. Finished jobs
are kept (newest :data:`KEEP` of them; a job's ``close`` runs when it is dropped, which removes a diff's work
folder); at most :data:`QUEUE` jobs wait, and one more is refused with a message rather than queued without
end. Nothing a job does writes to the data or the registry.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dsm.errors import DsmError, StorageError

__all__ = ["KEEP", "QUEUE", "Job", "JobProgress", "Jobs"]

KEEP = 8
QUEUE = 4


class JobProgress:
    """A :class:`dsm.engine.Progress` that remembers where the work is, for the page to show."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.description = ""
        self.total_bytes = 0
        self.done_bytes = 0
        self.total_units = 0

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        with self._lock:
            self.description, self.total_bytes, self.total_units = description, total_bytes, total_units
            self.done_bytes = 0

    def advance(self, nbytes: int) -> None:
        with self._lock:
            self.done_bytes += nbytes

    def finish(self) -> None:
        with self._lock:
            self.done_bytes = max(self.done_bytes, self.total_bytes)

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            fraction = min(1.0, self.done_bytes / self.total_bytes) if self.total_bytes else None
            return {
                "description": self.description,
                "done_bytes": self.done_bytes,
                "total_bytes": self.total_bytes,
                "fraction": fraction,
            }


@dataclass
class Job:
    """One piece of work: ``state`` is ``queued``, ``running``, ``done`` or ``failed``."""

    key: Hashable
    kind: str
    state: str = "queued"
    result: Any = None
    error: str | None = None
    error_kind: str | None = None
    progress: JobProgress = field(default_factory=JobProgress)
    queued_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    close: Callable[[Any], None] | None = None

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "state": self.state,
            "error": self.error,
            "error_kind": self.error_kind,
            "progress": self.progress.to_dict(),
            "queued_at": _iso(self.queued_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "seconds": (self.finished_at or time.time()) - self.started_at if self.started_at else None,
        }


def _iso(when: float | None) -> str | None:
    if when is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


class Jobs:
    """The server's jobs: one worker thread, a bounded queue, the newest finished ones kept."""

    def __init__(self, *, keep: int = KEEP, queue: int = QUEUE) -> None:
        self._lock = threading.Lock()
        self._jobs: OrderedDict[Hashable, Job] = OrderedDict()
        self._keep = keep
        self._queue = queue
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsm-serve-job")
        self._closed = False

    def get(self, key: Hashable) -> Job | None:
        with self._lock:
            return self._jobs.get(key)

    def finished(self, kind: str) -> list[Job]:
        """Finished jobs of ``kind``, newest first."""
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.kind == kind and j.finished]
        return sorted(jobs, key=lambda j: j.finished_at or 0, reverse=True)

    def submit(
        self,
        key: Hashable,
        kind: str,
        work: Callable[[JobProgress], Any],
        *,
        close: Callable[[Any], None] | None = None,
        retry: bool = False,
    ) -> Job:
        """The job of ``key``: the one already known, else ``work`` queued (refused when the queue is
        full). A failed job stays failed (its error is the answer) unless ``retry``."""
        with self._lock:
            if self._closed:
                raise StorageError("the server is stopping; no new work is started")
            known = self._jobs.get(key)
            if known is not None and not (retry and known.state == "failed"):
                self._jobs.move_to_end(key)
                return known
            waiting = sum(1 for j in self._jobs.values() if not j.finished)
            if waiting > self._queue:
                raise StorageError(
                    f"{waiting} comparisons or verifies are running or waiting; try again when one is done"
                )
            job = Job(key=key, kind=kind, close=close)
            self._jobs[key] = job
            self._drop_old()
        self._pool.submit(self._run, job, work)
        return job

    def _run(self, job: Job, work: Callable[[JobProgress], Any]) -> None:
        job.state, job.started_at = "running", time.time()
        try:
            job.result = work(job.progress)
            job.state = "done"
        except DsmError as exc:
            job.error, job.error_kind, job.state = str(exc), type(exc).__name__, "failed"
        except Exception as exc:  # a bug: shown on the page instead of lost in a thread
            job.error, job.error_kind, job.state = f"internal error: {exc!r}", "InternalError", "failed"
        finally:
            job.finished_at = time.time()
        with self._lock:
            dropped = self._closed or job.key not in self._jobs
        if dropped:
            self._release(job)

    def _drop_old(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.finished]
        while len(finished) > self._keep:
            self._release(self._jobs.pop(finished.pop(0)))

    @staticmethod
    def _release(job: Job) -> None:
        if job.close is not None and job.result is not None:
            job.close(job.result)
            job.result = None

    def close(self) -> None:
        """Stop taking work, wait for the running job, release every result."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for job in self._jobs.values():
                self._release(job)
            self._jobs.clear()
