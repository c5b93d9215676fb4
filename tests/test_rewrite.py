"""The rewrite engine through the library: convert_format and reshard (layouts, shuffle, proof, refusals)."""

from __future__ import annotations

import posixpath
import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pj
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.commands.rewrite import RewriteResult, convert_format, reshard
from dsm.demo import make_sample_table
from dsm.errors import CheckFailed, InputError, SchemaError
from dsm.formats import format_names, get_format
from dsm.registry import Registry
from dsm.rewrite import Permutation, execute, layout, parse_size
from dsm.rewrite.journal import JOURNAL_DIR, JOURNAL_FILE
from dsm.storage import location
from tests.conftest import StorageRoot, write_parquet_shards
from tests.trust_support import check_published

runner = CliRunner()


def _register(
    storage: StorageRoot, table: pa.Table, registry: str, shards: int = 4, name: str = "web"
) -> dsm.Contract:
    folder = storage.join("source")
    write_parquet_shards(StorageRoot(kind=storage.kind, url=folder, options=storage.options), table, shards)
    return dsm.register(folder, name=name, registry=registry, storage_options=storage.options)


def _read_back(storage: StorageRoot, result: RewriteResult) -> pa.Table:
    """Every output file read with pyarrow's own readers (not dsm's), concatenated in shard order."""
    loc = location(result.location, storage.options)
    tables = []
    for shard in result.contract.shards:
        with loc.open(shard.path) as handle:
            fmt = result.contract.format
            if fmt == "parquet":
                table = pq.read_table(handle)
            elif fmt == "arrow":
                table = pa.ipc.open_file(pa.py_buffer(handle.read())).read_all()
            elif fmt == "jsonl":
                table = pj.read_json(handle)
            elif fmt == "csv":
                table = pcsv.read_csv(handle)
            else:
                raise AssertionError(fmt)
        tables.append(table.select(["id"]))
    return pa.concat_tables(tables)


def _ids(storage: StorageRoot, result: RewriteResult) -> list[int]:
    return [int(v) for v in _read_back(storage, result).column("id").to_pylist()]


def _checksums(result: RewriteResult) -> list[tuple[str, str | None]]:
    return [(s.path, s.checksum) for s in result.contract.shards]


def _duckdb_count(folder: str, fmt: str) -> tuple[int, int]:
    readers = {
        "parquet": f"read_parquet('{folder}/*.parquet')",
        "jsonl": f"read_json_auto('{folder}/*.jsonl')",
        "csv": f"read_csv_auto('{folder}/*.csv')",
    }
    if fmt == "arrow":  # DuckDB scans Arrow data through pyarrow (it has no IPC file reader built in)
        arrow_rows = pa.concat_tables(  # noqa: F841 (DuckDB finds it by name)
            pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in sorted(Path(folder).glob("*.arrow"))
        )
        relation = duckdb.sql("select count(*), sum(id) from arrow_rows")
    else:
        relation = duckdb.sql(f"select count(*), sum(id) from {readers[fmt]}")
    assert relation is not None
    row = relation.fetchall()[0]
    assert row is not None
    return int(row[0]), int(row[1])


# --------------------------------------------------------------------------------------------- conversions


def test_convert_chain_keeps_both_fingerprints(
    storage: StorageRoot, sample_table: pa.Table, registry_url: str
) -> None:
    source = _register(storage, sample_table, registry_url)
    contracts = [source]
    for step, fmt in enumerate(["jsonl", "csv", "arrow", "parquet"]):
        result = convert_format(
            "web",
            storage.join(f"v{step + 2}-{fmt}"),
            to=fmt,
            registry=registry_url,
            storage_options=storage.options,
        )
        assert result.dataset == f"web@{step + 2}"
        assert result.fingerprint_match is True
        assert result.contract.lineage is not None
        assert result.contract.lineage.parent == f"web@{step + 1}"
        assert result.contract.lineage.operation == "convert-format"
        assert result.contract.lineage.parameters["to"] == fmt
        assert [s.path for s in result.contract.shards] == [f"part-{k:05d}-of-00004.{fmt}" for k in range(4)]
        assert [s.rows for s in result.contract.shards] == [s.rows for s in source.shards]
        assert _ids(storage, result) == list(range(3000))
        if storage.kind == "local":
            assert _duckdb_count(result.location, fmt) == (3000, sum(range(3000)))
        contracts.append(result.contract)
    prints = {(c.fingerprint.unordered, c.fingerprint.ordered) for c in contracts if c.fingerprint}
    assert len(prints) == 1 and len(contracts) == 5
    assert [c.format for c in contracts] == ["parquet", "jsonl", "csv", "arrow", "parquet"]
    for contract in contracts[1:]:
        report = dsm.verify(contract.ref, deep=True, registry=registry_url, storage_options=storage.options)
        assert report.ok, report.to_dict()


