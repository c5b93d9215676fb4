"""A reshard decodes each source row group about once (issue 17): output files cut from the same row group are
written in a chain (:func:`dsm.rewrite.chains.chain_units`) that reads it once, instead of each file decoding
the group from its first row and dropping the rows before its own.

Generated: Parquet files written by pyarrow (a drawn row-group layout per file), DuckDB and Polars (a drawn
row-group size), resharded into a drawn number of files, in order or shuffled (a shuffle's pass 1 cuts large
files into row ranges: the same chains apply). The rows the Parquet reader decodes are counted
(a spy on the reader, which still does the reading) and must stay within a quarter over the rows copied;
the published version must keep every promise (``verify --deep``, the same fingerprint on re-registering,
the source's rows in order).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsm
from dsm.errors import CheckFailed
from dsm.formats.parquet import ParquetFormat
from dsm.rewrite import plan
from dsm.rewrite.chains import chain_units
from dsm.rewrite.plan import OutputUnit, SourceRange
from tests.trust_support import check_published


def _rows(first: int, count: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "text": [f"row {i} " + "x" * (i % 37) for i in ids]})


@st.composite
def _sources(draw: st.DrawFn) -> tuple[str, list[list[int]]]:
    """A writer and, for each file, the rows of each of its row groups."""
    writer = draw(st.sampled_from(["pyarrow", "duckdb", "polars"]))
    if writer == "pyarrow":
        groups = st.lists(st.integers(1, 300), min_size=1, max_size=4)
        return writer, draw(st.lists(groups, min_size=1, max_size=4))
    size = draw(st.integers(1, 400))
    files = draw(st.lists(st.integers(1, 900), min_size=1, max_size=4))
    return writer, [[size] * (rows // size) + ([rows % size] if rows % size else []) for rows in files]


def _write(folder: Path, writer: str, files: list[list[int]]) -> pa.Table:
    folder.mkdir(parents=True)
    first, tables = 0, []
    for index, groups in enumerate(files):
        table, path = _rows(first, sum(groups)), folder / f"part-{index}.parquet"
        if writer == "pyarrow":
            with pq.ParquetWriter(path, table.schema, compression="zstd", data_page_size=512) as out:
                offset = 0
                for rows in groups:
                    out.write_table(table.slice(offset, rows), row_group_size=rows)
                    offset += rows
        elif writer == "duckdb":
            relation = duckdb.from_arrow(table)
            relation.create_view("source_rows")
            duckdb.sql(f"copy source_rows to '{path}' (format parquet, row_group_size {groups[0]})")
        else:
            frame = pl.from_arrow(table)
            assert isinstance(frame, pl.DataFrame)
            frame.write_parquet(path, row_group_size=groups[0])
        first += table.num_rows
        tables.append(table)
    return pa.concat_tables(tables)


@given(source=_sources(), outputs=st.integers(1, 12), shuffle=st.booleans(), workers=st.sampled_from([1, 2]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_reshard_decodes_each_row_group_about_once(
    monkeypatch: pytest.MonkeyPatch,
    source: tuple[str, list[list[int]]],
    outputs: int,
    shuffle: bool,
    workers: int,
) -> None:
    writer, files = source
    with tempfile.TemporaryDirectory() as tmp:
        root, registry = Path(tmp), str(Path(tmp) / "registry")
        table = _write(root / "source", writer, files)
        outputs = min(outputs, table.num_rows)
        dsm.register(str(root / "source"), name="src", registry=registry)
        decoded = [0]
        reader = ParquetFormat._iter

        def counted(self: ParquetFormat, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
            for batch in reader(self, *args, **kwargs):
                decoded[0] += batch.num_rows
                yield batch

        with monkeypatch.context() as patch:
            patch.setattr(ParquetFormat, "_iter", counted)
            # pass-1 pieces of a few KB: a shuffle cuts each of these small files into row ranges, as it
            # cuts a file of more than 512 MB
            patch.setattr(plan, "SCATTER_UNIT_BYTES", 2048)
            result = dsm.reshard(
                "src@1",
                str(root / "out"),
                num_shards=outputs,
                shuffle=shuffle,
                seed=3 if shuffle else None,
                workers=workers,
                name="out",
                registry=registry,
            )
        assert decoded[0] >= table.num_rows
        if workers == 1:  # with two, a chain longer than its share is cut, and rows at the cut decode twice
            assert decoded[0] <= table.num_rows * 5 // 4, (decoded[0], table.num_rows, files, outputs)
        check_published(result.contract, table, registry, ordered=not shuffle)


def _unit(index: int, *ranges: tuple[str, int, int]) -> OutputUnit:
    parts = tuple(SourceRange(shard=s, start=a, stop=b, whole=False) for s, a, b in ranges)
    return OutputUnit(
        index=index, path=f"part-{index}", start=0, rows=sum(b - a for _, a, b in ranges), ranges=parts
    )


def test_units_chain_only_through_a_fragment_they_share() -> None:
    units = [
        _unit(0, ("a", 0, 100)),
        _unit(1, ("a", 100, 200)),  # inside a's one row group: chained to unit 0
        _unit(2, ("a", 200, 300), ("b", 0, 40)),
        _unit(3, ("b", 40, 125)),  # b's row groups are of 40 rows: unit 3 starts on one, drops nothing
        # 5 rows into a group: 5 dropped here and 10 (a batch) decoded on by unit 3, under a quarter of 115
        _unit(4, ("b", 125, 240)),
        _unit(6, ("b", 240, 300)),  # not the next unit (5 was done by an earlier run)
    ]
    fragments = {"a": [300], "b": [40] * 7 + [20]}
    chains = chain_units(units, fragments, batch_rows=10)
    assert [[u.index for u in c.units] for c in chains] == [[0, 1, 2], [3], [4], [6]]
    # a's rows joined into one read of the whole shard, which can check its checksum
    assert chains[0].ranges == (
        SourceRange(shard="a", start=0, stop=300, whole=True),
        SourceRange(shard="b", start=0, stop=40, whole=False),
    )
    assert chains[0].path == "part-0"
    # two workers: the chain of units 0-2 (340 rows) holds more than its share (600 / 2), and is cut where
    # its rows divide most evenly
    assert [[u.index for u in c.units] for c in chain_units(units, fragments, 10, parallel=2)] == [
        [0, 1],
        [2],
        [3],
        [4],
        [6],
    ]
    # a chain of one unit is never cut, whatever its share
    assert len(chain_units(units[:1], fragments, 10, parallel=8)) == 1
    # a shard whose layout is not known is never chained through
    assert len(chain_units(units[:2], {}, batch_rows=10)) == 2


@pytest.mark.parametrize("damage", ["decodes", "does-not-decode"])
def test_a_changed_shard_read_by_a_chain_fails_its_checksum_and_leaves_nothing(
    tmp_path: Path, damage: str
) -> None:
    """A shard that a chain reads from its first row to its last is checked by that read (no read of its
    own before): a changed byte stops the rewrite, naming the shard, with nothing left at the destination
    and nothing registered, whether or not the changed bytes still decode."""
    registry = str(tmp_path / "registry")
    table = _write(tmp_path / "source", "pyarrow", [[600], [600]])
    dsm.register(str(tmp_path / "source"), name="src", registry=registry)
    victim = tmp_path / "source" / "part-1.parquet"
    data = bytearray(victim.read_bytes())
    metadata = pq.read_metadata(victim)
    column = metadata.row_group(0).column(0)
    # a byte of the id column's pages (still decodes, to other values), or of the file's magic number
    at = column.data_page_offset + column.total_compressed_size - 2 if damage == "decodes" else -1
    data[at] ^= 0x01
    victim.write_bytes(bytes(data))
    with pytest.raises(CheckFailed, match=r"shard part-1\.parquet: corrupt"):
        dsm.reshard("src@1", str(tmp_path / "out"), num_shards=4, workers=1, name="out", registry=registry)
    left = [p for p in (tmp_path / "out").rglob("*") if p.is_file()] if (tmp_path / "out").exists() else []
    assert left == []
    assert dsm.Registry(registry).versions("src") == [1]
    assert table.num_rows == 1200
