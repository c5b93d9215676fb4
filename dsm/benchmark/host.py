"""What a benchmark run needs from the machine: dropping the page cache of local files before a cold run,
the process's read counter (the bytes of native Arrow reads), and a decoder primed before timing starts.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from dsm.contract import Shard
from dsm.formats import Format
from dsm.storage import Location

__all__ = ["CacheDrop", "drop_caches", "prime_decoder", "process_read_bytes"]


@dataclass(frozen=True, kw_only=True)
class CacheDrop:
    """What ``drop_caches`` did: whether the page cache of every shard was dropped, and why not."""

    applied: bool
    files: int
    note: str


def drop_caches(loc: Location, shards: Sequence[Shard]) -> CacheDrop:
    """Ask the kernel to drop the cached pages of each shard (local Linux files, no root needed).

    Uses ``posix_fadvise(POSIX_FADV_DONTNEED)`` after ``fdatasync`` (dirty pages are not dropped). Other
    storage cannot be made cold from here: the result says so, and the figures are then warm.
    """
    if not loc.is_local:
        return CacheDrop(
            applied=False,
            files=0,
            note=f"caches cannot be dropped on {loc.protocol}:// from here; figures are warm",
        )
    if not hasattr(os, "posix_fadvise"):
        return CacheDrop(applied=False, files=0, note="this OS has no posix_fadvise; figures are warm")
    dropped = 0
    for shard in shards:
        path = loc.path(shard.path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # a missing shard is reported by the run itself
        try:
            with contextlib.suppress(OSError):  # some filesystems refuse fdatasync on a read-only descriptor
                os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            dropped += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return CacheDrop(
        applied=dropped > 0,
        files=dropped,
        note=f"posix_fadvise(POSIX_FADV_DONTNEED) applied to {dropped} of {len(shards)} files before the run",
    )


def prime_decoder(fmt: Format, schema: pa.Schema, columns: Sequence[str] | None) -> None:
    """Write and decode a one-row file of this format and schema in memory, untimed and best-effort.

    The first decode in a process pays one-time costs (lazy imports, Arrow's thread pools, parser set-up)
    that no later run pays; paying them here keeps them out of the first timed run. Storage is not touched.
    """
    relaxed = pa.schema([field.with_nullable(True) for field in schema])
    try:
        sink = io.BytesIO()
        with fmt.open_writer(sink, relaxed) as writer:
            writer.write_batch(
                pa.RecordBatch.from_arrays([pa.nulls(1, f.type) for f in relaxed], schema=relaxed)
            )
        for _ in fmt.iter_batches(
            io.BytesIO(sink.getvalue()), shard="<warm-up>", schema=relaxed, columns=columns
        ):
            pass
    except Exception:  # a type the format cannot hold as null: the first run then pays those costs itself
        pass


_PROC_IO = "/proc/self/io"


def process_read_bytes() -> int | None:
    """Bytes this process has read through read syscalls (Linux ``rchar``), or None where unknown."""
    try:
        with open(_PROC_IO, "rb") as handle:
            for line in handle:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None