def test_convert_records_shards_like_register(
    tmp_path: Path, sample_table: pa.Table, registry_url: str
) -> None:
    storage = StorageRoot(kind="local", url=str(tmp_path / "store"))
    _register(storage, sample_table, registry_url)
    result = convert_format(
        "web", str(tmp_path / "out"), to="parquet", compression="snappy", registry=registry_url
    )
    again = dsm.register(str(tmp_path / "out"), name="copy", registry=registry_url)
    assert [s.to_dict() for s in again.shards] == [s.to_dict() for s in result.contract.shards]
    assert result.contract.format_options["compression"] == "snappy"
    # the journal is gone once published: the folder holds the data files alone
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        f"part-{k:05d}-of-00004.parquet" for k in range(4)
    ]


def test_nested_type_to_csv_is_refused_before_writing(tmp_path: Path, registry_url: str) -> None:
    table = pa.table({"id": [1, 2], "tags": pa.array([["a"], ["b", "c"]], pa.list_(pa.string()))})
    folder = tmp_path / "nested"
    folder.mkdir()
    pq.write_table(table, folder / "part-0.parquet")
    dsm.register(str(folder), name="nested", registry=registry_url)
    with pytest.raises(SchemaError, match=r'"tags".*nothing was written'):
        convert_format("nested", str(tmp_path / "out"), to="csv", registry=registry_url)
    assert not (tmp_path / "out").exists()
    assert Registry(registry_url).versions("nested") == [1]


# --------------------------------------------------------------------------------------------- reshard


