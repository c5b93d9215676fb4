"""The row source: rows by position on every format and store equal independent reads of the same files;
locations name the right shard and piece; only the pieces holding the rows are read; indexes are cached and
checked against the shard's checksum."""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.ipc as ipc
import pyarrow.json as pj
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.errors import CheckFailed, InputError
from dsm.inspect import IndexCache, open_rows, sample_positions
from dsm.inspect.source import RowSource
from tests.conftest import StorageRoot
from tests.inspect_data import FLAT_FORMATS, flat_table, register_table, webdataset_table


def _table_for(fmt: str, rows: int = 1200) -> pa.Table:
    return webdataset_table(rows // 4) if fmt == "webdataset" else flat_table(rows)


def _pyarrow_read(fmt: str, data: bytes, schema: pa.Schema) -> pa.Table:
    """A whole shard read by pyarrow's own readers (Python's tarfile for WebDataset), as ``schema``."""
    if fmt == "parquet":
        return pq.read_table(io.BytesIO(data)).cast(schema)
    if fmt == "arrow":
        return ipc.open_file(pa.BufferReader(data)).read_all().cast(schema)
    text_types = {f.name: (pa.string() if pa.types.is_binary(f.type) else f.type) for f in schema}
    if fmt == "jsonl":
        read = pj.read_json(
            io.BytesIO(data),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema(list(text_types.items()))),
        )
    elif fmt == "csv":
        read = pcsv.read_csv(
            io.BytesIO(data),
            parse_options=pcsv.ParseOptions(newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(
                column_types=text_types, strings_can_be_null=True, quoted_strings_can_be_null=False
            ),
        )
    else:
        samples: dict[str, dict[str, Any]] = {}
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive:
                key, _, ext = member.name.partition(".")
                handle = archive.extractfile(member)
                value = handle.read() if handle else b""
                samples.setdefault(key, {"__key__": key})[ext] = value if ext == "png" else value.decode()
        return pa.Table.from_pylist(list(samples.values()), schema=schema)
    columns = []
    for field in schema:
        column = read.column(field.name)
        if pa.types.is_binary(field.type):
            column = pa.array(
                [None if v is None else base64.b64decode(v) for v in column.to_pylist()], field.type
            )
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


@pytest.fixture(params=FLAT_FORMATS)
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _registered(
    storage: StorageRoot, tmp_path: Path, fmt: str, rows: int = 1200, batch_rows: int = 97
) -> tuple[RowSource, pa.Table]:
    table = _table_for(fmt, rows)
    contract = register_table(
        storage.join(f"data-{fmt}"),
        table,
        fmt,
        name=f"flat-{fmt}",
        registry=str(tmp_path / "registry"),
        shards=3,
        batch_rows=batch_rows,
        storage_options=storage.options,
    )
    source = open_rows(
        contract.ref,
        registry=str(tmp_path / "registry"),
        storage_options=storage.options,
        cache_dir=str(tmp_path / "cache"),
    )
    return source, table


def test_rows_equal_pyarrows_own_read_of_the_same_positions(
    storage: StorageRoot, tmp_path: Path, fmt: str
) -> None:
    source, table = _registered(storage, tmp_path, fmt)
    fs = storage.fs()
    loc = source.location
    whole = pa.concat_tables(
        _pyarrow_read(fmt, fs.cat_file(loc.path(shard.path)), table.schema) for shard in source.shards
    )
    assert whole.equals(table)  # the files hold the table (so the reads below compare like with like)
    total = source.num_rows
    boundary = source.shard_start(1)
    for offset, count in [(0, 5), (boundary - 3, 7), (total - 4, 4), (total // 2, 1)]:
        got, places = source._range(offset, count, list(table.schema.names))
        assert got.equals(whole.slice(offset, count)), (fmt, offset, count)
        assert [p.position for p in places] == list(range(offset, offset + count))
    positions = [total - 1, 0, boundary, 17]
    got, _ = source._take(positions, ["id" if fmt != "webdataset" else "__key__"])
    name = got.column_names[0]
    assert got.column(0).to_pylist() == [whole.column(name)[p].as_py() for p in positions]


def test_locations_name_the_shard_and_piece_that_hold_the_row(tmp_path: Path, fmt: str) -> None:
    root = StorageRoot(kind="local", url=str(tmp_path / "store"))
    source, table = _registered(root, tmp_path, fmt)
    for position in (0, 96, 97, source.shard_start(2) + 5, source.num_rows - 1):
        place = source.locate(position)
        shard = source.shards[place.shard_index]
        assert (
            source.shard_start(place.shard_index)
            <= position
            < source.shard_start(place.shard_index) + int(shard.rows or 0)
        )
        assert place.shard == shard.path and place.row == position - source.shard_start(place.shard_index)
        path = Path(source.location.path(shard.path))
        if fmt == "parquet":
            meta = pq.ParquetFile(path).metadata
            starts = [0]
            for group in range(meta.num_row_groups):
                starts.append(starts[-1] + meta.row_group(group).num_rows)
            expected = max(i for i in range(meta.num_row_groups) if starts[i] <= place.row)
            assert (place.piece_kind, place.piece, place.piece_row) == (
                "row_group",
                expected,
                place.row - starts[expected],
            )
        elif fmt == "arrow":
            reader = ipc.open_file(str(path))
            starts = [0]
            for batch in range(reader.num_record_batches):
                starts.append(starts[-1] + reader.get_batch(batch).num_rows)
            expected = max(i for i in range(reader.num_record_batches) if starts[i] <= place.row)
            assert (place.piece_kind, place.piece) == ("record_batch", expected)
        elif fmt == "jsonl":
            lines = path.read_bytes().split(b"\n")
            assert json.loads(lines[place.line - 1])["id"] == table.column("id")[position].as_py()
            assert path.read_bytes()[place.byte_offset :].startswith(lines[place.line - 1])
        elif fmt == "csv":
            reader = csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline=""))
            starts_at = {}
            next(reader)
            for index, _record in enumerate(reader):
                starts_at[index] = reader.line_num
            # line_num is the line a record ends on; the record starts after the previous one ends.
            first_line = (starts_at[place.row - 1] + 1) if place.row else 2
            assert place.line == first_line
        else:
            assert (place.piece_kind, place.piece) == ("sample", place.row)
            with tarfile.open(path) as archive:
                first = next(
                    m
                    for m in archive.getmembers()
                    if m.name.startswith(f"{table.column('__key__')[position].as_py()}.")
                )
            assert place.byte_offset == first.offset


class _Counting:
    """A file that counts the bytes read through it."""

    def __init__(self, raw: Any, counter: list[int]) -> None:
        self._raw = raw
        self._counter = counter

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._counter[0] += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(memoryview(buffer)))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    def read_buffer(self, size: int = -1) -> pa.Buffer:
        return pa.py_buffer(self.read(size))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv", "arrow", "webdataset"])
