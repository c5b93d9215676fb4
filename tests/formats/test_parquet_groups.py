"""Row groups decoded ahead, several at once (a file read by offset: local disk, the cache), against the
same file read as a stream, group after group: the same batches, the same rows in each, and, for damaged
bytes, the same failure after the same batches."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dsm.errors import DsmError
from dsm.formats import parquet as parquet_module
from dsm.formats.parquet import ParquetFormat
from dsm.hashing.fingerprint import digest_batch
from tests.strategies import arrow_types, schemas, tables

FMT = ParquetFormat()


def _outcome(source: Any, *, batch_rows: int, fragments: list[int] | None) -> tuple[list[Any], str | None]:
    """Each batch's rows and row fingerprint, then the error that ended the read (type and message)."""
    seen: list[Any] = []
    try:
        if fragments is None:
            batches = FMT.iter_batches(source, shard="s.parquet", batch_rows=batch_rows)
        else:
            batches = FMT.iter_fragments(source, fragments, shard="s.parquet", batch_rows=batch_rows)
        for batch in batches:
            digest = digest_batch(batch)
            seen.append((batch.num_rows, digest.unordered, digest.ordered))
    except DsmError as exc:
        return seen, f"{type(exc).__name__}: {exc}"
    return seen, None


def _both(data: bytes, *, batch_rows: int, fragments: list[int] | None = None) -> tuple[Any, Any]:
    """The outcome read ahead (a pyarrow native file) and read as a stream (a Python file object)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.parquet"
        path.write_bytes(data)
        with pa.OSFile(str(path), "rb") as native:
            ahead = _outcome(native, batch_rows=batch_rows, fragments=fragments)
    return ahead, _outcome(io.BytesIO(data), batch_rows=batch_rows, fragments=fragments)


def _written(table: pa.Table, row_group_size: int, compression: str) -> bytes | None:
    sink = io.BytesIO()
    try:
        pq.write_table(
            table, sink, row_group_size=row_group_size, compression=compression, write_page_checksum=True
        )
    except (pa.ArrowException, ValueError):
        return None
    return sink.getvalue()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    schema=schemas(arrow_types(max_leaves=3), max_fields=3),
    row_group_size=st.integers(1, 7),
    batch_rows=st.integers(1, 9),
    compression=st.sampled_from(["none", "zstd", "snappy"]),
)
def test_groups_read_ahead_give_what_the_stream_gives(
    data: st.DataObject, schema: pa.Schema, row_group_size: int, batch_rows: int, compression: str
) -> None:
    table = data.draw(tables(schema, max_rows=30))
    written = _written(table, row_group_size, compression)
    assume(written is not None)
    assert written is not None
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(written) - 1), st.integers(0, 7)), max_size=3))
    damaged = bytearray(written)
    for position, bit in flips:
        damaged[position] ^= 1 << bit
    groups = pq.ParquetFile(io.BytesIO(written)).metadata.num_row_groups
    fragments = data.draw(st.none() | st.lists(st.integers(0, max(groups - 1, 0)), max_size=6))
    try:
        ahead, streamed = _both(bytes(damaged), batch_rows=batch_rows, fragments=fragments)
    except (pa.ArrowException, OSError) as exc:  # a footer too damaged to open: neither path gets that far
        assume(False)
        raise AssertionError from exc
    assert ahead == streamed


def _read(source: Any) -> pa.Table:
    return pa.Table.from_batches(list(FMT.iter_batches(source, shard="s.parquet", batch_rows=64)))


def test_a_file_read_by_offset_decodes_its_groups_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-ahead is what a native file gets (a stream, one group after another, does not), and a
    damaged group still fails only after every batch before it was handed out."""
    calls: list[int] = []
    real = parquet_module.checked_ahead

    def spy(items: Any, check: Any, *, ahead: int = 1) -> Any:
        calls.append(ahead)
        return real(items, check, ahead=ahead)

    monkeypatch.setattr(parquet_module, "checked_ahead", spy)
    table = pa.table({"id": list(range(1000)), "text": [f"value {i}" * 3 for i in range(1000)]})
    path = tmp_path / "s.parquet"
    pq.write_table(table, path, row_group_size=100, compression="none", write_page_checksum=True)
    with pa.OSFile(str(path), "rb") as native:
        assert _read(native).equals(table)
    assert parquet_module._GROUPS_AHEAD in calls
    calls.clear()
    with path.open("rb") as stream:
        assert _read(stream).equals(table)
    assert parquet_module._GROUPS_AHEAD not in calls
    with path.open("rb") as stream, pa.PythonFile(stream, mode="r") as wrapped:  # native, yet in order
        assert _read(wrapped).equals(table)
    assert parquet_module._GROUPS_AHEAD not in calls
    with pa.memory_map(str(path)) as mapped:
        assert _read(mapped).equals(table)
    assert parquet_module._GROUPS_AHEAD in calls
    calls.clear()

    damaged = bytearray(path.read_bytes())
    seventh = pq.ParquetFile(path).metadata.row_group(7).column(1)
    first = seventh.dictionary_page_offset if seventh.has_dictionary_page else seventh.data_page_offset
    damaged[first + seventh.total_compressed_size - 3] ^= 0xFF
    path.write_bytes(bytes(damaged))
    rows = 0
    with pa.OSFile(str(path), "rb") as native, pytest.raises(DsmError, match="row group 7"):
        for batch in FMT.iter_batches(native, shard="s.parquet", batch_rows=64):
            rows += batch.num_rows
    assert rows == 700


