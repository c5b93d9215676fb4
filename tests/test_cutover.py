"""``dsm cutover`` through the library: stages, evidence, the alias, rollback, gates, hooks, refusals."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsm
from dsm.commands.cutover import (
    cutover_status,
    list_cutovers,
    plan_cutover,
    resume_cutover,
    rollback_cutover,
    run_cutover,
    start_cutover,
)
from dsm.commands.cutover import runner as cutover_runner
from dsm.commands.cutover.journal import Owner
from dsm.commands.cutover.lease import Lease
from dsm.commands.cutover.shadow import compare_sample
from dsm.errors import CheckFailed, ConflictError, InputError
from dsm.registry import Registry
from dsm.storage import location
from tests.conftest import write_parquet_shards

from .cutover_support import FAST, flip_byte, journal_records, make_dataset, sample_schema


@pytest.fixture
def small(sample_table: pa.Table) -> pa.Table:
    return sample_table.slice(0, 800)


@pytest.fixture
def web(tmp_path: Path, small: pa.Table) -> tuple[str, Path]:
    return make_dataset(tmp_path, small)


def _alias(registry: str) -> int:
    return Registry(registry).aliases("web")["prod"]


def _checksums(registry: str, ref: str) -> list[tuple[str, str | None]]:
    return [(s.path, s.checksum) for s in dsm.show(ref, registry=registry).shards]


def test_parquet_to_jsonl_through_every_stage(tmp_path: Path, web: tuple[str, Path], small: pa.Table) -> None:
    registry, _ = web
    before = _checksums(registry, "web@1")
    report = start_cutover(
        "web@prod", to=str(tmp_path / "jsonl"), format="jsonl", run=True, registry=registry, **FAST
    )
    assert report.ok and report.ran == ("plan", "copy", "verify", "shadow", "switch", "complete")
    assert report.state.phase == "completed" and report.next_command is None
    new = dsm.show("web@prod", registry=registry)
    assert new.version == 2 and new.format == "jsonl" and new.location == str(tmp_path / "jsonl")
    assert (
        new.total_rows == small.num_rows
        and new.fingerprint == dsm.show("web@1", registry=registry).fingerprint
    )
    assert new.lineage is not None and new.lineage.parameters["cutover"] == report.id
    assert new.lineage.parent == "web@1" and new.metadata["cutover"] == report.id
    assert new.schema.field("text").classification == "pii" and new.schema.key == ("id",)
    old = dsm.show("web@1", registry=registry)
    assert old.status == "deprecated" and _checksums(registry, "web@1") == before
    assert dsm.verify("web@1", registry=registry).ok  # the old data was never touched
    entry = next(e for e in dsm.ls(registry=registry) if e.name == "web")
    assert entry.statuses == {1: "deprecated"}

    records = journal_records(registry, "web", report.id)
    events = [(r["event"], r.get("stage")) for r in records]
    assert events[0] == ("created", None) and events[1] == ("run", None)
    for stage in ("plan", "copy", "verify", "shadow", "switch", "complete"):
        start = events.index(("stage_started", stage))
        assert events[start + 1] == ("stage_finished", stage)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    state = report.state
    plan = state.stage("plan").evidence
    assert plan["estimate"]["seconds"]["copy"] > 0 and plan["estimate"]["cost"]["currency"] == "USD"
    assert plan["estimate"]["storage"]["peak_extra_bytes"] == plan["layout"]["bytes_estimated"]
    assert plan["layout"]["files"] == 4 and plan["compatibility"]["ok"]
    copy = state.stage("copy").evidence
    assert copy["bytes_copied"] == new.total_bytes and copy["target_version"] == 2
    assert state.stage("verify").evidence["fingerprint"]["same_rows"] is True
    assert state.stage("verify").evidence["lineage_cutover"] is True
    assert state.stage("verify").evidence["classifications_lost"] == []
    sample = state.stage("shadow").evidence["sample"]
    assert sample["rows_compared"] == 200 and sample["mismatches"] == 0 and sample["method"] == "key (id)"
    switch = state.stage("switch").evidence
    assert (switch["from"], switch["to"], switch["moved"]) == (1, 2, True)
    assert switch["rollback_check"]["old_verifies"]["ok"] is True
    rows = {p.item: p for p in report.plan_vs_actual}
    assert rows["target bytes"].actual == new.total_bytes and rows["target bytes"].planned
    assert all(rows[f"{s} time"].actual is not None for s in ("copy", "verify", "shadow", "switch"))
    json.dumps(report.to_dict())  # JSON-ready


def test_the_alias_moves_only_at_switch_after_verify(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    report = start_cutover("web@prod", to=str(tmp_path / "out"), format="jsonl", registry=registry, **FAST)
    assert report.ran == ("plan",) and report.stopped.startswith("stopped after plan")
    assert report.next_command == f"dsm cutover run {report.id}"
    for stage in ("copy", "verify", "shadow"):
        step = run_cutover(report.id, through=stage, registry=registry)
        assert step.ran == (stage,) and _alias(registry) == 1
    assert (
        dsm.show("web", registry=registry).version == 2
    )  # the target is registered, readers of prod unaware
    step = run_cutover(report.id, through="switch", registry=registry)
    assert step.ran == ("switch",) and _alias(registry) == 2
    events = [(r["event"], r.get("stage")) for r in journal_records(registry, "web", report.id)]
    assert events.index(("stage_finished", "verify")) < events.index(("stage_started", "switch"))


def test_reshard_into_another_folder_with_a_shuffle(
    tmp_path: Path, web: tuple[str, Path], small: pa.Table
) -> None:
    registry, _ = web
    report = start_cutover(
        "web@prod",
        to=str(tmp_path / "resharded"),
        num_shards=3,
        shuffle=True,
        seed=7,
        run=True,
        registry=registry,
        **FAST,
    )
    assert report.ok, report.failed
    new = dsm.show("web@prod", registry=registry)
    assert new.format == "parquet" and len(new.shards) == 3 and new.lineage is not None
    assert new.lineage.operation == "reshard" and new.lineage.parameters["seed"] == 7
    old = dsm.show("web@1", registry=registry)
    assert new.fingerprint is not None and old.fingerprint is not None
    assert new.fingerprint.unordered == old.fingerprint.unordered
    assert new.fingerprint.ordered != old.fingerprint.ordered  # shuffled
    plan = report.state.stage("plan").evidence
    assert plan["operation"] == "reshard" and plan["layout"]["files"] == 3 and plan["layout"]["shuffle"]
    assert report.state.stage("shadow").evidence["sample"]["mismatches"] == 0


def test_rollback_after_switch_restores_the_alias_and_keeps_the_old_data(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    registry, _ = web
    dest = tmp_path / "out"
    report = start_cutover(
        "web@prod", to=str(dest), format="jsonl", run=True, registry=registry, **{**FAST, "retain": "7d"}
    )
    assert report.ok and report.stopped.startswith("waiting for the retain period")
    assert report.state.switched and _alias(registry) == 2
    before = _checksums(registry, "web@1")
    (dest / "notes-by-someone.txt").write_text("not dsm's")
    back = rollback_cutover(report.id, discard_target=True, registry=registry)
    assert back.ok and back.state.phase == "rolled_back" and _alias(registry) == 1
    assert dsm.verify("web@1", registry=registry).ok and _checksums(registry, "web@1") == before
    evidence = back.state.rollback["evidence"]  # type: ignore[index]
    assert evidence["alias"] == {"alias": "web@prod", "moved": True, "from": 2, "to": 1, "atomic": True}
    assert evidence["discarded"]["files_removed"] == 4 and evidence["old_verifies"]["ok"] is True
    assert sorted(p.name for p in dest.iterdir()) == ["notes-by-someone.txt"]  # only what the copy wrote
    assert dsm.show("web@2", registry=registry).status == "retired"
    with pytest.raises(InputError, match="retired"):
        dsm.alias("web", "prod", 2, registry=registry)
    again = rollback_cutover(report.id, registry=registry)
    assert again.ok and "already rolled back" in again.notes
    with pytest.raises(InputError, match="was rolled back"):
        run_cutover(report.id, registry=registry)


def test_a_corrupt_target_shard_fails_verify_naming_it_and_the_alias_stays(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    registry, _ = web
    dest = tmp_path / "out"
    report = start_cutover(
        "web@prod", to=str(dest), format="jsonl", through="copy", registry=registry, **FAST
    )
    assert report.ran == ("plan", "copy")
    flip_byte(dest / "part-00002-of-00004.jsonl")
    failed = run_cutover(report.id, registry=registry)
    assert not failed.ok and failed.ran == () and "part-00002-of-00004.jsonl" in (failed.failed or "")
    assert failed.state.phase == "failed" and failed.state.stage("verify").status == "failed"
    assert _alias(registry) == 1
    evidence = failed.state.stage("verify").evidence
    assert [f["path"] for f in evidence["verify"]["failures"]] == ["part-00002-of-00004.jsonl"]
    assert failed.next_command is not None and "rollback" in failed.next_command


def test_a_postponed_switch_waits_for_an_explicit_through(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    report = start_cutover(
        "web@prod",
        to=str(tmp_path / "out"),
        format="jsonl",
        run=True,
        postpone_switch=True,
        registry=registry,
        **FAST,
    )
    assert report.ran[-1] == "shadow" and "switch postponed" in report.stopped and _alias(registry) == 1
    assert report.next_command == f"dsm cutover run {report.id} --through switch"
    assert run_cutover(report.id, registry=registry).ran == () and _alias(registry) == 1
    done = run_cutover(report.id, through="complete", registry=registry)
    assert done.ran == ("switch", "complete") and _alias(registry) == 2


def test_complete_waits_for_the_retain_period(
    tmp_path: Path, web: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, _ = web
    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), run=True, registry=registry, **{**FAST, "retain": "2d"}
    )
    assert report.state.stage("complete").status == "pending" and report.state.complete_after is not None
    assert run_cutover(report.id, registry=registry).ran == ()
    later = datetime.now(UTC) + timedelta(days=2, minutes=1)
    monkeypatch.setattr(cutover_runner, "_utcnow", lambda: later)
    assert run_cutover(report.id, registry=registry).ran == ("complete",)
    assert dsm.show("web@1", registry=registry).status == "deprecated"
    with pytest.raises(InputError, match="rollback is no longer possible"):
        rollback_cutover(report.id, registry=registry)
    again = resume_cutover(report.id, registry=registry)
    assert again.ran == () and again.state.phase == "completed"


def test_delete_old_removes_only_the_listed_files_and_never_while_an_alias_points(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    registry, data = web
    (data / "README.txt").write_text("kept")
    dsm.alias("web", "stable", 1, registry=registry)
    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), run=True, delete_old=True, registry=registry, **FAST
    )
    assert not report.ok or report.state.phase != "completed"
    assert report.state.stage("complete").status == "failed"
    assert "alias(es) stable" in (report.state.stage("complete").error or "")
    assert len(list(data.glob("*.parquet"))) == 4  # nothing deleted while web@stable points at it
    dsm.alias("web", "stable", 2, registry=registry)
    done = resume_cutover(report.id, registry=registry)
    assert done.ok and done.state.phase == "completed"
    deleted = done.state.stage("complete").evidence["deleted"]
    assert deleted["files_removed"] == 4 and deleted["folder_kept"]
    assert sorted(p.name for p in data.iterdir()) == ["README.txt"]  # not dsm's: kept, and the folder too
    assert dsm.show("web@1", registry=registry).status == "retired"


def test_delete_old_keeps_a_listed_file_whose_bytes_changed_though_its_size_did_not(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    """Someone wrote other bytes of the same size over one of web@1's files after the copy: that file is
    no longer what the contract lists, and --delete-old keeps it (before, only the size was compared)."""
    registry, data = web
    dsm.alias("web", "stable", 1, registry=registry)  # holds the complete stage until the alias moves
    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), run=True, delete_old=True, registry=registry, **FAST
    )
    assert report.state.stage("complete").status == "failed"
    changed = sorted(data.glob("*.parquet"))[1]
    size = changed.stat().st_size
    flip_byte(changed)
    assert changed.stat().st_size == size
    dsm.alias("web", "stable", 2, registry=registry)
    done = resume_cutover(report.id, registry=registry)
    assert done.ok and done.state.phase == "completed"
    deleted = done.state.stage("complete").evidence["deleted"]
    assert (deleted["files_removed"], deleted["files_kept_count"]) == (3, 1)
    assert deleted["files_kept"][0]["path"] == changed.name
    assert deleted["files_kept"][0]["reason"].startswith("checksum "), deleted["files_kept"]
    assert sorted(data.glob("*.parquet")) == [changed]


def test_switch_stops_when_someone_moved_the_alias(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, data = web
    report = start_cutover("web@prod", to=str(tmp_path / "out"), through="shadow", registry=registry, **FAST)
    third = dsm.register(str(data), name="web", registry=registry)  # web@3, same files
    dsm.alias("web", "prod", third.version or 0, registry=registry)
    with pytest.raises(InputError, match="someone moved it meanwhile"):
        run_cutover(report.id, registry=registry)
    assert _alias(registry) == 3
    state = cutover_status(report.id, registry=registry).state
    assert state.stage("switch").status == "failed" and state.stage("switch").error_kind == "input"


def test_hooks_get_the_cutover_in_their_environment_and_a_failing_one_stops_it(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    registry, _ = web
    log = tmp_path / "hooks.log"
    hooks = [
        f'echo "$DSM_CUTOVER_ID $DSM_CUTOVER_STAGE $DSM_CUTOVER_DATASET $DSM_CUTOVER_ALIAS" >> {log}',
        'test "$DSM_CUTOVER_STAGE" != copy',
    ]
    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), run=True, on_stage=hooks, registry=registry, **FAST
    )
    assert not report.ok and report.ran == ("plan", "copy") and "hook" in (report.failed or "")
    assert report.state.stage("verify").status == "pending" and report.state.phase == "failed"
    assert log.read_text().splitlines() == [f"{report.id} plan web prod", f"{report.id} copy web prod"]
    again = resume_cutover(report.id, registry=registry)  # the hook runs again, and fails again
    assert not again.ok and again.ran == () and len(log.read_text().splitlines()) == 3


def test_hooks_run_after_every_stage_including_complete(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    log = tmp_path / "stages.log"
    report = start_cutover(
        "web@prod",
        to=str(tmp_path / "out"),
        run=True,
        on_stage=[f"echo $DSM_CUTOVER_STAGE >> {log}"],
        registry=registry,
        **FAST,
    )
    assert report.ok and report.state.phase == "completed"
    assert log.read_text().split() == ["plan", "copy", "verify", "shadow", "switch", "complete"]
    assert all(s.hook == "ok" for s in report.state.stages)


def test_a_held_lease_refuses_a_run_and_force_breaks_it(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    report = start_cutover("web@prod", to=str(tmp_path / "out"), registry=registry, **FAST)
    folder = location(registry).child(f"web/cutovers/{report.id}")
    other = Lease(folder, cutover_id=report.id, owner=Owner(host="elsewhere", pid=4242, user="bob"))
    other.acquire()
    with pytest.raises(ConflictError, match=r"locked by bob@elsewhere pid 4242 until"):
        run_cutover(report.id, through="copy", registry=registry)
    status = cutover_status(report.id, registry=registry)
    assert status.lease_held and status.lease is not None and status.lease.owner.user == "bob"
    taken = run_cutover(report.id, through="copy", force=True, registry=registry)
    assert taken.ran == ("copy",) and taken.broke_lease is not None and taken.broke_lease.owner.pid == 4242
    broken = [r for r in journal_records(registry, "web", report.id) if r["event"] == "lease_broken"]
    assert (
        broken[0]["evidence"]["previous"]["owner"]["user"] == "bob"
        and broken[0]["evidence"]["why"] == "forced"
    )


@pytest.mark.parametrize(
    ("ref", "options", "message"),
    [
        ("web@1", {}, "names no alias"),
        ("web@1", {"alias": "canary"}, "has no alias 'canary'"),
        ("web@prod", {"to": "SOURCE/inner"}, "overlaps the location"),
        ("web@prod", {"to": "s3://key:secret1234@bucket/x"}, "holds a credential"),
        ("web@prod", {"format": "excel"}, "unknown format"),
        ("web@prod", {"shuffle": True}, "exactly one of"),
        ("web@prod", {"num_shards": 2, "seed": 3}, "--seed only applies with --shuffle"),
        ("web@prod", {"on_stage": ["curl 'https://x?sig=abcdefgh12345'"]}, "holds a credential"),
        ("web@prod", {"max_p99": 0}, "max_p99"),
        ("web@prod", {"retain": "soon"}, "retain"),
        ("web@prod", {"through": "teleport"}, "unknown stage"),
    ],
)
def test_bad_starts_create_nothing(
    tmp_path: Path, web: tuple[str, Path], ref: str, options: dict[str, object], message: str
) -> None:
    registry, data = web
    options = {"to": str(tmp_path / "out"), **options}
    if options["to"] == "SOURCE/inner":
        options["to"] = str(data / "inner")
    with pytest.raises(InputError, match=message):
        start_cutover(ref, registry=registry, **{**FAST, **options})  # type: ignore[arg-type]
    assert not (Path(registry) / "web" / "cutovers").exists()


def test_one_open_cutover_per_alias(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    first = start_cutover("web@prod", to=str(tmp_path / "a"), registry=registry, **FAST)
    with pytest.raises(InputError, match=f"cutover {first.id} is already moving web@prod"):
        start_cutover("web@prod", to=str(tmp_path / "b"), registry=registry, **FAST)
    rollback_cutover(first.id, registry=registry)
    second = start_cutover("web@prod", to=str(tmp_path / "b"), registry=registry, **FAST)
    assert [r.id for r in list_cutovers(registry=registry)] == sorted([first.id, second.id])
    assert cutover_status(registry=registry).id == max(first.id, second.id)


def test_a_non_empty_destination_stops_the_cutover_at_plan(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "someone.parquet").write_bytes(b"x")
    report = start_cutover("web@prod", to=str(dest), run=True, registry=registry, **FAST)
    assert not report.ok and report.state.phase == "failed" and "not empty" in (report.failed or "")
    assert report.state.stage("plan").evidence["compatibility"]["ok"] is False
    assert _alias(registry) == 1 and sorted(p.name for p in dest.iterdir()) == ["someone.parquet"]


def test_plan_prints_figures_and_starts_nothing(
    tmp_path: Path, web: tuple[str, Path], small: pa.Table
) -> None:
    registry, _ = web
    dest = tmp_path / "planned"
    plan = plan_cutover("web@prod", to=str(dest), format="jsonl", registry=registry, measure_seconds=0.05)
    assert (
        plan.ok
        and plan.source == "web@1"
        and plan.format == "jsonl"
        and plan.layout["rows"] == small.num_rows
    )
    assert plan.estimate is not None and plan.measured is not None
    assert plan.estimate.total_seconds > 0 and plan.estimate.peak_extra_bytes > 0
    assert plan.measured.sample_rows > 0 and plan.measured.read_bytes_per_s > 0
    assert plan.compatibility["verdict"] == "identical" and plan.compatibility["classifications_kept"] == {
        "text": "pii"
    }
    assert not (Path(registry) / "web" / "cutovers").exists()
    assert not dest.exists() or list(dest.iterdir()) == []  # the sample file was removed
    assert json.loads(json.dumps(plan.to_dict()))["estimate"]["cost"]["total"] == 0.0  # local disk is free


def test_a_breaking_target_stops_at_plan_unless_allowed(
    tmp_path: Path, web: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rewrite keeps the schema, so a breaking verdict is simulated: the gate itself is under test."""
    import dsm.validators.compatibility as compatibility
    from dsm.validators.compatibility import FieldChange

    removed = FieldChange(
        field="lang", change="removed", old="string", new=None, breaking=True, detail="gone"
    )
    monkeypatch.setattr(compatibility, "compare_schemas", lambda old, new: (removed,))
    registry, _ = web
    stopped = start_cutover("web@prod", to=str(tmp_path / "a"), registry=registry, **FAST)
    assert (
        not stopped.ok
        and "not compatible for readers" in (stopped.failed or "")
        and "lang: removed" in (stopped.failed or "")
    )
    assert stopped.state.stage("plan").evidence["compatibility"]["verdict"] == "breaking"
    rollback_cutover(stopped.id, registry=registry)
    allowed = start_cutover(
        "web@prod", to=str(tmp_path / "b"), allow_breaking=True, registry=registry, **FAST
    )
    assert allowed.ok and allowed.state.stage("plan").status == "done"


