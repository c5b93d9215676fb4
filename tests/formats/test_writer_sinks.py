"""What each format's writer does to the file object under it.

- After ``abort`` (a failed rewrite gives the file up) nothing more reaches the file: not a footer, not what a
  writer's stream still holds, not when the writer is collected after the file's owner has closed it (that
  printed "Error ignored when destroying file" and a Python traceback on a CLI error line).
- Arrow's writers (Parquet, Arrow IPC) write a record batch's buffers and each page header as writes of
  their own: the file gets them in pieces of about a MiB (``native_sink``), not in hundreds of small writes,
  each of which took the GIL and made a system call.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsm.formats import get_format
from dsm.formats._common import NATIVE_WRITE_BUFFER


class _File:
    """A write-only file object that keeps each write and fails, as a closed file does, once closed."""

    def __init__(self) -> None:
        self.writes: list[int] = []
        self.closed = False
        self.used_closed = 0

    def write(self, data: Any) -> int:
        if self.closed:
            self.used_closed += 1
            raise ValueError("write to closed file")
        size = memoryview(data).nbytes
        self.writes.append(size)
        return size

    def flush(self) -> None:
        if self.closed:
            self.used_closed += 1
            raise ValueError("flush of closed file")

    def close(self) -> None:
        self.closed = True


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "__key__": pa.array([f"k{i:08d}" for i in range(rows)], pa.string()),
            "text": pa.array(["".join(rng.choice(list("abcdefgh"), 40)) for _ in range(rows)], pa.string()),
            "blob": pa.array([rng.bytes(int(n)) for n in rng.integers(0, 300, rows)], pa.binary()),
        }
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["arrow", "csv", "jsonl", "parquet", "webdataset"]),
    rows=st.integers(0, 3_000),
    batches_before=st.integers(0, 4),
    batch_rows=st.sampled_from([1, 97, 1_000]),
    seed=st.integers(0, 2**16),
)
def test_nothing_reaches_the_file_after_abort(
    capfd: pytest.CaptureFixture[str],
    name: str,
    rows: int,
    batches_before: int,
    batch_rows: int,
    seed: int,
) -> None:
    table = _table(rows, seed)
    options = {"row_group_size": 500} if name == "parquet" else {}
    file = _File()
    # What existed before this example is set aside, so the collection below walks only what the example
    # made (the writer and what it holds): a full collection in a worker that ran other files took 0.3 s.
    gc.freeze()
    try:
        writer = get_format(name, **options).open_writer(file, table.schema)  # type: ignore[arg-type]
        for batch in table.to_batches(max_chunksize=batch_rows)[:batches_before]:
            writer.write_batch(batch)
        writer.abort()
        written = list(file.writes)
        file.close()
        del writer
        gc.collect()
    finally:
        gc.unfreeze()
    assert file.writes == written  # nothing after abort
    assert file.used_closed == 0  # not even on collection, into the closed file
    err = capfd.readouterr().err
    assert "Error ignored" not in err and "Exception ignored" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("name", ["arrow", "parquet"])
def test_arrow_writers_write_in_pieces_of_about_a_mebibyte(name: str) -> None:
    """48 numeric columns (the shape whose spill files took 81,900 writes for 0.5 GB), in batches of 1,000
    rows: each batch is 96 buffers for the Arrow writer, and each Parquet page a header and a body."""
    rng = np.random.default_rng(7)
    rows = 60_000
    table = pa.table({f"c{i}": rng.integers(0, 1 << 40, rows) for i in range(48)})
    file = _File()
    options = {"compression": "none"} if name == "parquet" else {}
    writer = get_format(name, **options).open_writer(file, table.schema)  # type: ignore[arg-type]
    for batch in table.to_batches(max_chunksize=1_000):
        writer.write_batch(batch)
    writer.close()
    total = sum(file.writes)
    assert total > 8 * NATIVE_WRITE_BUFFER  # large enough to say something
    # A write that would overflow the buffer sends the buffer first: pieces are at least a MiB less one
    # write, so at most about two per MiB, plus the last one
    assert len(file.writes) <= 2 * (total // NATIVE_WRITE_BUFFER) + 2, (len(file.writes), total)
    assert sorted(file.writes)[len(file.writes) // 2] >= NATIVE_WRITE_BUFFER // 2  # the median piece
