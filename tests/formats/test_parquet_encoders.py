"""Row groups encoded beside the Parquet writer (``dsm.formats._parquet_writer.GroupEncoders``).

Where fewer files are being written than there are cores, the writer hands each full row group to a thread
that encodes it into a file of its own in memory, and places the result as stored, in order; otherwise the
file's own pyarrow writer encodes it. Which of the two happens depends on what else runs at the time, so
the file must not show it: the same rows and options give the same bytes either way, group by group, in
any mix, and fail the same way.
"""

from __future__ import annotations

import gc
import io
import itertools
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dsm
from dsm.formats import _parquet_writer as writer_module
from dsm.formats import get_format
from dsm.formats._stored_groups import StoredGroup
from dsm.formats.parquet import ParquetFormat
from dsm.hashing.fingerprint import digest_batches
from tests.strategies import arrow_types, schemas, tables
from tests.trust_support import check_published, register_table, write_shards

ENCODERS = writer_module.ENCODERS
FMT = ParquetFormat()


@contextmanager
def _scheduled(choices: list[int]) -> Iterator[None]:
    """How many groups each writer may have encoding beside it, taken from ``choices`` in turn, in place
    of the spare cores (0: the writer encodes the group itself, by the file's writer where no group is
    being encoded beside, else into a file of its own in memory)."""
    turns = itertools.cycle(choices)
    ENCODERS.spare = lambda: next(turns)  # type: ignore[method-assign]
    try:
        yield
    finally:
        del ENCODERS.spare