def test_reshard_by_count_rows_and_size(
    storage: StorageRoot, sample_table: pa.Table, registry_url: str
) -> None:
    source = _register(storage, sample_table, registry_url)
    opts: dict[str, Any] = {"registry": registry_url, "storage_options": storage.options}
    by_count = reshard("web@1", storage.join("n3"), num_shards=3, **opts)
    assert [s.rows for s in by_count.contract.shards] == [1000, 1000, 1000]
    assert [s.path for s in by_count.contract.shards] == [f"part-{k:05d}-of-00003.parquet" for k in range(3)]
    assert _ids(storage, by_count) == list(range(3000))

    by_rows = reshard("web@1", storage.join("r700"), rows_per_shard=700, to="arrow", **opts)
    assert [s.rows for s in by_rows.contract.shards] == [700, 700, 700, 700, 200]
    assert by_rows.contract.format == "arrow"
    assert _ids(storage, by_rows) == list(range(3000))

    by_size = reshard("web@1", storage.join("s100k"), shard_size="100KB", **opts)
    sizes = [s.bytes for s in by_size.contract.shards]
    planned = by_size.parameters["planned_rows_per_shard"]
    assert len(sizes) == -(-3000 // planned) >= 3
    assert all(70_000 <= size <= 130_000 for size in sizes[:-1]), sizes
    assert _ids(storage, by_size) == list(range(3000))
    for result in (by_count, by_rows, by_size):
        assert result.contract.fingerprint == source.fingerprint
        assert result.contract.lineage is not None and result.contract.lineage.parent == "web@1"


def test_shuffle_is_deterministic_per_seed(
    storage: StorageRoot, sample_table: pa.Table, registry_url: str
) -> None:
    source = _register(storage, sample_table, registry_url)
    opts: dict[str, Any] = {"registry": registry_url, "storage_options": storage.options, "num_shards": 3}
    first = reshard("web@1", storage.join("a"), shuffle=True, seed=7, **opts)
    second = reshard("web@1", storage.join("b"), shuffle=True, seed=7, **opts)
    other = reshard("web@1", storage.join("c"), shuffle=True, seed=8, **opts)
    assert _checksums(first) == _checksums(second)
    assert [c for _, c in _checksums(first)] != [c for _, c in _checksums(other)]
    assert source.fingerprint is not None
    for result in (first, other):
        fp = result.contract.fingerprint
        assert fp is not None and fp.unordered == source.fingerprint.unordered
        assert fp.ordered != source.fingerprint.ordered
        ids = _ids(storage, result)
        assert sorted(ids) == list(range(3000)) and ids != list(range(3000))
    assert first.contract.lineage is not None
    assert first.contract.lineage.parameters["seed"] == 7
    assert first.contract.lineage.parameters["shuffle_algorithm"] == "dsm-feistel-v1"
    # rows spread over every output file: each file holds ids from the whole range
    per_file = (
        [pq.read_table(Path(first.location) / s.path)["id"].to_pylist() for s in first.contract.shards]
        if (storage.kind == "local")
        else []
    )
    for ids in per_file:
        assert min(ids) < 300 and max(ids) > 2700


@pytest.mark.parametrize("shuffle", [False, True])
def test_worker_count_does_not_change_bytes(
    tmp_path: Path, sample_table: pa.Table, registry_url: str, shuffle: bool, monkeypatch: Any
) -> None:
    """Nor does reading further ahead where a file is written while another worker is idle (here told so
    for every file): the same files, byte for byte."""
    from dsm.engine.ahead import ReadAhead

    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    extra: dict[str, Any] = {"shuffle": True, "seed": 3} if shuffle else {}
    one = reshard("web@1", str(tmp_path / "w1"), num_shards=5, workers=1, registry=registry_url, **extra)
    deepened: list[int] = []
    deepen = ReadAhead.deepen
    monkeypatch.setattr(
        ReadAhead, "deepen", lambda self, depth: (deepened.append(depth), deepen(self, depth))
    )
    monkeypatch.setattr(execute, "workers_idle", lambda: True)
    two = reshard("web@1", str(tmp_path / "w2"), num_shards=5, workers=2, registry=registry_url, **extra)
    assert deepened == [execute.TAIL_AHEAD] * 5  # once for each file
    check_published(two.contract, sample_table, registry_url, ordered=not shuffle)
    assert _checksums(one) == _checksums(two)
    for a, b in zip(one.contract.shards, two.contract.shards, strict=True):
        assert (tmp_path / "w1" / a.path).read_bytes() == (tmp_path / "w2" / b.path).read_bytes()


def test_shuffle_with_many_buckets(
    tmp_path: Path, sample_table: pa.Table, registry_url: str, monkeypatch: Any
) -> None:
    """Buckets far smaller than a file (as for shards larger than memory) give the same files."""
    import dsm.rewrite.plan as plan_module

    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    whole = reshard("web@1", str(tmp_path / "a"), num_shards=2, shuffle=True, seed=1, registry=registry_url)
    monkeypatch.setattr(plan_module, "BUCKET_BYTES", 20_000)
    monkeypatch.setattr(plan_module, "SCATTER_UNIT_BYTES", 30_000)
    pieces = reshard("web@1", str(tmp_path / "b"), num_shards=2, shuffle=True, seed=1, registry=registry_url)
    assert _checksums(whole) == _checksums(pieces)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_shuffle_position_held_twice_stops_the_gather(
    tmp_path_factory: pytest.TempPathFactory, sample_table: pa.Table, data: st.DataObject
) -> None:
    """Pass 1 gives one row the position of another (a fault in the spill files or in pass 1 itself): the
    gather finds a bucket that does not hold each of its positions once, whether or not the rows counted,
    the lowest and the highest position still look right; its file is not written, and nothing is
    published."""
    tmp_path = tmp_path_factory.mktemp("twice")
    registry = str(tmp_path / "registry")
    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry)
    num_shards = data.draw(st.integers(1, 3), label="num_shards")
    first_batch = 750  # the first source shard's rows, read as one batch
    copy, onto = data.draw(
        st.lists(st.integers(0, first_batch - 1), min_size=2, max_size=2, unique=True), label="rows"
    )

    class Twice(Permutation):
        def __call__(self, indices: Any) -> np.ndarray:
            positions = super().__call__(indices)
            if len(positions) == first_batch and int(indices[0]) == 0:
                positions = positions.copy()
                positions[onto] = positions[copy]
            return positions

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(execute, "Permutation", Twice)
        with pytest.raises(CheckFailed, match=r"shuffle bucket \d+ of part-.*do not hold each of positions"):
            reshard(
                "web@1", str(tmp_path / "out"), num_shards=num_shards, shuffle=True, seed=5, registry=registry
            )
    assert Registry(registry).versions("web") == [1]
    assert len(list((tmp_path / "out").glob("part-*"))) < num_shards  # the failed bucket's file is not there


