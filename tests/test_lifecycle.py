"""``dsm deprecate``, ``dsm retire``, ``dsm gc``: statuses, refusals, and exactly which files gc deletes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.commands import lifecycle
from dsm.commands.lifecycle import deletion_records, deprecate, gc, retire
from dsm.errors import InputError, StorageError
from dsm.storage import Location
from tests.conftest import write_parquet_shards
from tests.cutover_support import sample_schema

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@dataclass
class Estate:
    """A registry with versions dsm wrote, versions it only registered, and files shared across them.

    web@1   registered from a/ (3 Parquet files someone else wrote); web@prod points here
    web@2   reshard of web@1 into b/ (2 files dsm wrote), retired
    web@3   convert-format of web@2 into c/ (2 JSONL files dsm wrote), retired
    other@1 registered from link-b/part-00000-of-00002.parquet: a symlink to b/, so the same file as web@2's
    raw@1   registered from d/ (not dsm's files), retired
    """

    root: Path
    registry: str

    def files(self) -> dict[str, str]:
        """sha256 of every file under the root, by path relative to it (symlinks not followed)."""
        out = {}
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                out[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out


@pytest.fixture
def estate(tmp_path: Path, sample_table: pa.Table) -> Estate:
    table = sample_table.slice(0, 600)
    registry = str(tmp_path / "registry")
    schema = sample_schema(table)  # the text field is classified pii
    write_parquet_shards(tmp_path / "a", table, 3)
    dsm.register(str(tmp_path / "a"), name="web", registry=registry, schema=schema)
    dsm.alias("web", "prod", 1, registry=registry)
    dsm.reshard("web@1", str(tmp_path / "b"), num_shards=2, registry=registry)
    dsm.convert_format("web@2", str(tmp_path / "c"), format="jsonl", registry=registry)
    (tmp_path / "link-b").symlink_to(tmp_path / "b")
    dsm.register(str(tmp_path / "link-b" / "part-00000-of-00002.parquet"), name="other", registry=registry)
    write_parquet_shards(tmp_path / "d", table, 1)
    dsm.register(str(tmp_path / "d"), name="raw", registry=registry)
    for ref in ("web@2", "web@3", "raw@1"):
        retire(ref, registry=registry)
    return Estate(root=tmp_path, registry=registry)


def _plan(report: lifecycle.GcReport) -> dict[str, list[tuple[str, str]]]:
    return {v.ref: [(Path(f.url).name, f.action) for f in v.files] for v in report.versions}


EXPECTED = {
    "raw@1": [],
    "web@2": [
        ("part-00000-of-00002.parquet", "kept"),
        ("part-00001-of-00002.parquet", "delete"),
    ],
    "web@3": [
        ("part-00000-of-00002.jsonl", "delete"),
        ("part-00001-of-00002.jsonl", "delete"),
    ],
}
DELETED = {
    "b/part-00001-of-00002.parquet",
    "c/part-00000-of-00002.jsonl",
    "c/part-00001-of-00002.jsonl",
}  # a published rewrite leaves no journal in its folder


def test_deprecate_and_retire_record_statuses_and_refuse(estate: Estate) -> None:
    reg = estate.registry
    change = deprecate("web@1", reason="superseded", registry=reg)
    assert (change.ref, change.previous, change.status, change.reason) == (
        "web@1",
        "active",
        "deprecated",
        "superseded",
    )
    assert dsm.show("web@1", registry=reg).status == "deprecated"
    assert deprecate("web@1", registry=reg).changed is False

    with pytest.raises(InputError, match=r"alias\(es\) web@prod"):
        retire("web@1", registry=reg)
    refused = cli("retire", "web@prod", "--registry", reg)
    assert refused.exit_code == 2 and "web@prod" in refused.stderr
    assert dsm.show("web@1", registry=reg).status == "deprecated"  # unchanged

    with pytest.raises(InputError, match="retired"):
        dsm.alias("web", "prod", 2, registry=reg)  # an alias never moves to a retired version
    with pytest.raises(InputError, match="retired"):
        deprecate("web@2", registry=reg)
    again = retire("web@2", registry=reg)
    assert again.changed is False and again.status == "retired"
    with pytest.raises(InputError, match="NAME@VERSION"):
        retire(str(estate.root / "contract.yaml"), registry=reg)


def test_lifecycle_cli_json(estate: Estate) -> None:
    out = cli("deprecate", "other@1", "--reason", "moved", "--registry", estate.registry, "--json")
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert body == {**body, "ref": "other@1", "status": "deprecated", "previous": "active", "reason": "moved"}
    out = cli("retire", "other@1", "--registry", estate.registry, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["status"] == "retired"


def test_gc_dry_run_lists_exactly_the_files_it_would_delete(estate: Estate) -> None:
    before = estate.files()
    report = gc(retain="0", registry=estate.registry)
    assert report.dry_run and report.ok
    assert _plan(report) == EXPECTED
    decisions = {v.ref: (v.decision, v.reason) for v in report.versions}
    assert decisions["raw@1"][0] == "kept" and "not written by dsm" in decisions["raw@1"][1]
    kept = next(f for f in report.versions[1].files if f.action == "kept")
    assert kept.reason == "listed by other@1"  # found through the symlink: canonical locations compared
    assert {str(Path(f.url).relative_to(estate.root)) for f in report.files_deleted} == DELETED
    assert report.bytes_deleted == sum((estate.root / p).stat().st_size for p in DELETED)
    assert estate.files() == before  # a dry run changes nothing, not even the registry

    out = cli("gc", "--retain", "0", "--registry", estate.registry, "--json")
    assert out.exit_code == 0
    body = json.loads(out.stdout)
    assert body["dry_run"] is True and body["files"] == len(DELETED) and body["bytes"] == report.bytes_deleted


def test_gc_yes_deletes_those_files_and_nothing_else(estate: Estate) -> None:
    before = estate.files()
    out = cli("gc", "--retain", "0", "--yes", "--registry", estate.registry)
    assert out.exit_code == 0, out.output
    after = estate.files()
    gone = set(before) - set(after)
    assert gone == DELETED
    new = set(after) - set(before)
    assert all(p.startswith("registry/web/deletions/") for p in new) and new
    changed = {p for p in before if p in after and before[p] != after[p]}
    assert changed == {"registry/web/status.yaml"}  # the versions record that their data was deleted
    statuses = yaml.safe_load((estate.root / "registry/web/status.yaml").read_text())
    assert statuses[2]["reason"].startswith("data deleted by gc") and statuses[3]["status"] == "retired"

    records = deletion_records("web", registry=estate.registry)
    assert [(r["event"], r["ref"]) for r in records] == [
        ("deleting", "web@2"),
        ("deleted", "web@2"),
        ("deleting", "web@3"),
        ("deleted", "web@3"),
    ]
    journaled = {
        str(Path(u).relative_to(estate.root))
        for r in records
        if r["event"] == "deleted"
        for u in r["deleted"]
    }
    assert journaled == DELETED
    assert records[0]["files"][0]["canonical"].startswith("file://")
    assert dsm.verify("web@1", registry=estate.registry).ok
    assert dsm.verify("other@1", registry=estate.registry).ok  # the shared file is still there
    again = gc(retain="0", yes=True, registry=estate.registry)
    assert again.files_deleted == []  # nothing left to do


def test_gc_refuses_a_version_an_alias_points_at(estate: Estate) -> None:
    # dsm never points an alias at a retired version; a hand-edited aliases.yaml can.
    aliases = estate.root / "registry/web/aliases.yaml"
    aliases.write_text(yaml.safe_dump({"prod": 1, "stale": 3}))
    before = estate.files()
    report = gc(retain="0", yes=True, registry=estate.registry)
    assert not report.ok
    web3 = next(v for v in report.versions if v.ref == "web@3")
    assert web3.decision == "refused" and "web@stale" in web3.reason and web3.files == ()
    after = estate.files()
    assert set(before) - set(after) == {"b/part-00001-of-00002.parquet"}
    out = cli("gc", "web", "--retain", "0", "--registry", estate.registry)
    assert out.exit_code == 1 and "refused" in out.stdout


def test_gc_waits_for_the_retain_period_and_the_policy_retention(
    estate: Estate, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = gc(registry=estate.registry)  # default retain 7d: they were retired just now
    assert {v.decision for v in waiting.versions} == {"kept"}
    assert all("retain period until" in v.reason for v in waiting.versions if v.ref.startswith("web"))
    (estate.root / "registry/policy.yaml").write_text(
        "policy: 1\nclassifications:\n  pii:\n    retention: 30d\n"
    )
    real_now = lifecycle._utcnow()
    monkeypatch.setattr(lifecycle, "_utcnow", lambda: real_now + timedelta(days=8))
    held = gc(registry=estate.registry)
    web = [v for v in held.versions if v.ref.startswith("web")]
    assert all(v.decision == "kept" and "classifications.pii.retention" in v.reason for v in web)
    monkeypatch.setattr(lifecycle, "_utcnow", lambda: real_now + timedelta(days=31))
    due = gc(registry=estate.registry)
    assert _plan(due) == EXPECTED


def test_gc_finishes_after_a_run_that_died_halfway(estate: Estate, monkeypatch: pytest.MonkeyPatch) -> None:
    real_remove = Location.remove
    calls = {"n": 0}

    def failing_remove(self: Location, rel: str) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # web@2's one file and web@3's first went: its second fails
            raise StorageError(f"{rel}: the network went away")
        real_remove(self, rel)

    monkeypatch.setattr(Location, "remove", failing_remove)
    with pytest.raises(StorageError):
        gc(retain="0", yes=True, registry=estate.registry)
    monkeypatch.setattr(Location, "remove", real_remove)
    records = deletion_records("web", registry=estate.registry)
    # web@2 finished; for web@3 the intent is journaled, the end is not
    assert [r["event"] for r in records] == ["deleting", "deleted", "deleting"]
    report = gc(retain="0", yes=True, registry=estate.registry)
    actions = sorted(f.action for v in report.versions for f in v.files)
    assert actions.count("deleted") == len(DELETED) - 2 and "missing" in actions
    assert {p for p in DELETED if (estate.root / p).exists()} == set()


def test_gc_options_are_checked(estate: Estate) -> None:
    with pytest.raises(InputError, match="exclude each other"):
        gc(dry_run=True, yes=True, registry=estate.registry)
    with pytest.raises(InputError, match="dataset names"):
        gc(["web@2"], registry=estate.registry)
    with pytest.raises(dsm.DatasetNotFound):
        gc(["nope"], registry=estate.registry)
    with pytest.raises(InputError, match="duration"):
        gc(retain="soon", registry=estate.registry)
    out = cli("gc", "--dry-run", "--yes", "--registry", estate.registry)
    assert out.exit_code == 2


def test_cli_options_reach_gc_unchanged(estate: Estate, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(names: Any, **kwargs: Any) -> lifecycle.GcReport:
        seen.update(names=list(names), **kwargs)
        return lifecycle.GcReport(run="r", dry_run=True, retain="1d", versions=())

    monkeypatch.setattr(lifecycle, "gc", fake)
    out = cli("gc", "web", "raw", "--retain", "1d", "--registry", estate.registry, "--storage-option", "a=1")
    assert out.exit_code == 0
    assert seen == {
        "names": ["web", "raw"],
        "retain": "1d",
        "dry_run": None,
        "yes": False,
        "registry": estate.registry,
        "storage_options": {"a": 1},
    }


def test_gc_keeps_a_file_that_changed_since_dsm_wrote_it(estate: Estate) -> None:
    changed = estate.root / "c" / "part-00000-of-00002.jsonl"
    changed.write_bytes(changed.read_bytes() + b'{"id": 1}\n')
    report = gc(["web"], retain="0", yes=True, registry=estate.registry)
    web3 = next(v for v in report.versions if v.ref == "web@3")
    kept = [f for f in web3.files if f.action == "kept"]
    assert [Path(f.url).name for f in kept] == ["part-00000-of-00002.jsonl"] and "size" in kept[0].reason
    assert changed.exists() and not (estate.root / "c" / "part-00001-of-00002.jsonl").exists()


def test_name_alone_resolves_to_the_newest_version_not_retired(estate: Estate) -> None:
    reg = estate.registry
    assert dsm.show("web", registry=reg).version == 1  # web@2 and web@3 are retired
    assert dsm.show("web@latest", registry=reg).version == 1
    assert dsm.show("web@3", registry=reg).status == "retired"  # still there by number
    with pytest.raises(dsm.DatasetNotFound, match="every version of raw is retired; name one: raw@1"):
        dsm.show("raw", registry=reg)