def _write(table: pa.Table, options: dict[str, Any], batch_rows: int) -> bytes | str:
    """The file dsm's Parquet writer makes of ``table`` (written in batches of ``batch_rows``, as a rewrite
    hands them over: in the types Parquet stores), or the failure it ends with (its type and message)."""
    storage = FMT.storage(table.schema)
    sink = io.BytesIO()
    try:
        writer = get_format("parquet", **options).open_writer(sink, storage.schema)
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(storage.convert(batch))
        writer.close()
    except (pa.ArrowException, ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return sink.getvalue()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    schema=schemas(arrow_types(max_leaves=3), max_fields=3),
    row_group_size=st.integers(1, 9),
    batch_rows=st.integers(1, 11),
    compression=st.sampled_from(["none", "zstd", "snappy", "gzip"]),
    use_dictionary=st.booleans(),
    write_statistics=st.booleans(),
    mix=st.lists(st.integers(0, 3), min_size=1, max_size=6),
)
def test_the_same_bytes_whoever_encodes_each_group(
    data: st.DataObject,
    schema: pa.Schema,
    row_group_size: int,
    batch_rows: int,
    compression: str,
    use_dictionary: bool,
    write_statistics: bool,
    mix: list[int],
) -> None:
    table = data.draw(tables(schema, max_rows=40))
    assume(not FMT.storage(schema).problems)
    options = {
        "row_group_size": row_group_size,
        "compression": compression,
        "use_dictionary": use_dictionary,
        "write_statistics": write_statistics,
    }
    with _scheduled([0]):
        here = _write(table, options, batch_rows)
    with _scheduled([3]):
        beside = _write(table, options, batch_rows)
    with _scheduled(mix):
        mixed = _write(table, options, batch_rows)
    assert beside == here
    assert mixed == here
    if isinstance(here, bytes):
        file = pq.ParquetFile(io.BytesIO(here), page_checksum_verification=True)
        groups = [file.metadata.row_group(i).num_rows for i in range(file.metadata.num_row_groups)]
        cut = [row_group_size] * (table.num_rows // row_group_size)
        assert groups == cut + ([table.num_rows % row_group_size] if table.num_rows % row_group_size else [])
        stored = FMT.storage(schema).schema
        back = list(FMT.iter_batches(io.BytesIO(here), shard="s.parquet", schema=stored))
        assert digest_batches(back) == digest_batches(table.to_batches())


def test_groups_pyarrow_cuts_are_placed_each_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow cuts a group of more rows than it puts in one (64 Mi) in several: each encoded group's file
    may hold more than one, placed in order. Here every group beside is cut in three."""
    original = writer_module.encoded_group

    def in_three(group: pa.Table, schema: pa.Schema, options: dict[str, Any]) -> Any:
        sink = pa.BufferOutputStream()
        with pq.ParquetWriter(sink, schema, **options) as writer:
            writer.write_table(group, row_group_size=-(-group.num_rows // 3))
        return StoredGroup.encoded(sink.getvalue())

    monkeypatch.setattr(writer_module, "encoded_group", in_three)
    table = _text_table(3_000)
    with _scheduled([2]):
        data = _write(table, {"row_group_size": 900, "compression": "zstd"}, 250)
    monkeypatch.setattr(writer_module, "encoded_group", original)
    assert isinstance(data, bytes)
    file = pq.ParquetFile(io.BytesIO(data), page_checksum_verification=True)
    groups = [file.metadata.row_group(i).num_rows for i in range(file.metadata.num_row_groups)]
    assert sum(groups) == 3_000 and len(groups) > 4  # some groups, at least, were encoded beside
    assert file.read().equals(table)
    back = list(FMT.iter_batches(io.BytesIO(data), shard="s.parquet", schema=table.schema))
    assert digest_batches(back) == digest_batches(table.to_batches())


def _text_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(3)
    words = np.array(["ono", "tzteda", "aeontr", "wlnthe", "oei", "ia"])
    return pa.table(
        {
            "id": pa.array(np.arange(rows), pa.int64()),
            "text": pa.array([" ".join(rng.choice(words, 20)) for _ in range(rows)], pa.string()),
        }
    )


def _threads_that_encode(writers: int) -> list[str]:
    """The threads that encoded the groups of one file, written while ``writers - 1`` other files are
    open (and unwritten)."""
    gc.collect()  # writers other tests gave up on, no longer counted
    names: list[str] = []
    original = writer_module.encoded_group

    def recorded(*args: Any) -> Any:
        names.append(threading.current_thread().name)
        return original(*args)

    others = [
        get_format("parquet").open_writer(io.BytesIO(), pa.schema([("x", pa.int64())]))
        for _ in range(writers - 1)
    ]
    writer_module.encoded_group = recorded  # type: ignore[assignment]
    try:
        table = _text_table(4_000)
        writer = get_format("parquet", row_group_size=500).open_writer(io.BytesIO(), table.schema)
        for batch in table.to_batches(max_chunksize=250):
            writer.write_batch(batch)
        writer.close()
    finally:
        writer_module.encoded_group = original  # type: ignore[assignment]
        for other in others:
            other.close()
    return names


def test_a_file_written_alone_is_encoded_on_the_encoders_threads_too() -> None:
    names = _threads_that_encode(1)
    here = threading.current_thread().name
    assert set(names) <= {here} | {n for n in names if n.startswith("dsm-encode")}
    assert any(name.startswith("dsm-encode") for name in names)  # 8 groups: some encoded beside


def test_as_many_files_as_cores_are_encoded_each_by_its_own_writer() -> None:
    assert _threads_that_encode(ENCODERS.width) == []


def test_a_writer_encodes_beside_it_on_the_cores_no_file_has(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ENCODERS, "width", 4)
    gc.collect()
    schema = pa.schema([("x", pa.int64())])
    writers = [get_format("parquet").open_writer(io.BytesIO(), schema)]
    assert ENCODERS.spare() == 3  # alone: a group on every other core
    writers += [get_format("parquet").open_writer(io.BytesIO(), schema) for _ in range(2)]
    assert ENCODERS.spare() == 1
    writers.append(get_format("parquet").open_writer(io.BytesIO(), schema))
    assert ENCODERS.spare() == 0  # a writer per core: each encodes its own groups
    writers.pop().abort()
    writers.pop().close()
    assert ENCODERS.spare() == 2
    writers.pop()  # given up without close or abort: collected, it no longer counts
    gc.collect()
    assert ENCODERS.spare() == 3
    writers.pop().close()


def test_a_forked_child_encodes_on_threads_of_its_own() -> None:
    table = _text_table(3_000)
    with _scheduled([2]):
        expected = _write(table, {"row_group_size": 400}, 300)  # the parent's encoder threads now run
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's exit status is what is checked
            os._exit(0 if _write(table, {"row_group_size": 400}, 300) == expected else 1)
        _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_other_readers_read_a_file_whose_groups_were_encoded_beside(tmp_path: Any) -> None:
    import duckdb
    import polars as pl

    table = _text_table(3_000)
    with _scheduled([2]):
        data = _write(table, {"row_group_size": 400, "compression": "zstd"}, 300)
    assert isinstance(data, bytes)
    path = tmp_path / "s.parquet"
    path.write_bytes(data)
    assert pl.read_parquet(path).to_arrow().equals(pl.from_arrow(table).to_arrow())
    got = duckdb.sql(f"SELECT count(*), sum(id), sum(length(text)) FROM '{path}'").fetchall()[0]
    assert got == (3_000, sum(range(3_000)), sum(len(t) for t in table.column("text").to_pylist()))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    schema=schemas(arrow_types(max_leaves=3), max_fields=3),
    row_group_size=st.integers(1, 9),
    mix=st.lists(st.integers(0, 3), min_size=1, max_size=6),
)
def test_a_conversion_whose_groups_are_encoded_beside_is_published_verified(
    data: st.DataObject, schema: pa.Schema, row_group_size: int, mix: list[int]
) -> None:
    """Through ``dsm.convert_format``: the published version passes ``verify --deep``, registers again to
    the same fingerprint, and its file is the one the file's writer alone would have written."""
    table = data.draw(tables(schema, max_rows=40))
    assume(not FMT.storage(schema).problems)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        registry = str(root / "registry")
        write_shards(root / "source", table, "arrow", 1)
        contract = register_table(root / "source", "arrow", table.schema, registry, "src")
        options = {"row_group_size": row_group_size, "compression": "zstd"}
        written = {}
        for name, schedule in (("here", [0]), ("mixed", mix)):
            with _scheduled(schedule):
                out = str(root / name)
                result = dsm.convert_format(
                    contract.ref, out, format="parquet", registry=registry, format_options=options
                )
            (path,) = sorted((root / name).glob("*.parquet"))
            written[name] = path.read_bytes()
        assert written["mixed"] == written["here"]
        expected = FMT.storage(contract.schema.to_arrow())
        rows = pa.Table.from_batches(
            [expected.convert(b) for b in table.combine_chunks().to_batches()], schema=expected.schema
        )
        check_published(result.contract, rows, registry, ordered=True)