# ----------------------------------------------------------------------------------------- proof and refusals


def test_corrupt_source_shard_stops_before_anything_is_written(
    storage: StorageRoot, sample_table: pa.Table, registry_url: str
) -> None:
    source = _register(storage, sample_table, registry_url)
    fs = storage.fs()
    victim = storage.join("source", source.shards[2].path)
    data = bytearray(fs.cat_file(victim))
    data[len(data) // 2] ^= 0xFF
    fs.pipe_file(victim, bytes(data))
    dest = storage.join("out")
    with pytest.raises(CheckFailed, match=rf"shard {source.shards[2].path}: corrupt"):
        reshard("web", dest, num_shards=2, registry=registry_url, storage_options=storage.options)
    assert location(dest, storage.options).list_files() == []
    assert Registry(registry_url).versions("web") == [1]


def test_changed_row_fails_the_fingerprint_and_registers_nothing(
    tmp_path: Path, sample_table: pa.Table, registry_url: str, monkeypatch: Any
) -> None:
    import dsm.rewrite.reading as reading

    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    real = reading.iter_range

    def tampered(*args: Any, **kwargs: Any) -> Any:
        for batch in real(*args, **kwargs):
            scores = batch.column("score").to_pylist()
            scores[0] = (scores[0] or 0) + 1.0
            index = batch.schema.get_field_index("score")
            yield batch.set_column(index, batch.schema.field(index), pa.array(scores, pa.float64()))

    monkeypatch.setattr(reading, "iter_range", tampered)
    # every shard has a changed row; which unit fails first depends on the workers' timing
    with pytest.raises(CheckFailed, match=r"differs from source shard part-0000\d\.parquet"):
        convert_format("web", str(tmp_path / "conv"), to="arrow", registry=registry_url)
    with pytest.raises(CheckFailed, match=r"do not match web@1.*nothing was registered"):
        reshard("web", str(tmp_path / "resh"), num_shards=3, registry=registry_url)
    assert Registry(registry_url).versions("web") == [1]


def _shard_entries(result: RewriteResult) -> list[tuple[Any, ...]]:
    return [
        (s.path, s.bytes, s.rows, s.checksum, s.fingerprint, s.ordered_fingerprint)
        for s in result.contract.shards
    ]


def test_default_proof_equals_read_back_for_every_format_pair(tmp_path: Path, registry_url: str) -> None:
    """The written-batches proof gives the contract entries a read-back gives, for every pair of formats."""
    table = make_sample_table(240).append_column(
        "notes", pa.array(['say "hi"\n\tback\\slash\x01\x1f é', None, "plain"] * 80, pa.string())
    )
    storage = StorageRoot(kind="local", url=str(tmp_path / "store"))
    _register(storage, table, registry_url, shards=2)
    sources = {"parquet": "web@1"}
    for fmt in format_names():
        if fmt != "parquet" and not get_format(fmt).unsupported(table.schema):
            made = convert_format("web@1", str(tmp_path / f"src-{fmt}"), to=fmt, registry=registry_url)
            sources[fmt] = made.dataset
    assert {"parquet", "jsonl", "csv", "arrow"} <= set(sources)
    for src, ref in sources.items():
        for dst in sources:
            runs = {
                read_back: convert_format(
                    ref,
                    str(tmp_path / f"{src}-{dst}-{read_back}"),
                    to=dst,
                    name=f"{src}-{dst}-{int(read_back)}",
                    read_back=read_back,
                    registry=registry_url,
                )
                for read_back in (False, True)
            }
            assert _shard_entries(runs[False]) == _shard_entries(runs[True]), (src, dst)
            assert runs[False].contract.fingerprint == runs[True].contract.fingerprint
            for read_back, proof in ((False, "written-batches"), (True, "read-back")):
                lineage = runs[read_back].contract.lineage
                assert lineage is not None and lineage.parameters["proof"] == proof
    # webdataset holds only string/binary fields keyed by __key__: its own small dataset, both directions
    samples = pa.table(
        {
            "__key__": [f"s{i:04d}" for i in range(60)],
            "txt": ['line "one"\nline\ttwo é'] * 60,
            "png": pa.array([bytes([i % 256]) * 40 for i in range(60)], pa.binary()),
        }
    )
    _register(StorageRoot(kind="local", url=str(tmp_path / "wds")), samples, registry_url, name="wds")
    for src_ref, dst, step in (("wds@1", "webdataset", "to"), ("wds@2", "parquet", "from")):
        runs = {
            read_back: convert_format(
                src_ref,
                str(tmp_path / f"wds-{step}-{read_back}"),
                to=dst,
                name="wds" if read_back else f"wds-{step}",
                read_back=read_back,
                registry=registry_url,
            )
            for read_back in (True, False)
        }
        assert _shard_entries(runs[False]) == _shard_entries(runs[True]), step
    shuffled = {
        read_back: reshard(
            "web@1",
            str(tmp_path / f"shuffled-{read_back}"),
            num_shards=3,
            shuffle=True,
            seed=5,
            to="jsonl",
            name=f"shuffled-{int(read_back)}",
            read_back=read_back,
            registry=registry_url,
        )
        for read_back in (False, True)
    }
    assert _shard_entries(shuffled[False]) == _shard_entries(shuffled[True])


def test_a_writer_that_changes_a_value_is_caught_only_by_read_back(
    tmp_path: Path, sample_table: pa.Table, registry_url: str, monkeypatch: Any
) -> None:
    """The default proof digests the rows handed to the writer: a writer bug that changes a value on its way
    to the file passes it (and is caught by ``verify --deep``); ``read_back`` catches it before publishing."""
    from dsm.formats.arrow import ArrowFormat

    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    real_open = ArrowFormat.open_writer

    def corrupting_open(self: ArrowFormat, file: Any, schema: pa.Schema) -> Any:
        writer = real_open(self, file, schema)
        real_write = writer.write_batch

        def write_batch(batch: pa.RecordBatch) -> None:
            index = batch.schema.get_field_index("score")
            scores = batch.column("score").to_pylist()
            scores[0] = (scores[0] or 0) + 1.0
            real_write(batch.set_column(index, batch.schema.field(index), pa.array(scores, pa.float64())))

        writer.write_batch = write_batch  # type: ignore[method-assign]
        return writer

    monkeypatch.setattr(ArrowFormat, "open_writer", corrupting_open)
    with pytest.raises(CheckFailed, match=r"differs from source shard part-0000\d\.parquet"):
        convert_format("web", str(tmp_path / "checked"), to="arrow", read_back=True, registry=registry_url)
    assert Registry(registry_url).versions("web") == [1]
    unchecked = convert_format("web", str(tmp_path / "unchecked"), to="arrow", registry=registry_url)
    monkeypatch.setattr(ArrowFormat, "open_writer", real_open)
    report = dsm.verify(unchecked.dataset, deep=True, registry=registry_url)
    assert not report.ok


def test_destination_that_holds_other_files_is_refused(
    tmp_path: Path, sample_table: pa.Table, registry_url: str
) -> None:
    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"notes\.txt.*--overwrite"):
        reshard("web", str(dest), num_shards=2, registry=registry_url)
    result = reshard("web", str(dest), num_shards=2, overwrite=True, registry=registry_url)
    assert (dest / "notes.txt").read_text() == "mine"
    assert any("notes.txt" in note for note in result.notes)
    # another plan into a published destination: refused even with overwrite (it is a registered location)
    with pytest.raises(InputError, match=r"overlaps the location of web@2"):
        reshard("web@1", str(dest), num_shards=3, overwrite=True, registry=registry_url)
    with pytest.raises(InputError, match=r"overlaps the location"):
        reshard("web@1", str(tmp_path / "store" / "source" / "sub"), num_shards=3, registry=registry_url)


