"""Row diff by key and by position: exact counts on a million rows, the right sample, shards with equal
fingerprints skipped unread, memory bounded by partitions, and refusals of keys that cannot match rows."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import dsm
from dsm.commands.diff import diff_rows
from dsm.contract import Schema
from dsm.errors import InputError
from dsm.inspect import open_rows
from dsm.inspect.rowdiff import compare_rows
from tests.inspect_data import register_path, schema_of

ROWS = 1_000_000
SHARDS = 4


@dataclass(frozen=True)
class Versions:
    registry: str
    base: str
    changed: str
    reshuffled: str
    changed_ids: frozenset[int]
    text_changed: frozenset[int]
    score_changed: frozenset[int]
    removed_ids: frozenset[int]
    added_ids: frozenset[int]


def _base(rows: int) -> pa.Table:
    ids = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "text": pc.binary_join_element_wise("row ", pc.cast(pa.array(ids % 9973), pa.string()), ""),
            "score": pa.array((ids % 1000) / 7.0),
            "email": pc.binary_join_element_wise(
                "user", pc.cast(pa.array(ids), pa.string()), "@mail.example.org", ""
            ),
        }
    )


def _write(folder: Path, table: pa.Table, shards: int) -> None:
    folder.mkdir(parents=True)
    per = -(-table.num_rows // shards)
    for index in range(shards):
        pq.write_table(
            table.slice(index * per, per), folder / f"part-{index:05d}.parquet", row_group_size=65_536
        )


def _schema(table: pa.Table) -> Schema:
    return schema_of(table, {"email": {"classification": "pii"}}, key=["id"])


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> Versions:
    root = tmp_path_factory.mktemp("rowdiff")
    registry = str(root / "registry")
    base = _base(ROWS)
    _write(root / "v1", base, SHARDS)
    v1 = dsm.register(str(root / "v1"), name="big", schema=_schema(base), registry=registry)
    rng = np.random.default_rng(11)
    picked = rng.choice(ROWS, 2000, replace=False)
    changed, removed = picked[:1000], picked[1000:1500]
    text_changed, score_changed = set(changed[:600].tolist()), set(changed[400:].tolist())
    texts = base.column("text").to_pylist()
    scores = base.column("score").to_numpy().copy()
    for i in text_changed:
        texts[i] = texts[i] + " (edited)"
    for i in score_changed:
        scores[i] += 1.0
    keep = np.ones(ROWS, dtype=bool)
    keep[removed] = False
    edited = pa.table(
        {
            "id": base.column("id"),
            "text": pa.array(texts),
            "score": pa.array(scores),
            "email": base.column("email"),
        }
    )
    added = _base(ROWS + 500).slice(ROWS)
    v2_table = pa.concat_tables([edited.filter(pa.array(keep)), added])
    _write(root / "v2", v2_table, SHARDS)
    v2 = dsm.register(str(root / "v2"), name="big", schema=_schema(base), registry=registry)
    shuffled = base.take(pa.array(np.random.default_rng(3).permutation(ROWS)))
    _write(root / "v3", shuffled, 7)
    v3 = dsm.register(str(root / "v3"), name="big", schema=_schema(base), registry=registry)
    return Versions(
        registry=registry,
        base=v1.ref,
        changed=v2.ref,
        reshuffled=v3.ref,
        changed_ids=frozenset(changed.tolist()),
        text_changed=frozenset(text_changed),
        score_changed=frozenset(score_changed),
        removed_ids=frozenset(removed.tolist()),
        added_ids=frozenset(range(ROWS, ROWS + 500)),
    )


def test_a_million_rows_with_changes_added_and_removed_gives_exact_counts_and_the_right_sample(
    versions: Versions,
) -> None:
    d = diff_rows(versions.base, versions.changed, registry=versions.registry, sample=10)
    assert (d.added, d.removed, d.changed) == (500, 500, 1000)
    assert d.unchanged == ROWS - 1500 and d.key == ("id",) and not d.by_position and d.differs
    assert dict(d.changed_cells) == {"text": 600, "score": 600, "email": 0}
    first = sorted(versions.changed_ids)[:10]
    assert [r.key["id"] for r in d.sample_changed] == first
    for row in d.sample_changed:
        i = row.key["id"]
        expected = tuple(
            c
            for c in ("text", "score")
            if i in (versions.text_changed if c == "text" else versions.score_changed)
        )
        assert row.columns == expected
        assert row.old_position == i
        if "text" in row.columns:
            assert row.new["text"].value == row.old["text"].value + " (edited)"
        if "score" in row.columns:
            assert row.new["score"].value == pytest.approx(row.old["score"].value + 1.0)
    assert [r.key["id"] for r in d.sample_removed] == sorted(versions.removed_ids)[:10]
    assert [r.key["id"] for r in d.sample_added] == sorted(versions.added_ids)[:10]
    assert all(r.old_position is None and r.new_position is not None for r in d.sample_added)


def test_reshuffled_and_resharded_copy_has_no_row_changed(versions: Versions) -> None:
    by_fingerprint = diff_rows(versions.base, versions.reshuffled, registry=versions.registry)
    assert by_fingerprint.identical_by_fingerprint and not by_fingerprint.differs
    assert by_fingerprint.read_rows_old == by_fingerprint.read_rows_new == 0
    read = diff_rows(versions.base, versions.reshuffled, registry=versions.registry, use_fingerprints=False)
    assert (read.added, read.removed, read.changed, read.unchanged) == (0, 0, 0, ROWS)
    assert read.read_rows_old == read.read_rows_new == ROWS and not read.identical_by_fingerprint


def test_partitions_bound_memory_and_do_not_change_the_result(versions: Versions) -> None:
    small = diff_rows(
        versions.base, versions.changed, registry=versions.registry, memory_limit="8MiB", sample=3
    )
    assert small.partitions > 20
    assert (small.added, small.removed, small.changed) == (500, 500, 1000)
    assert [r.key["id"] for r in small.sample_changed] == sorted(versions.changed_ids)[:3]


def test_pages_walk_every_difference_in_position_order(versions: Versions) -> None:
    old = open_rows(versions.base, registry=versions.registry)
    new = open_rows(versions.changed, registry=versions.registry)
    with compare_rows(old, new, memory_limit=16 << 20, sample=0) as run:
        seen = []
        offset = 0
        while True:
            page = run.page("changed", offset, 300)
            if not page.rows:
                break
            seen += [r.key["id"] for r in page.rows]
            offset += len(page.rows)
        assert seen == sorted(versions.changed_ids) and page.total == 1000
        removed = run.page("removed", 495, 10)
        assert [r.key["id"] for r in removed.rows] == sorted(versions.removed_ids)[495:]


def test_shards_with_equal_fingerprints_are_skipped_unread(tmp_path: Path) -> None:
    base = _base(40_000)
    registry = str(tmp_path / "registry")
    _write(tmp_path / "a", base, 4)
    a = dsm.register(str(tmp_path / "a"), name="s", schema=_schema(base), registry=registry)
    (tmp_path / "b").mkdir()
    for name in ("part-00000.parquet", "part-00001.parquet", "part-00002.parquet"):
        shutil.copy(tmp_path / "a" / name, tmp_path / "b" / name)
    last = base.slice(30_000)
    last = last.set_column(1, "text", pc.binary_join_element_wise(last.column("text"), "!", ""))
    pq.write_table(last, tmp_path / "b" / "part-00003.parquet")
    b = dsm.register(str(tmp_path / "b"), name="s", schema=_schema(base), registry=registry)
    for name in ("part-00000.parquet", "part-00001.parquet", "part-00002.parquet"):
        (tmp_path / "a" / name).write_bytes(b"not read")  # reading a skipped shard would fail now
        (tmp_path / "b" / name).unlink()
    d = diff_rows(a.ref, b.ref, registry=registry)
    assert (d.changed, d.added, d.removed, d.unchanged) == (10_000, 0, 0, 30_000)
    assert d.skipped_shards == 6 and d.read_rows_old == d.read_rows_new == 10_000
    assert d.changed_cells["text"] == 10_000


def test_by_position_when_there_is_no_key(tmp_path: Path) -> None:
    registry = str(tmp_path / "registry")
    table = pa.table({"a": list(range(3000)), "b": [str(i) for i in range(3000)]})
    schema = Schema.from_arrow(table.schema)
    old = register_path(
        tmp_path / "old", table, "jsonl", name="p", registry=registry, schema=schema, shards=3
    )
    edited = table.slice(0, 2990).set_column(
        1, "b", pa.array([str(i) + ("x" if i in (5, 2000) else "") for i in range(2990)])
    )
    new = register_path(tmp_path / "new", edited, "csv", name="p", registry=registry, schema=schema, shards=2)
    d = diff_rows(old.ref, new.ref, registry=registry)
    assert d.by_position and d.key == () and "compared by position" in d.notes[0]
    assert (d.changed, d.removed, d.added) == (2, 10, 0)
    assert [r.key["position"] for r in d.sample_changed] == [5, 2000]
    assert [r.old_position for r in d.sample_removed] == list(range(2990, 3000))
    again = register_path(
        tmp_path / "same", table, "parquet", name="p", registry=registry, schema=schema, shards=5
    )
    same = diff_rows(old.ref, again.ref, registry=registry)
    assert same.identical_by_fingerprint and not same.differs


def test_duplicate_and_null_keys_are_refused(tmp_path: Path) -> None:
    registry = str(tmp_path / "registry")
    table = pa.table({"id": [1, 2, 2, 3], "v": ["a", "b", "c", "d"]})
    schema = Schema.from_arrow(table.schema)
    a = register_path(tmp_path / "a", table, "parquet", name="k", registry=registry, schema=schema, shards=1)
    b = register_path(
        tmp_path / "b", table.slice(1), "parquet", name="k", registry=registry, schema=schema, shards=1
    )
    with pytest.raises(
        InputError,
        match=r"OLD \(k@1\): the key \['id'\] is not unique: 1 key value\(s\) repeat \(e.g. \{'id': 2\}\)",
    ):
        diff_rows(a.ref, b.ref, key=["id"], registry=registry)
    nulls = pa.table({"id": pa.array([1, None, 3]), "v": ["a", "b", "c"]})
    c = register_path(tmp_path / "c", nulls, "parquet", name="k", registry=registry, schema=schema, shards=1)
    with pytest.raises(InputError, match="null key 'id'"):
        diff_rows(c.ref, b.ref, key=["id"], registry=registry)
    with pytest.raises(InputError, match="not a field"):
        diff_rows(a.ref, b.ref, key=["nope"], registry=registry)


def test_values_shown_in_a_diff_are_masked(tmp_path: Path) -> None:
    registry = str(tmp_path / "registry")
    table = pa.table({"id": [1, 2, 3], "email": ["a.secret@x.org", "b.secret@x.org", "c.secret@x.org"]})
    schema = schema_of(table, {"email": {"classification": "pii"}}, key=["id"])
    a = register_path(tmp_path / "a", table, "parquet", name="m", registry=registry, schema=schema, shards=1)
    edited = table.set_column(1, "email", pa.array(["a.secret@x.org", "B.SECRET@x.org", "c.secret@x.org"]))
    b = register_path(tmp_path / "b", edited, "parquet", name="m", registry=registry, schema=schema, shards=1)
    d = diff_rows(a.ref, b.ref, registry=registry)
    text = repr(d.to_dict())
    assert d.changed == 1 and d.changed_cells["email"] == 1
    assert "secret" not in text.lower() and d.sample_changed[0].new["email"].summary == "*** (14 chars)"
    shown = diff_rows(a.ref, b.ref, registry=registry, unmask=["email"])
    assert shown.sample_changed[0].new["email"].value == "B.SECRET@x.org"