def test_a_failing_shadow_gate_stops_before_the_switch(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, _ = web
    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), run=True, min_throughput="1000TB/s", registry=registry, **FAST
    )
    assert not report.ok and report.state.stage("shadow").status == "failed" and _alias(registry) == 1
    assert "gate min_throughput" in (report.failed or "")
    gates = report.state.stage("shadow").evidence["bench"]["gates"]
    assert any(g["name"] == "min_throughput" and not g["passed"] for g in gates)


def test_the_row_sample_finds_a_changed_value_and_hides_classified_values(
    tmp_path: Path, web: tuple[str, Path], small: pa.Table
) -> None:
    registry, _ = web
    texts = small.column("text").to_pylist()
    texts[5] = "changed"
    scores = small.column("score").to_pylist()
    scores[6] = -1.0
    changed = small.set_column(1, "text", pa.array(texts)).set_column(2, "score", pa.array(scores))
    write_parquet_shards(tmp_path / "changed", changed, 4)
    other = dsm.register(
        str(tmp_path / "changed"), name="other", registry=registry, schema=sample_schema(small)
    )
    source = dsm.show("web@1", registry=registry)
    result = compare_sample(source, other, rows=small.num_rows)
    assert result.rows_compared == small.num_rows and result.mismatches == 2 and not result.ok
    by_field = {m.field: m for m in result.examples}
    assert by_field["text"].row == 5 and by_field["text"].source == "<hidden: classified field>"
    assert by_field["score"].row == 6 and by_field["score"].target == "-1.0"