def test_rerun_after_success_publishes_nothing_new(
    tmp_path: Path, sample_table: pa.Table, registry_url: str
) -> None:
    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    first = reshard("web@1", str(tmp_path / "out"), num_shards=2, registry=registry_url)
    again = reshard("web@1", str(tmp_path / "out"), num_shards=2, registry=registry_url)
    assert again.already_published and again.dataset == first.dataset == "web@2"
    assert Registry(registry_url).versions("web") == [1, 2]
    assert not (tmp_path / "out" / JOURNAL_DIR).exists()


@pytest.mark.parametrize("change", ["deleted", "truncated", "folder removed"])
def test_rerun_after_success_says_when_the_published_files_are_gone(
    tmp_path: Path, sample_table: pa.Table, registry_url: str, change: str
) -> None:
    """The same command again must not report "already published" of files that are no longer there."""
    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    first = reshard("web@1", str(tmp_path / "out"), num_shards=2, registry=registry_url)
    victim = tmp_path / "out" / first.contract.shards[1].path
    if change == "deleted":
        victim.unlink()
    elif change == "truncated":
        victim.write_bytes(victim.read_bytes()[:-1])
    else:
        shutil.rmtree(tmp_path / "out")
    shown = "is missing" if change != "truncated" else "bytes, the contract records"
    said = f"web@2 was published by this same rewrite, but its shard .*{shown}"
    with pytest.raises(CheckFailed, match=said):
        reshard("web@1", str(tmp_path / "out"), num_shards=2, registry=registry_url)
    assert Registry(registry_url).versions("web") == [1, 2]
    result = runner.invoke(
        app, ["reshard", "web@1", str(tmp_path / "out"), "--num-shards", "2", "--registry", registry_url]
    )
    assert result.exit_code == 1 and "dsm verify web@2" in result.stderr and "Traceback" not in result.output