def test_a_look_at_the_last_rows_reads_only_the_piece_that_holds_them(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = StorageRoot(kind="local", url=str(tmp_path / "store"))
    source, _ = _registered(root, tmp_path, fmt, rows=40_000, batch_rows=2000)
    last = len(source.shards) - 1
    index = source.index(last)  # built once (one full read, checksummed), then kept
    counter = [0]
    opened = source._open

    @contextlib.contextmanager
    def counting(shard: int, *, scan: bool = False) -> Iterator[Any]:
        with opened(shard, scan=scan) as handle:
            yield _Counting(handle, counter)

    monkeypatch.setattr(source, "_open", counting)
    page = source.read(source.num_rows - 3, 3)
    assert [r.location.shard_index for r in page.rows] == [last] * 3
    span = index.span(index.piece_of(index.rows - 3), index.pieces - 1)
    assert span is not None
    footer = (
        2 * 65_536 if fmt in ("parquet", "arrow") else 0
    )  # pyarrow reads a file's tail to find its footer
    lines = 2 if fmt in ("jsonl", "csv") else 1  # line formats read the block again for the rows' lines
    assert 0 < counter[0] <= lines * (span[1] - span[0]) + footer, (fmt, counter[0], span)
    assert counter[0] < source.shards[last].bytes / 4


def test_index_is_stored_and_reused(tmp_path: Path) -> None:
    source, _ = _registered(StorageRoot(kind="local", url=str(tmp_path / "store")), tmp_path, "jsonl")
    source.read(source.num_rows - 1, 1)
    assert source.index_cache.built == 1
    assert len(list(source.index_cache.entries())) == 1
    again = RowSource(source.contract, index_cache=IndexCache(tmp_path / "cache"))
    again.read(source.num_rows - 1, 1)
    assert again.index_cache.built == 0  # loaded, not rebuilt


def test_a_changed_shard_is_refused_by_its_checksum_when_indexed(tmp_path: Path) -> None:
    source, _ = _registered(StorageRoot(kind="local", url=str(tmp_path / "store")), tmp_path, "jsonl")
    source.read(0, 1)
    path = Path(source.location.path(source.shards[0].path))
    data = bytearray(path.read_bytes())
    data[5] = ord("9") if data[5] != ord("9") else ord("8")  # same size, other bytes
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))
    fresh = RowSource(source.contract, index_cache=IndexCache(tmp_path / "cache"))
    with pytest.raises(CheckFailed, match=r"part-00000\.jsonl: checksum"):
        fresh.read(0, 1)
    path.write_bytes(bytes(data[:-10]))
    with pytest.raises(CheckFailed, match="the contract records"):
        RowSource(source.contract, index_cache=IndexCache(tmp_path / "cache")).read(0, 1)


def test_an_unwritable_cache_keeps_the_index_in_memory(tmp_path: Path) -> None:
    source, _ = _registered(StorageRoot(kind="local", url=str(tmp_path / "store")), tmp_path, "csv")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    fresh = RowSource(source.contract, index_cache=IndexCache(blocked))
    page = fresh.read(3, 2)
    assert [r.position for r in page.rows] == [3, 4]
    assert any("not writable" in note for note in page.notes)