def test_cutover_on_memory_storage(small: pa.Table) -> None:
    import uuid

    from tests.conftest import StorageRoot

    root = StorageRoot(kind="memory", url=f"memory://cutover-{uuid.uuid4().hex}")
    write_parquet_shards(StorageRoot(kind="memory", url=root.join("v1")), small, 2)
    registry = root.join("registry")
    dsm.register(root.join("v1"), name="web", registry=registry)
    dsm.alias("web", "prod", 1, registry=registry)
    report = start_cutover(
        "web@prod", to=root.join("v2"), format="arrow", run=True, registry=registry, **FAST
    )
    assert report.ok and Registry(registry).aliases("web")["prod"] == 2
    assert dsm.show("web@prod", registry=registry).format == "arrow"


def test_check_failures_in_rollback_change_nothing(tmp_path: Path, web: tuple[str, Path]) -> None:
    registry, data = web
    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), run=True, registry=registry, **{**FAST, "retain": "7d"}
    )
    flip_byte(data / "part-00001.parquet")
    refused = rollback_cutover(report.id, registry=registry)
    assert not refused.ok and "part-00001.parquet" in (refused.failed or "") and _alias(registry) == 2
    assert refused.state.phase == "paused" and refused.state.rollback_refused is not None
    forced = rollback_cutover(report.id, force=True, registry=registry)
    assert forced.ok and forced.state.phase == "rolled_back" and _alias(registry) == 1


def test_a_stage_that_raises_check_failed_is_journaled(
    tmp_path: Path, web: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, _ = web

    def broken(ctx: object) -> dict[str, object]:
        raise CheckFailed("the copy proved nothing")

    report = start_cutover("web@prod", to=str(tmp_path / "out"), registry=registry, **FAST)
    monkeypatch.setitem(cutover_runner.STAGE_FUNCTIONS, "copy", broken)
    failed = run_cutover(report.id, registry=registry)
    assert failed.failed == "the copy proved nothing" and failed.state.stage("copy").error_kind == "check"


def test_pyarrow_reads_the_target_written_by_the_cutover(
    tmp_path: Path, web: tuple[str, Path], small: pa.Table
) -> None:
    registry, _ = web
    start_cutover("web@prod", to=str(tmp_path / "out"), num_shards=2, run=True, registry=registry, **FAST)
    target = dsm.show("web@prod", registry=registry)
    ids = pa.concat_tables(pq.read_table(Path(target.location) / s.path) for s in target.shards).column("id")
    assert ids.to_pylist() == small.column("id").to_pylist()