def test_resume_keeps_checked_files_and_redoes_the_rest(
    tmp_path: Path, sample_table: pa.Table, registry_url: str
) -> None:
    """A journaled file is kept only if its size and checksum still match; partial temporaries go."""
    import json

    _register(StorageRoot(kind="local", url=str(tmp_path / "store")), sample_table, registry_url)
    reference = reshard("web@1", str(tmp_path / "ref"), num_shards=4, registry=registry_url, name="ref")
    out = tmp_path / "out"
    # what a killed run leaves: header, two records, one of them for a file changed since, and a temporary
    out.mkdir()
    (out / JOURNAL_DIR).mkdir()
    key = reference.contract.metadata["rewrite_plan"]
    outputs = [s.path for s in reference.contract.shards]
    header = {"operation": "reshard", "source": "web@1", "outputs": outputs, "published": None, "plan": key}
    (out / JOURNAL_FILE).write_text(json.dumps(header))
    for shard in reference.contract.shards[:2]:
        (out / shard.path).write_bytes((tmp_path / "ref" / shard.path).read_bytes())
        record = {"plan": key, "index": int(shard.path[5:10]), **shard.to_dict()}
        (out / JOURNAL_DIR / f"_unit-{int(shard.path[5:10]):05d}.json").write_text(json.dumps(record))
    changed = out / reference.contract.shards[1].path
    changed.write_bytes(changed.read_bytes()[:-1] + b"\x00")
    (out / ".dsm-tmp-0123456789ab-part-00002-of-00004.parquet").write_bytes(b"partial")
    result = reshard("web@1", str(out), num_shards=4, registry=registry_url, name="ref")
    assert result.units_resumed == 1 and result.units_written == 3
    assert _checksums(result) == _checksums(reference)
    assert not list(out.glob(".dsm-tmp-*"))


# --------------------------------------------------------------------------------------------- planning


def test_layout_and_sizes() -> None:
    assert layout(10, num_shards=4) == [(0, 2), (2, 3), (5, 2), (7, 3)]
    assert layout(10, rows_per_shard=4) == [(0, 4), (4, 4), (8, 2)]
    assert layout(0, rows_per_shard=4) == [(0, 0)]
    with pytest.raises(InputError, match="1 of the files would be empty"):
        layout(2, num_shards=3)  # more files than rows: never a plan
    assert parse_size("256MB") == 256_000_000
    assert parse_size("1GiB") == 1 << 30
    assert parse_size("1.5k") == 1500
    assert parse_size(42) == 42
    with pytest.raises(InputError, match="not a size"):
        parse_size("lots")