def test_a_forked_child_goes_on_reading_the_groups_ahead(tmp_path: Path) -> None:
    table = pa.table({"id": list(range(600))})
    path = tmp_path / "s.parquet"
    pq.write_table(table, path, row_group_size=50)
    with pa.OSFile(str(path), "rb") as native:
        batches = FMT.iter_batches(native, shard="s.parquet", batch_rows=50)
        first = next(batches)
        assert first.column(0).to_pylist() == list(range(50))
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's exit status is what is checked
            rest = [v for b in batches for v in b.column(0).to_pylist()]
            os._exit(0 if rest == list(range(50, 600)) else 1)
        _, status = os.waitpid(child, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert [v for b in batches for v in b.column(0).to_pylist()] == list(range(50, 600))


def test_small_row_groups_are_read_in_batches_that_span_them(tmp_path: Path) -> None:
    """Consecutive groups that together hold at most ``batch_rows`` rows are decoded as one run, so the
    batches after the read are the size aimed at, not the file's; a damaged group names its run, and the
    runs before it were handed out whole."""
    table = pa.table({"id": list(range(1000)), "text": [f"value {i}" * 3 for i in range(1000)]})
    path = tmp_path / "s.parquet"
    pq.write_table(table, path, row_group_size=10, compression="zstd", write_page_checksum=True)
    for opened in (pa.OSFile(str(path), "rb"), io.BytesIO(path.read_bytes())):
        with opened as source:
            batches = list(FMT.iter_batches(source, shard="s.parquet", batch_rows=64))
        assert [b.num_rows for b in batches] == [60] * 16 + [40]
        assert pa.Table.from_batches(batches).equals(table)
    fragments = FMT.iter_fragments(io.BytesIO(path.read_bytes()), [3, 4], shard="s.parquet", batch_rows=64)
    assert [b.num_rows for b in fragments] == [10, 10]  # fragments stay whole groups, one batch each
    # a read from a row (a rewrite's part of a shard, the read platform) decodes group by group, so that
    # one that stops early decodes at most the group it stops in
    for start in (0, 25):
        read = FMT.iter_batches_from(
            io.BytesIO(path.read_bytes()), shard="s.parquet", start_row=start, batch_rows=64
        )
        assert [b.num_rows for b, _ in read] == [10 - start % 10] + [10] * (99 - start // 10)

    damaged = bytearray(path.read_bytes())
    chunk = pq.ParquetFile(path).metadata.row_group(37).column(1)
    first = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    damaged[first + chunk.total_compressed_size - 3] ^= 0xFF
    path.write_bytes(bytes(damaged))
    for opened in (pa.OSFile(str(path), "rb"), io.BytesIO(bytes(damaged))):
        rows = 0
        with opened as source, pytest.raises(DsmError, match="row groups 36-41"):
            for batch in FMT.iter_batches(source, shard="s.parquet", batch_rows=64):
                rows += batch.num_rows
        assert rows == 360


def test_a_large_row_group_on_local_disk_is_decoded_page_by_page(tmp_path: Path) -> None:
    """A file on local disk is read through a stream per column (``_reader``), not with each column chunk
    of a row group read whole first: decoding a 48 MB column chunk holds a few pages and a batch, not the
    chunk (pre-buffered, the peak was 54.5 MB; streamed, 12.6). Measured by pyarrow's pool in a fresh
    interpreter, whose peak is this read's alone."""
    path = tmp_path / "big.parquet"
    values = [os.urandom(4096) for _ in range(12_000)]  # incompressible: stored as large as decoded
    pq.write_table(
        pa.table({"blob": values}),
        path,
        row_group_size=len(values),
        compression="none",
        use_dictionary=False,
        write_page_checksum=True,
    )
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0).total_compressed_size
    assert chunk > 48_000_000
    script = (
        "import sys, pyarrow as pa\n"
        "from dsm.formats.parquet import ParquetFormat\n"
        "rows = 0\n"
        "with pa.OSFile(sys.argv[1], 'rb') as native:\n"
        "    for batch in ParquetFormat().iter_batches(native, shard='big.parquet', batch_rows=256):\n"
        "        rows += batch.num_rows\n"
        "print(rows, pa.default_memory_pool().max_memory())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    rows, peak = map(int, done.stdout.split())
    assert rows == len(values)
    assert peak < chunk // 2, f"peak {peak:,} bytes for a column chunk of {chunk:,}"
