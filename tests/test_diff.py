"""``dsm diff``: schema changes classified for readers of the old contract, side by side, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.commands import diff as diff_lib
from dsm.commands.diff import compare_schemas
from dsm.contract import Field, Schema

runner = CliRunner()


def schema(*fields: tuple[str, str] | tuple[str, str, bool], key: tuple[str, ...] = ()) -> Schema:
    return Schema(
        fields=tuple(Field(name=f[0], type=f[1], nullable=f[2] if len(f) > 2 else True) for f in fields),  # type: ignore[misc]
        key=key,
    )


def changes(old: Schema, new: Schema) -> list[tuple[str, str, bool]]:
    return [(c.field, c.change, c.breaking) for c in compare_schemas(old, new)]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("int32", "int64", ("type_widened", False)),
        ("int8", "int16", ("type_widened", False)),
        ("uint16", "int32", ("type_widened", False)),
        ("float", "double", ("type_widened", False)),
        ("string", "large_string", ("type_widened", False)),
        ("binary", "large_binary", ("type_widened", False)),
        ("decimal128(10, 2)", "decimal128(12, 3)", ("type_widened", False)),
        ("int64", "int32", ("type_narrowed", True)),
        ("double", "float", ("type_narrowed", True)),
        ("large_string", "string", ("type_narrowed", True)),
        ("uint64", "int64", ("type_changed", True)),
        ("int64", "string", ("type_changed", True)),
        ("int32", "double", ("type_changed", True)),
        ("timestamp[ms]", "timestamp[us]", ("type_changed", True)),
        ("timestamp[us, tz=UTC]", "timestamp[us]", ("type_changed", True)),
    ],
)
def test_type_changes(old: str, new: str, expected: tuple[str, bool]) -> None:
    assert changes(schema(("x", old)), schema(("x", new))) == [("x", *expected)]


def test_fields_added_removed_and_nullability() -> None:
    old = schema(("id", "int64", False), ("a", "string"), ("b", "string"))
    new = schema(("id", "int64", True), ("b", "string", False), ("c", "double"))
    assert changes(old, new) == [
        ("id", "nullability_relaxed", True),
        ("a", "removed", True),
        ("b", "nullability_tightened", True),
        ("c", "added", False),
    ]


def test_nested_types_compare_field_by_field() -> None:
    old = schema(("meta", "struct<src: string, n: int32, gone: bool>"), ("tags", "list<item: int32>"))
    new = schema(
        ("meta", "struct<src: string, n: int64, extra: double>"), ("tags", "large_list<item: int64>")
    )
    assert changes(old, new) == [
        ("meta.n", "type_widened", False),
        ("meta.gone", "removed", True),
        ("meta.extra", "added", False),
        ("tags", "type_widened", False),
        ("tags[]", "type_widened", False),
    ]
    maps = changes(schema(("m", "map<string, int32>")), schema(("m", "map<string, int64>")))
    assert maps == [("m{}", "type_widened", False)]


def test_annotations_order_key_and_dictionaries_are_not_breaking_except_the_key() -> None:
    old = Schema(
        fields=(Field(name="id", type="int64"), Field(name="t", type="string", classification="pii")),
        key=("id",),
    )
    new = Schema(fields=(Field(name="t", type="dictionary<values=string, indices=int32, ordered=0>"),
                         Field(name="id", type="int64")), key=())  # fmt: skip
    assert changes(old, new) == [
        ("t", "encoding_changed", False),
        ("t", "classification_changed", False),
        ("(fields)", "reordered", False),
        ("(key)", "key_removed", True),
    ]
    assert changes(schema(("id", "int64")), schema(("id", "int64"), key=("id",))) == [
        ("(key)", "key_added", False)
    ]
    assert changes(old, old) == []


def _register(tmp_path: Path, name: str, table: pa.Table) -> str:
    folder = tmp_path / name
    folder.mkdir()
    pq.write_table(table, folder / "part-0.parquet")
    registry = str(tmp_path / "registry")
    dsm.register(str(folder), name="t", registry=registry, allow_breaking=True)  # v3 breaks on purpose
    return registry


@pytest.fixture
def versions(tmp_path: Path) -> str:
    base = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "s": ["a", "b", "c"]})
    _register(tmp_path, "v1", base)
    _register(tmp_path, "v2", base.set_column(0, "id", pa.array([1, 2, 3], pa.int64())))  # widened
    return _register(tmp_path, "v3", base.drop_columns(["s"]))  # removed


def test_diff_of_registered_versions(versions: str) -> None:
    widened = dsm.diff("t@1", "t@2", registry=versions)
    assert (
        widened.verdict == "compatible"
        and widened.compatible
        and widened.old == "t@1"
        and widened.new == "t@2"
    )
    rows = {p.item: p for p in widened.properties}
    assert rows["rows"].same and not rows["location"].same and rows["format"].same
    assert [(f.name, f.old, f.new, f.change) for f in widened.fields] == [
        ("id", "int32", "int64", "type_widened"),
        ("s", "string", "string", "same"),
    ]
    removed = dsm.diff("t@1", "t@3", registry=versions)
    assert removed.verdict == "breaking" and [c.field for c in removed.breaking] == ["s"]
    assert dsm.diff("t@2", "t@2", registry=versions).verdict == "identical"
    json.dumps(removed.to_dict())


def test_diff_cli_exit_codes_and_json(versions: str) -> None:
    compatible = runner.invoke(app, ["diff", "t@1", "t@2", "--registry", versions])
    assert (
        compatible.exit_code == 0
        and "compatible" in compatible.stdout
        and "type_widened" in compatible.stdout
    )
    breaking = runner.invoke(app, ["diff", "t@1", "t@3", "--registry", versions, "--json"])
    assert breaking.exit_code == 1
    body = json.loads(breaking.stdout)
    assert body["verdict"] == "breaking" and body["changes"][0]["field"] == "s"
    missing = runner.invoke(app, ["diff", "t@1", "t@9", "--registry", versions])
    assert missing.exit_code == 2 and "t@9 does not exist" in missing.stderr


def test_diff_options_reach_the_library_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.update(args=args, kwargs=kwargs)
        raise dsm.InputError("recorded")

    monkeypatch.setattr(diff_lib, "diff", record)
    result = runner.invoke(app, ["diff", "a@1", "b@2", "--registry", "r", "--storage-option", "anon=true"])
    assert result.exit_code == 2
    assert seen == {"args": ("a@1", "b@2"), "kwargs": {"registry": "r", "storage_options": {"anon": True}}}