def test_positions_out_of_range_and_sizes_are_refused(tmp_path: Path) -> None:
    source, _ = _registered(StorageRoot(kind="local", url=str(tmp_path / "store")), tmp_path, "parquet")
    with pytest.raises(InputError, match="does not exist"):
        source.locate(source.num_rows)
    with pytest.raises(InputError, match="at most"):
        source.read(0, 10**9)
    with pytest.raises(InputError, match="past the last row"):
        source.read(source.num_rows + 1, 1)
    assert source.read(source.num_rows, 5).rows == ()


@settings(max_examples=40, deadline=None)
@given(total=st.integers(0, 5000), count=st.integers(0, 300), seed=st.integers(0, 2**32))
def test_sample_positions_are_distinct_sorted_in_range_and_repeatable(
    total: int, count: int, seed: int
) -> None:
    picked = sample_positions(total, count, seed)
    assert picked == sorted(set(picked)) and len(picked) == min(total, count)
    assert all(0 <= p < total for p in picked)
    assert picked == sample_positions(total, count, seed)


def test_sample_is_uniform_over_the_whole_dataset() -> None:
    hits = [0] * 10
    for seed in range(400):
        for position in sample_positions(1000, 5, seed):
            hits[position // 100] += 1
    assert min(hits) > 140 and max(hits) < 260  # 200 expected per tenth


def _table_with_awkward_text(rows: int) -> pa.Table:
    texts = []
    for i in range(rows):
        text = f"value {i}"
        if i % 3 == 0:
            text += ', with "quotes", commas'
        if i % 4 == 0:
            text += "\r\nand a second line"
        if i % 7 == 0:
            text = ""
        texts.append(text)
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "text": pa.array(texts, pa.string()),
            "x": pa.array([i * 0.5 if i % 5 else None for i in range(rows)], pa.float64()),
        }
    )


def _files_of_other_tools(folder: Path, table: pa.Table) -> dict[str, Path]:
    """The same rows written by DuckDB (Parquet, CSV, JSON lines), Python's csv module (CRLF line ends)
    and pyarrow with unusual options (data page v2, no dictionaries; Arrow IPC, lz4, uneven batches)."""
    import duckdb

    folder.mkdir(parents=True)
    out = {}
    con = duckdb.connect()
    con.register("rows", table)
    for kind, options in (
        ("duckdb.parquet", "(FORMAT parquet, ROW_GROUP_SIZE 2048)"),
        ("duckdb.csv", "(FORMAT csv, HEADER true)"),
        ("duckdb.jsonl", "(FORMAT json)"),
    ):
        path = folder / kind / f"part-00000.{kind.split('.')[1]}"
        path.parent.mkdir()
        con.execute(f"COPY (SELECT * FROM rows ORDER BY id) TO '{path}' {options}")
        out[kind] = path.parent
    path = folder / "python.csv" / "part-00000.csv"
    path.parent.mkdir()
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)  # quotes only where needed; \r\n ends every record
        writer.writerow(table.schema.names)
        for row in table.to_pylist():
            writer.writerow(["" if v is None else v for v in row.values()])
    out["python.csv"] = path.parent
    path = folder / "pyarrow.parquet" / "part-00000.parquet"
    path.parent.mkdir()
    pq.write_table(
        table, path, data_page_version="2.0", use_dictionary=False, row_group_size=777, compression="gzip"
    )
    out["pyarrow.parquet"] = path.parent
    path = folder / "pyarrow.arrow" / "part-00000.arrow"
    path.parent.mkdir()
    with ipc.new_file(str(path), table.schema, options=ipc.IpcWriteOptions(compression="lz4")) as writer:
        for start, size in ((0, 1), (1, 900), (901, 50), (951, table.num_rows - 951)):
            writer.write_batch(
                table.slice(start, size).to_batches()[0] if size else table.slice(0, 0).to_batches()[0]
            )
    out["pyarrow.arrow"] = path.parent
    return out


def test_files_other_tools_wrote_read_back_by_position(tmp_path: Path) -> None:
    import dsm
    from dsm.contract import Schema

    table = _table_with_awkward_text(5000)
    registry = str(tmp_path / "registry")
    schema = Schema.from_arrow(table.schema)
    for name, folder in _files_of_other_tools(tmp_path / "files", table).items():
        contract = dsm.register(str(folder), name=name.replace(".", "-"), schema=schema, registry=registry)
        source = open_rows(contract.ref, registry=registry, cache_dir=str(tmp_path / "cache"))
        expected = table
        if name == "python.csv":
            # Python's csv module writes "" unquoted: an empty unquoted field is null (docs/formats.md)
            texts = [None if t == "" else t for t in table.column("text").to_pylist()]
            expected = table.set_column(1, "text", pa.array(texts, pa.string()))
        for offset, count in ((0, 3), (2040, 20), (4990, 10), (777, 1)):
            got, _ = source._range(offset, count, list(table.schema.names))
            assert got.equals(expected.slice(offset, count)), (name, offset, got.to_pylist()[:2])
        place = source.locate(4999)
        assert place.row == 4999, name
        if name.endswith((".csv", ".jsonl")):
            assert place.line is not None and place.byte_offset is not None