def test_reshard_validates_its_options(tmp_path: Path, registry_url: str) -> None:
    with pytest.raises(InputError, match="exactly one of"):
        reshard("web", str(tmp_path), registry=registry_url)
    with pytest.raises(InputError, match="exactly one of"):
        reshard("web", str(tmp_path), num_shards=2, rows_per_shard=3, registry=registry_url)
    with pytest.raises(InputError, match="--seed only applies with --shuffle"):
        reshard("web", str(tmp_path), num_shards=2, seed=3, registry=registry_url)
    with pytest.raises(InputError, match="not a size"):
        reshard("web", str(tmp_path), shard_size="big", registry=registry_url)


@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000, 4097])
def test_permutation_is_a_seeded_bijection(n: int) -> None:
    perm = Permutation(n, seed=5)
    positions = perm(np.arange(n, dtype=np.uint64))
    assert sorted(positions.tolist()) == list(range(n))
    assert perm(np.arange(n, dtype=np.uint64)).tolist() == positions.tolist()
    if n > 16:
        assert Permutation(n, seed=6)(np.arange(n, dtype=np.uint64)).tolist() != positions.tolist()


def test_permutation_vector_is_pinned() -> None:
    """dsm-feistel-v1 is fixed forever: a change of algorithm is a new name."""
    assert Permutation(10, seed=7)(range(10)).tolist() == [3, 6, 8, 7, 2, 5, 1, 4, 0, 9]


def test_public_names() -> None:
    assert dsm.reshard is reshard and dsm.convert_format is convert_format
    assert posixpath.basename(JOURNAL_FILE).startswith("_")


@pytest.mark.parametrize("codec", [None, "gzip"])
def test_a_jsonl_source_gets_parquet_row_groups_of_the_bytes_aimed_at(
    tmp_path: Path, codec: str | None
) -> None:
    """Row groups are sized from the source contract's bytes per row: a plain JSONL line is about as large
    as its decoded row, a compressed one is taken as a third of it. Taken as compressed, plain JSONL got
    row groups of a third of ``ROW_GROUP_BYTES``, 4,075 rows of 2.7 KB each on the benchmark's text."""
    from dsm.rewrite.plan import ROW_GROUP_BYTES, decoded_row_bytes, row_group_rows

    rng = np.random.default_rng(5)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ", dtype=np.uint8)
    rows = 6_000
    text = [bytes(letters[rng.integers(0, len(letters), 9_000)]).decode() for _ in range(rows)]
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "text": pa.array(text, pa.string())})
    registry = str(tmp_path / "registry")
    folder = tmp_path / "jsonl"
    folder.mkdir()
    fmt = get_format("jsonl", compression=codec)
    suffix = ".jsonl.gz" if codec else ".jsonl"
    with open(folder / f"part-0{suffix}", "wb") as handle:
        writer = fmt.open_writer(handle, table.schema)
        writer.write_batch(table.to_batches()[0])
        writer.close()
    source = dsm.register(str(folder), name="lines", registry=registry)
    decoded = table.nbytes / rows
    estimate = decoded_row_bytes(source)
    if codec is None:
        assert decoded * 0.9 <= estimate <= decoded * 1.2, (estimate, decoded)
    else:  # random letters compress about 1.6x: taken as 3x, the estimate errs towards smaller groups
        assert estimate > decoded * 1.2, (estimate, decoded)
    result = convert_format("lines", str(tmp_path / "out"), format="parquet", registry=registry)
    metadata = pq.ParquetFile(tmp_path / "out" / result.contract.shards[0].path).metadata
    groups = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    assert groups[0] == row_group_rows(source, 1 << 20) == max(1024, ROW_GROUP_BYTES // estimate)
    assert sum(groups) == rows
    if codec is None:
        assert groups[0] * decoded >= ROW_GROUP_BYTES * 0.8
    check_published(result.contract, table, registry, ordered=True)
