"""WebDataset passes the conformance suite; plus grouping by key and the determinism of tar bytes."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pyarrow as pa
import pytest
from conformance import FormatConformance

from dsm.errors import FormatError, SchemaError
from dsm.formats.webdataset import KEY_FIELD, WebDatasetFormat, split_member


class TestWebDataset(FormatConformance):
    format_name = "webdataset"
    supported = frozenset({"string", "large_string", "binary", "large_binary"})

    def prepare(self, table: pa.Table) -> pa.Table:
        """Adds the key and a ``cls`` member in every sample (a sample with no member cannot exist)."""
        keys = pa.array([f"sample-{i:06d}" for i in range(table.num_rows)], pa.string())
        table = table.add_column(0, pa.field(KEY_FIELD, pa.string(), nullable=False), keys)
        labels = pa.array([str(i % 3) for i in range(table.num_rows)], pa.string())
        return table.add_column(1, pa.field("cls", pa.string(), nullable=False), labels)

    def truncation_point(self, data: bytes) -> int:
        return 700  # inside the first member's data


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _read(data: bytes, schema: pa.Schema | None = None) -> pa.Table:
    batches = list(WebDatasetFormat().iter_batches(io.BytesIO(data), shard="s.tar", schema=schema))
    return pa.Table.from_batches(batches)


def test_members_are_grouped_into_samples_by_key() -> None:
    data = _tar(
        [
            ("a/x001.jpg", b"\xff\xd8"),
            ("a/x001.TXT", b"caption one"),
            ("a/x001.seg.json", b"{}"),
            ("a/x002.txt", b"caption two"),
        ]
    )
    table = _read(data)
    assert table.schema == pa.schema(
        [
            pa.field(KEY_FIELD, pa.string(), nullable=False),
            ("jpg", pa.binary()),
            ("seg.json", pa.string()),
            ("txt", pa.string()),
        ]
    )
    assert table.to_pylist() == [
        {KEY_FIELD: "a/x001", "jpg": b"\xff\xd8", "seg.json": "{}", "txt": "caption one"},
        {KEY_FIELD: "a/x002", "jpg": None, "seg.json": None, "txt": "caption two"},
    ]


def test_non_consecutive_members_of_a_key_are_refused() -> None:
    data = _tar([("k1.txt", b"a"), ("k2.txt", b"b"), ("k1.jpg", b"c")])
    with pytest.raises(FormatError, match=r's.tar: sample "k1" is split'):
        _read(data)


def test_member_not_in_the_schema_is_named() -> None:
    schema = pa.schema([pa.field(KEY_FIELD, pa.string(), nullable=False), ("txt", pa.string())])
    with pytest.raises(FormatError, match=r'"k1.png"'):
        _read(_tar([("k1.txt", b"a"), ("k1.png", b"b")]), schema)


def test_invalid_utf8_in_a_string_field_is_named() -> None:
    schema = pa.schema([pa.field(KEY_FIELD, pa.string(), nullable=False), ("txt", pa.string())])
    with pytest.raises(FormatError, match=r'"k1.txt" is not valid UTF-8'):
        _read(_tar([("k1.txt", b"\xff")]), schema)


def test_schema_without_key_is_unsupported() -> None:
    reasons = WebDatasetFormat().unsupported(pa.schema([("txt", pa.string()), ("n", pa.int64())]))
    assert any(KEY_FIELD in r for r in reasons) and any('"n"' in r for r in reasons)


def test_written_members_are_fixed_and_in_schema_order(tmp_path: Path) -> None:
    schema = pa.schema(
        [pa.field(KEY_FIELD, pa.string(), nullable=False), ("txt", pa.string()), ("jpg", pa.binary())]
    )
    table = pa.table({KEY_FIELD: ["b", "a"], "txt": ["x", None], "jpg": [b"1", b"2"]}, schema=schema)
    sink = io.BytesIO()
    with WebDatasetFormat().open_writer(sink, schema) as writer:  # type: ignore[arg-type]
        writer.write_batch(table.to_batches()[0])
    with tarfile.open(fileobj=io.BytesIO(sink.getvalue())) as archive:
        members = archive.getmembers()
    assert [m.name for m in members] == ["b.txt", "b.jpg", "a.jpg"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, 0, "", "", 0o644)}


def test_a_key_with_a_dot_cannot_be_written() -> None:
    schema = pa.schema([pa.field(KEY_FIELD, pa.string(), nullable=False), ("txt", pa.string())])
    with (
        pytest.raises(FormatError, match=r"a\.b"),
        WebDatasetFormat().open_writer(io.BytesIO(), schema) as writer,
    ):  # type: ignore[arg-type]
        writer.write_batch(pa.record_batch({KEY_FIELD: ["a.b"], "txt": ["x"]}, schema=schema))


def test_split_member() -> None:
    assert split_member("d/e/abc.Seg.JSON") == ("d/e/abc", "seg.json")
    assert split_member("noext") is None
    assert split_member(".hidden") is None


def test_unsupported_field_names() -> None:
    schema = pa.schema([pa.field(KEY_FIELD, pa.string(), nullable=False), ("JPG", pa.binary())])
    assert WebDatasetFormat().unsupported(schema) and pytest.raises(SchemaError)


def test_a_sample_with_no_member_cannot_be_written() -> None:
    schema = pa.schema([pa.field(KEY_FIELD, pa.string(), nullable=False), ("txt", pa.string())])
    batch = pa.record_batch({KEY_FIELD: ["k"], "txt": [None]}, schema=schema)
    with (
        pytest.raises(FormatError, match='"k"'),
        WebDatasetFormat().open_writer(io.BytesIO(), schema) as writer,
    ):  # type: ignore[arg-type]
        writer.write_batch(batch)
