"""The parts of a cutover on their own: state derived from records (pure), the journal, the lease, prices,
the estimate model, durations and the row sample layout."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from dsm.cutover.estimate import Measurements, estimate
from dsm.cutover.journal import CutoverJournal, Owner
from dsm.cutover.lease import LEASE_FILE, Lease
from dsm.cutover.prices import load_prices
from dsm.cutover.sample import sample_runs
from dsm.cutover.state import STAGES, derive_state, parse_duration
from dsm.errors import ConflictError, ContractError, InputError
from dsm.storage import location

SPEC = {"dataset": "web", "alias": "prod", "source_version": 1, "retain_seconds": 3600}


class Records:
    """Builds a journal as dicts, the way CutoverJournal writes them."""

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self.items: list[dict[str, Any]] = []
        self.add("created", spec=spec or SPEC, at="2026-01-01T00:00:00.000Z")

    def add(self, event: str, at: str = "2026-01-01T00:00:01.000Z", **fields: Any) -> Records:
        self.items.append({"seq": len(self.items) + 1, "cutover": "c1", "event": event, "at": at, **fields})
        return self

    def stage(
        self, name: str, *, ok: bool = True, evidence: dict[str, Any] | None = None, at: str = ""
    ) -> Records:
        self.add("stage_started", stage=name)
        end = "stage_finished" if ok else "stage_failed"
        return self.add(
            end, stage=name, evidence=evidence or {"seconds": 1.5}, at=at or "2026-01-01T00:00:02.000Z"
        )


# --------------------------------------------------------------------------------------------- state


def test_a_new_cutover_is_created_with_plan_next() -> None:
    state = derive_state(Records().items)
    assert state.phase == "created" and state.next_stage == "plan"
    assert [s.status for s in state.stages] == ["pending"] * len(STAGES)
    assert state.can_rollback and not state.switched and state.target_version is None


def test_stages_done_in_order_give_next_stage_target_and_seconds() -> None:
    records = Records().stage("plan").stage("copy", evidence={"target_version": 2, "seconds": 3.0})
    state = derive_state(records.items)
    assert state.phase == "paused" and state.next_stage == "verify"
    assert state.target_version == 2
    assert state.stage("copy").seconds == 3.0 and state.stage("copy").attempts == 1


def test_a_started_stage_without_an_end_is_running() -> None:
    records = Records().stage("plan").add("stage_started", stage="copy")
    state = derive_state(records.items)
    assert state.phase == "running" and state.stage("copy").status == "running" and state.next_stage == "copy"


def test_a_failed_stage_then_a_retry_counts_attempts() -> None:
    records = Records().stage("plan").stage("copy", ok=False)
    failed = derive_state(records.items)
    assert failed.phase == "failed" and failed.failed_stage is not None and failed.failed_stage.name == "copy"
    retried = derive_state(records.stage("copy", evidence={"target_version": 2}).items)
    assert retried.phase == "paused" and retried.stage("copy").attempts == 2 and retried.failed_stage is None


def test_switch_gives_switched_and_complete_after_retain() -> None:
    records = Records()
    for name in ("plan", "copy", "verify", "shadow"):
        records.stage(name, evidence={"target_version": 2} if name == "copy" else {})
    state = derive_state(records.stage("switch", at="2026-01-01T10:00:00.000Z").items)
    assert state.switched and state.switched_at == "2026-01-01T10:00:00.000Z"
    assert state.complete_after == "2026-01-01T11:00:00.000Z"  # retain_seconds 3600
    assert state.can_rollback and state.next_stage == "complete"
    done = derive_state(records.stage("complete").items)
    assert done.phase == "completed" and done.terminal and not done.can_rollback


def test_rollback_events() -> None:
    records = Records().stage("plan").add("rollback_started")
    assert derive_state(records.items).phase == "rolling_back"
    state = derive_state(records.add("rollback_finished", evidence={"alias": {"moved": False}}).items)
    assert state.phase == "rolled_back" and state.terminal and not state.switched
    assert state.rollback is not None and state.rollback["evidence"] == {"alias": {"moved": False}}


def test_a_refused_rollback_changes_nothing() -> None:
    records = Records().stage("plan").add("rollback_failed", error="old version does not verify")
    state = derive_state(records.items)
    assert state.phase == "paused" and state.rollback is None
    assert state.rollback_refused is not None and "verify" in state.rollback_refused["error"]


def test_hooks_block_the_next_stage_until_they_pass() -> None:
    records = Records({**SPEC, "on_stage": ["true"]}).stage("plan")
    assert derive_state(records.items).hook_pending == "plan"
    records.add("hook_failed", stage="plan", error="exit 1")
    failed = derive_state(records.items)
    assert (
        failed.phase == "failed" and failed.hook_pending == "plan" and failed.stage("plan").hook == "failed"
    )
    ok = derive_state(records.add("hook_finished", stage="plan").items)
    assert ok.hook_pending is None and ok.phase == "paused" and ok.next_stage == "copy"


def test_last_run_is_remembered_for_resume() -> None:
    records = Records().add("run", through="switch", explicit=True, by={"host": "h", "pid": 1, "user": "u"})
    assert derive_state(records.items).last_run == {
        "through": "switch",
        "explicit": True,
        "at": "2026-01-01T00:00:01.000Z",
        "by": {"host": "h", "pid": 1, "user": "u"},
    }


def test_derivation_is_pure_and_order_independent() -> None:
    records = Records().stage("plan").stage("copy", evidence={"target_version": 7}).items
    assert derive_state(records) == derive_state(list(reversed(records)))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop(1), "expected record 2"),
        (lambda r: r[0].update(event="run"), "first record"),
        (lambda r: r[1].update(event="exploded"), "unknown event"),
        (lambda r: r[1].update(stage="teleport"), "unknown stage"),
        (lambda r: r.__setitem__(1, {**r[2], "seq": 2}), "without having started"),
    ],
)
def test_damaged_journals_are_refused(mutate: Any, message: str) -> None:
    records = Records().stage("plan").items
    mutate(records)
    with pytest.raises(ContractError, match=message):
        derive_state(records)


# -------------------------------------------------------------------------------------------- journal


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_journal_appends_records_that_never_overwrite(tmp_path: Path, kind: str) -> None:
    url = str(tmp_path / "c1") if kind == "local" else f"memory://journal-{uuid.uuid4().hex}"
    owner = Owner(host="h", pid=1, user="u")
    journal = CutoverJournal(location(url), "c1", owner=owner)
    journal.append("created", spec=SPEC)
    journal.append("stage_started", stage="plan")
    other = CutoverJournal(location(url), "c1", owner=owner)
    other.refresh()
    journal.append("stage_finished", stage="plan", evidence={"seconds": 1})
    with pytest.raises(ConflictError, match="record 3 of cutover c1 was written by another process"):
        other.append("stage_failed", stage="plan")
    records = CutoverJournal(location(url), "c1").refresh()
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[2]["event"] == "stage_finished" and records[2]["by"] == owner.to_dict()
    assert records[0]["journal"] == "dsm-cutover-journal-v1"
    assert journal.state().next_stage == "copy"


def test_a_journal_record_that_is_not_json_is_named(tmp_path: Path) -> None:
    journal = CutoverJournal(location(str(tmp_path)), "c1")
    journal.append("created", spec=SPEC)
    (tmp_path / "journal" / "000002.json").write_text("{not json")
    with pytest.raises(ContractError, match=r"000002\.json"):
        CutoverJournal(location(str(tmp_path)), "c1").refresh()


# ---------------------------------------------------------------------------------------------- lease


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _lease(tmp_path: Path, clock: Clock, pid: int, seconds: float = 60) -> Lease:
    owner = Owner(host="host-a", pid=pid, user="ann")
    return Lease(location(str(tmp_path)), cutover_id="c1", seconds=seconds, owner=owner, clock=clock)


def test_a_held_lease_refuses_a_second_holder_naming_the_first(tmp_path: Path) -> None:
    clock = Clock()
    first, second = _lease(tmp_path, clock, 1), _lease(tmp_path, clock, 2)
    assert first.acquire() is None
    with pytest.raises(ConflictError, match=r"locked by ann@host-a pid 1 until 1970-01-12T13:47:40.000Z"):
        second.acquire()
    first.release()
    assert second.acquire() is None  # a released lease is free


def test_an_expired_lease_is_taken_over_and_the_old_holder_learns_it(tmp_path: Path) -> None:
    clock = Clock()
    first, second = _lease(tmp_path, clock, 1), _lease(tmp_path, clock, 2)
    first.acquire()
    clock.now += 61
    broken = second.acquire()
    assert broken is not None and broken.owner.pid == 1 and not broken.held(clock.now)
    with pytest.raises(ConflictError, match="taken over by ann@host-a pid 2"):
        first.renew()
    with pytest.raises(ConflictError):
        first.check()
    second.check()  # still good


def test_force_breaks_a_live_lease(tmp_path: Path) -> None:
    clock = Clock()
    first, second = _lease(tmp_path, clock, 1), _lease(tmp_path, clock, 2)
    first.acquire()
    broken = second.acquire(force=True)
    assert broken is not None and broken.held(clock.now)
    with pytest.raises(ConflictError):
        first.confirm()


def test_renewal_pushes_the_expiry_and_check_renews_a_late_heartbeat(tmp_path: Path) -> None:
    clock = Clock()
    lease = _lease(tmp_path, clock, 1, seconds=30)
    lease.acquire()
    clock.now += 20
    lease.renew()
    info, _ = lease.read()
    assert info is not None and info.expires == clock.now + 30
    clock.now += 40  # the heartbeat fell behind but nobody took the lease: check() renews it
    lease.check()
    info, _ = lease.read()
    assert info is not None and info.expires == clock.now + 30


def test_heartbeat_renews_from_a_thread(tmp_path: Path) -> None:
    lease = Lease(location(str(tmp_path)), cutover_id="c1", seconds=0.3)
    lease.acquire()
    before = json.loads((tmp_path / LEASE_FILE).read_text())["expires"]
    lease.start_heartbeat()
    try:
        for _ in range(100):
            if json.loads((tmp_path / LEASE_FILE).read_text())["expires"] > before:
                break
            import time

            time.sleep(0.02)
    finally:
        lease.release()
    assert json.loads((tmp_path / LEASE_FILE).read_text())["released"] is True


def test_a_broken_lease_file_is_named(tmp_path: Path) -> None:
    (tmp_path / LEASE_FILE).write_text("nonsense")
    with pytest.raises(ContractError, match=r"lease\.json is not a cutover lease"):
        Lease(location(str(tmp_path)), cutover_id="c1").acquire()


# --------------------------------------------------------------------------------------------- prices


def test_builtin_prices_and_lookup_by_protocol() -> None:
    table = load_prices()
    assert table.source == "built-in" and table.currency == "USD" and table.gb == 1_000_000_000
    assert table.store("abfss") == table.store("az") and table.store_name("abfss") == "az"
    assert table.store("file").storage_per_gb_month == 0.0
    assert table.store("hdfs") == table.store("default")


def test_a_price_file_replaces_the_defaults_and_bad_ones_are_named(tmp_path: Path) -> None:
    good = tmp_path / "prices.yaml"
    good.write_text(
        "currency: EUR\nstores:\n  default: {transfer_out_per_gb: 1, transfer_within_per_gb: 0.5,"
        " write_per_gb: 0, read_requests_per_1000: 0, write_requests_per_1000: 0, storage_per_gb_month: 2}\n"
        "  file: {storage_per_gb_month: 3}\n"
    )
    table = load_prices(str(good))
    assert table.currency == "EUR" and table.store("file").storage_per_gb_month == 3.0
    assert table.store("file").transfer_out_per_gb == 1.0  # missing prices come from default
    bad = tmp_path / "bad.yaml"
    bad.write_text("stores:\n  default: {storage_per_gb_month: 1}\n")
    with pytest.raises(ContractError, match=r"bad.yaml: field stores.default.transfer_out_per_gb: expected"):
        load_prices(str(bad))
    bad.write_text(good.read_text().replace("storage_per_gb_month: 3", "storage_per_gb_month: -3"))
    with pytest.raises(ContractError, match=r"bad.yaml: field stores.file.storage_per_gb_month: .* got -3"):
        load_prices(str(bad))
    with pytest.raises(ContractError, match="does not exist"):
        load_prices(str(tmp_path / "missing.yaml"))


# ------------------------------------------------------------------------------------------- estimate


def _measured() -> Measurements:
    # read 100 MB/s; decode, encode, fingerprint 200 MB/s of source bytes; write 50 MB/s; target = 2x source
    return Measurements(
        read_bytes_per_s=100e6,
        sample_rows=1000,
        sample_source_bytes=2_000_000,
        sample_target_bytes=4_000_000,
        decode_seconds=0.01,
        encode_seconds=0.01,
        fingerprint_seconds=0.01,
        write_seconds=0.08,
    )


def test_estimate_follows_the_documented_model() -> None:
    prices = load_prices()
    figures = estimate(
        source_sizes=[1_000_000_000] * 2,
        target_sizes=[2_000_000_000] * 2,
        source_protocol="s3",
        target_protocol="gs",
        measured=_measured(),
        prices=prices,
        workers=2,
        shadow_seconds=5,
        retain_seconds=30 * 86400,
        delete_old=True,
    )
    S, T = 2e9, 4e9
    copy = (2 * S / 100e6 + 2 * S / 200e6 + S / 200e6 + T / 50e6 + T / 100e6 + S / 200e6) / 2
    assert figures.seconds["copy"] == pytest.approx(copy)
    assert figures.seconds["verify"] == pytest.approx((T / 100e6 + S / 200e6 + S / 200e6) / 2)
    assert figures.seconds["shadow"] == 10
    sampled = estimate(
        source_sizes=[1_000_000_000] * 2,
        target_sizes=[2_000_000_000] * 2,
        source_protocol="s3",
        target_protocol="gs",
        measured=_measured(),
        prices=prices,
        workers=2,
        shadow_seconds=5,
        sample_rows=100,
    )
    assert sampled.seconds["shadow"] == pytest.approx(10 + T / 100e6 + S / 200e6)  # 4 runs touch both files
    assert figures.target_bytes == 4_000_000_000 and figures.peak_extra_bytes == 4_000_000_000
    lines = {line.item: line for line in figures.cost}
    transfer = lines["transfer out of the source"]
    assert transfer.unit_price == prices.store("s3").transfer_out_per_gb  # s3 -> gs: another kind of store
    assert transfer.quantity == pytest.approx(figures.bytes_read_source / 1e9)
    assert figures.requests["target_put"] == 2 * 239  # ceil(2e9 / 8 MiB) per file
    storage = lines["both copies stored until complete"]
    assert storage.quantity == pytest.approx(4 * (figures.total_seconds + 30 * 86400) / (30 * 86400))
    assert figures.total_cost == pytest.approx(sum(line.cost for line in figures.cost))
    assert figures.storage_per_month_after == pytest.approx(4 * prices.store("gs").storage_per_gb_month)


def test_estimate_within_one_kind_of_store_and_keeping_the_old_copy() -> None:
    prices = load_prices()
    figures = estimate(
        source_sizes=[10**9],
        target_sizes=[10**9],
        source_protocol="s3",
        target_protocol="s3a",
        measured=_measured(),
        prices=prices,
        workers=8,
        shuffle=True,
    )
    assert figures.parallelism == 1  # one target file
    transfer = next(line for line in figures.cost if line.item == "transfer out of the source")
    assert transfer.unit_price == prices.store("s3").transfer_within_per_gb
    assert figures.peak_extra_bytes == 2 * 10**9  # the shuffle's spill beside the target
    assert figures.extra_bytes_kept == 10**9 and any("old copy is kept" in n for n in figures.notes)


# ----------------------------------------------------------------------------------------------- misc


@pytest.mark.parametrize(
    ("text", "seconds"), [("7d", 604800), ("12h", 43200), ("30m", 1800), ("45", 45), (0, 0)]
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "-1d", "7 days"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InputError, match="retain"):
        parse_duration(text)


def test_sample_runs_are_spread_and_sized() -> None:
    assert sample_runs(3000, 200) == [(0, 50), (750, 800), (1500, 1550), (2250, 2300)]
    assert sample_runs(10, 100) == [(0, 10)]
    assert sample_runs(10, 9) == [(0, 2), (2, 4), (5, 7), (7, 9)]
    assert sample_runs(0, 10) == []
