"""dsm register and dsm verify through the library (``dsm.register``, ``dsm.verify``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import dsm
from dsm.errors import DatasetNotFound, FormatError, InputError, SchemaError
from dsm.registry import Registry

from .conftest import StorageRoot, write_parquet_shards


def mixed_table(rows: int = 500) -> pa.Table:
    """Types that Parquet, JSONL, CSV and Arrow all hold, with nulls, unicode and awkward strings."""
    texts = ["plain", 'quote " and, comma', "line\nbreak", "日本語 🙂", "", "  spaced  "]
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "text": pa.array([texts[i % len(texts)] + f" {i}" for i in range(rows)]),
            "score": pa.array([None if i % 17 == 0 else math.sqrt(i) / 3 for i in range(rows)], pa.float64()),
            "flag": pa.array([None if i % 11 == 0 else i % 2 == 0 for i in range(rows)]),
            "tag": pa.array([None if i % 5 == 0 else f"t{i % 7}" for i in range(rows)]),
            "at": pa.array(
                [1_700_000_000_000_000 + i * 1_234_567 for i in range(rows)], pa.timestamp("us", "UTC")
            ),
        }
    )


def split(table: pa.Table, shards: int) -> list[pa.Table]:
    per = -(-table.num_rows // shards)
    return [table.slice(i * per, per) for i in range(shards)]


def write_jsonl_with_python(folder: Path, table: pa.Table, shards: int) -> None:
    folder.mkdir(parents=True)
    for i, piece in enumerate(split(table, shards)):
        with open(folder / f"part-{i}.jsonl", "w", encoding="utf-8") as handle:
            for row in piece.to_pylist():
                row["at"] = row["at"].isoformat()
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def test_one_fingerprint_across_four_formats(tmp_path: Path) -> None:
    table = mixed_table()
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "pq", table, 3)
    write_jsonl_with_python(tmp_path / "jsonl", table, 2)
    (tmp_path / "csv").mkdir()
    for i, piece in enumerate(split(table, 4)):
        pacsv.write_csv(piece, tmp_path / "csv" / f"part-{i}.csv")
    (tmp_path / "arrow").mkdir()
    for i, piece in enumerate(split(table, 5)):
        feather.write_feather(piece, tmp_path / "arrow" / f"part-{i}.arrow", compression="uncompressed")

    parquet = dsm.register(str(tmp_path / "pq"), name="t-parquet", registry=registry)
    others = [
        dsm.register(str(tmp_path / "jsonl"), name="t-jsonl", schema="t-parquet", registry=registry),
        dsm.register(str(tmp_path / "csv"), name="t-csv", schema="t-parquet", registry=registry),
        dsm.register(str(tmp_path / "arrow"), name="t-arrow", registry=registry),
    ]
    assert parquet.fingerprint is not None and parquet.fingerprint.rows == 500
    assert [len(c.shards) for c in [parquet, *others]] == [3, 2, 4, 5]
    for contract in others:
        assert contract.fingerprint is not None
        assert contract.fingerprint.unordered == parquet.fingerprint.unordered, contract.name
        assert contract.fingerprint.ordered == parquet.fingerprint.ordered, contract.name
        assert contract.schema.to_arrow() == parquet.schema.to_arrow()


def test_register_records_shards_and_verifies(
    storage: StorageRoot, sample_table: pa.Table, registry_url: str
) -> None:
    write_parquet_shards(storage, sample_table, 3)
    contract = dsm.register(
        storage.url, name="sample", registry=registry_url, storage_options=storage.options, owners=["a@b.c"]
    )
    assert contract.version == 1
    assert contract.owners == ("a@b.c",)
    assert [s.path for s in contract.shards] == [f"part-{i:05d}.parquet" for i in range(3)]
    assert sum(s.rows or 0 for s in contract.shards) == sample_table.num_rows
    assert all(s.checksum and s.checksum.startswith("xxh3-128:") for s in contract.shards)
    assert contract.lineage is not None and contract.lineage.operation == "register"
    for deep in (False, True):
        report = dsm.verify("sample", deep=deep, registry=registry_url, storage_options=storage.options)
        assert report.ok, report.to_dict()
        assert report.summary == {"ok": 3}
        # Only --deep recomputes the fingerprint from the rows; both check that the contract adds up.
        assert report.fingerprint_match is (True if deep else None) and report.contract_consistent is True


def _registered(tmp_path: Path, sample_table: pa.Table) -> tuple[str, Path]:
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table, 3)
    registry = str(tmp_path / "registry")
    dsm.register(str(data), name="sample", registry=registry)
    return registry, data


def _flip_byte(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x01
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    ("damage", "shard", "status"),
    [
        (lambda d: _flip_byte(d / "part-00001.parquet", 200), "part-00001.parquet", "corrupt"),
        (
            lambda d: (d / "part-00002.parquet").write_bytes((d / "part-00002.parquet").read_bytes()[:-100]),
            "part-00002.parquet",
            "resized",
        ),
        (lambda d: (d / "part-00000.parquet").unlink(), "part-00000.parquet", "missing"),
        (lambda d: (d / "part-00009.parquet").write_bytes(b"new"), "part-00009.parquet", "extra"),
    ],
)
def test_verify_names_the_damaged_shard(
    tmp_path: Path, sample_table: pa.Table, damage, shard: str, status: str
) -> None:  # type: ignore[no-untyped-def]
    registry, data = _registered(tmp_path, sample_table)
    damage(data)
    report = dsm.verify("sample", registry=registry)
    assert not report.ok
    assert [(s.path, s.status) for s in report.failures] == [(shard, status)]


def test_deep_verify_detects_schema_change_with_same_size(tmp_path: Path, sample_table: pa.Table) -> None:
    registry, _ = _registered(tmp_path, sample_table)
    registered = Registry(registry).resolve("sample")
    # A contract that claims another type for a field: bytes match, rows do not decode as claimed.
    fields = [
        f if f.name != "score" else f.__class__(name="score", type="string") for f in registered.schema.fields
    ]
    tampered = registered.evolve(schema=registered.schema.__class__(fields=tuple(fields)))
    report = dsm.verify(tampered, deep=True, registry=registry)
    assert {s.status for s in report.shards} == {"schema_mismatch"}
    assert "score" in report.shards[0].detail


def test_deep_verify_detects_recorded_fingerprint_tampering(tmp_path: Path, sample_table: pa.Table) -> None:
    registry, _ = _registered(tmp_path, sample_table)
    contract = Registry(registry).resolve("sample")
    shards = list(contract.shards)
    shards[0] = shards[0].__class__(**{**shards[0].to_dict(), "fingerprint": "0" * 32})
    tampered = contract.evolve(shards=tuple(shards))
    # Bytes only: the rows are not read, so what fails is the contract's own consistency, named as such.
    bytes_only = dsm.verify(tampered, registry=registry)
    assert (
        not bytes_only.ok and bytes_only.contract_consistent is False and bytes_only.fingerprint_match is None
    )
    deep = dsm.verify(tampered, deep=True, registry=registry)
    assert [(s.path, s.status) for s in deep.failures] == [("part-00000.parquet", "corrupt")]


def test_unverifiable_shard_does_not_pass(tmp_path: Path, sample_table: pa.Table) -> None:
    registry, _ = _registered(tmp_path, sample_table)
    contract = Registry(registry).resolve("sample")
    shards = [s.__class__(**{**s.to_dict(), "checksum": "sha3-999:00"}) for s in contract.shards]
    report = dsm.verify(contract.evolve(shards=tuple(shards)), registry=registry)
    assert not report.ok
    assert {s.status for s in report.shards} == {"unverified"}


def test_register_refuses_disagreeing_shards(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"a": [1], "b": ["x"]}), data / "p0.parquet")
    pq.write_table(pa.table({"a": [1.5], "b": ["x"]}), data / "p1.parquet")
    with pytest.raises(SchemaError, match=r"shard p1.parquet .*field 'a'"):
        dsm.register(str(data), name="bad", registry=str(tmp_path / "r"))
    assert Registry(str(tmp_path / "r")).names() == []


def test_register_truncated_parquet_names_shard_and_writes_nothing(
    tmp_path: Path, sample_table: pa.Table
) -> None:
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table, 2)
    path = data / "part-00001.parquet"
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(FormatError, match=r"part-00001\.parquet"):
        dsm.register(str(data), name="bad", registry=str(tmp_path / "r"))
    assert Registry(str(tmp_path / "r")).names() == []


def test_register_malformed_jsonl_names_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (data / "b.jsonl").write_text('{"x": 3}\n{"x": 4\n{"x": 5}\n')
    with pytest.raises(FormatError, match=r"b\.jsonl.*line 2"):
        dsm.register(str(data), name="bad", registry=str(tmp_path / "r"))
    assert Registry(str(tmp_path / "r")).names() == []


def test_register_csv_row_missing_a_column_names_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("x,y,z\n1,2,3\n4,5\n")
    with pytest.raises(FormatError, match=r"a\.csv.*line 3"):
        dsm.register(str(data), name="bad", registry=str(tmp_path / "r"))


def test_register_mixed_formats_needs_a_choice(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"x": 1}\n')
    pq.write_table(pa.table({"x": [1]}), data / "b.parquet")
    with pytest.raises(InputError, match="several formats"):
        dsm.register(str(data), name="bad", registry=str(tmp_path / "r"))
    contract = dsm.register(str(data), name="ok", format="parquet", registry=str(tmp_path / "r"))
    assert [s.path for s in contract.shards] == ["b.parquet"]


def test_register_glob_and_extras_respect_it(tmp_path: Path, sample_table: pa.Table) -> None:
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table, 3)
    (data / "notes.txt").write_text("not data")
    registry = str(tmp_path / "r")
    contract = dsm.register(str(data / "part-0000[01].parquet"), name="globbed", registry=registry)
    assert [s.path for s in contract.shards] == ["part-00000.parquet", "part-00001.parquet"]
    report = dsm.verify("globbed", registry=registry)
    assert report.ok, report.to_dict()
    (data / "part-00001.parquet").rename(data / "part-00000x.parquet")
    assert {s.status for s in dsm.verify("globbed", registry=registry).failures} == {"missing"}


def test_verify_unknown_dataset(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFound):
        dsm.verify("nothing", registry=str(tmp_path))


def test_webdataset_shares_the_fingerprint_for_the_types_it_holds(tmp_path: Path) -> None:
    from dsm.formats import get_format

    table = pa.table(
        {
            "__key__": [f"sample-{i:04d}" for i in range(60)],
            "txt": [f"caption {i} 🙂" for i in range(60)],
            "jpg": [bytes([i % 256]) * (i + 1) for i in range(60)],
        }
    )
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "pq", table, 2)
    (tmp_path / "wds").mkdir()
    wds = get_format("webdataset")
    for i, piece in enumerate(split(table, 3)):
        path = tmp_path / "wds" / f"shard-{i}.tar"
        with open(path, "wb") as handle, wds.open_writer(handle, piece.schema) as writer:
            for batch in piece.to_batches():
                writer.write_batch(batch)
    parquet = dsm.register(str(tmp_path / "pq"), name="p", registry=registry)
    tars = dsm.register(str(tmp_path / "wds"), name="w", schema="p", registry=registry)
    assert parquet.fingerprint is not None and tars.fingerprint is not None
    assert tars.fingerprint.unordered == parquet.fingerprint.unordered
    assert tars.fingerprint.ordered == parquet.fingerprint.ordered
    assert dsm.verify("w", deep=True, registry=registry).ok


def test_register_decodes_wide_rows_in_batches_of_a_few_mib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches are sized from the file's size and the rows its footer declares, so that memory stays flat
    for long texts; a format without such metadata (JSONL) keeps the default."""
    import dsm.shards as shards
    from dsm.formats import DEFAULT_BATCH_ROWS

    folder = tmp_path / "wide"
    folder.mkdir()
    rows = 3000
    table = pa.table({"id": range(rows), "text": [f"{i:08d}" * 1000 for i in range(rows)]})  # 8 KB a row
    pq.write_table(table, folder / "part-0.parquet", compression="none")
    with open(folder / "part-1.jsonl", "w") as handle:
        handle.writelines(json.dumps({"id": i, "text": "x" * 8000}) + "\n" for i in range(rows))
    seen: dict[str, int] = {}
    real = shards.digest_open_shard

    def spy(handle, loc, path, fmt, *, schema, batch_rows, **kwargs):  # type: ignore[no-untyped-def]
        seen[path] = batch_rows
        return real(handle, loc, path, fmt, schema=schema, batch_rows=batch_rows, **kwargs)

    monkeypatch.setattr(shards, "digest_open_shard", spy)
    registry = str(tmp_path / "registry")
    contract = dsm.register(str(folder / "part-0.parquet"), name="wide", registry=registry)
    size = (folder / "part-0.parquet").stat().st_size
    expected = shards.batch_rows_for(shards.decoded_bytes_per_row(size, rows, 3))
    assert seen["part-0.parquet"] == expected < rows and contract.total_rows == rows
    dsm.register(str(folder / "part-1.jsonl"), name="wide-jsonl", registry=registry)
    assert seen["part-1.jsonl"] == DEFAULT_BATCH_ROWS
