"""Where dsm writes and what it deletes: destinations that overlap a registered location are refused, shard
paths stay below their location, one rewrite at a time writes a destination, and a deletion keeps every file
another version lists (compared as canonical locations: a parent folder, a symlink, another spelling)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.commands.cutover import start_cutover
from dsm.contract import Contract
from dsm.errors import ConflictError, ContractError, FormatError, InputError
from dsm.formats import get_format
from dsm.registry import Registry
from dsm.rewrite.journal import CLAIM_FILE, DestinationClaim
from dsm.storage import location
from dsm.storage.lease import Lease, Owner
from tests.conftest import StorageRoot, write_parquet_shards

from .cutover_support import FAST, make_dataset

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def _hashes(root: Path, *, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """sha256 of every file under ``root`` (following no symlinks), but those under ``skip``."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file() or any(path.is_relative_to(s) for s in skip):
            continue
        out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def small(sample_table: pa.Table) -> pa.Table:
    return sample_table.slice(0, 400)


# --------------------------------------------------------------------------------- deleting: --delete-old


def test_delete_old_keeps_what_a_parent_folder_dataset_and_a_symlinked_one_list(
    tmp_path: Path, small: pa.Table
) -> None:
    """web@1 at data/web-v1; ``parent`` registered from data/ (two of its files, by a glob), ``linked``
    through a symlink to the folder (a third file). Only the fourth file is web@1's alone: only it goes."""
    registry, folder = make_dataset(tmp_path / "data", small)  # data/web-v1, registry data/registry
    registry = str(tmp_path / "registry")
    os.rename(tmp_path / "data" / "registry", registry)
    dsm.register(str(tmp_path / "data") + "/web-*/part-0000[01].parquet", name="parent", registry=registry)
    (tmp_path / "link").symlink_to(folder)
    dsm.register(str(tmp_path / "link" / "part-00002.parquet"), name="linked", registry=registry)
    before = _hashes(tmp_path, skip=(Path(registry),))

    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), run=True, delete_old=True, registry=registry, **FAST
    )
    assert report.ok and report.state.phase == "completed", report.failed
    deleted = report.state.stage("complete").evidence["deleted"]
    assert deleted["files_removed"] == 1 and deleted["files_kept_count"] == 3
    kept = {k["path"]: k["reason"] for k in deleted["files_kept"]}
    assert "parent@1" in kept["part-00000.parquet"] and "linked@1" in kept["part-00002.parquet"]
    after = _hashes(tmp_path, skip=(Path(registry), tmp_path / "out"))
    gone = {"data/web-v1/part-00003.parquet"}
    assert set(before) - set(after) == gone and {k: before[k] for k in after} == after
    for ref in ("parent@1", "linked@1"):
        assert dsm.verify(ref, deep=True, registry=registry).ok, ref


# ------------------------------------------------------------------------- destinations: refused, exit 2


@pytest.mark.parametrize(
    "where",
    ["same", "subfolder", "parent", "symlink", "dotted"],
)
def test_a_destination_overlapping_a_registered_location_is_refused_before_writing(
    tmp_path: Path, small: pa.Table, where: str
) -> None:
    registry, _ = make_dataset(tmp_path, small)
    other = tmp_path / "other"
    write_parquet_shards(other, small, 1)
    dsm.register(str(other), name="other", registry=registry)
    (tmp_path / "alias-of-other").symlink_to(other)
    dest = {
        "same": str(other),
        "subfolder": str(other / "resharded"),
        "parent": str(tmp_path),
        "symlink": str(tmp_path / "alias-of-other" / "v2"),
        "dotted": str(tmp_path / "x" / ".." / "other" / "."),
    }[where]
    before = _hashes(tmp_path)
    out = cli("reshard", "web", dest, "--num-shards", "2", "--registry", registry)
    assert out.exit_code == 2, out.output
    assert "overlaps the location of" in out.stderr and "nothing was written" in out.stderr
    with pytest.raises(InputError, match=r"overlaps the (location of|registry)"):
        start_cutover("web@prod", to=dest, registry=registry, **FAST)
    assert _hashes(tmp_path) == before and not Path(dest, "resharded").exists()
    assert Registry(registry).versions("web") == [1]


def test_a_single_file_dataset_claims_that_file_not_its_folder(tmp_path: Path, small: pa.Table) -> None:
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "files", small, 2)
    one = dsm.register(str(tmp_path / "files" / "part-00000.parquet"), name="one", registry=registry)
    assert [s.path for s in one.shards] == ["part-00000.parquet"]
    assert dsm.verify("one", registry=registry).summary == {"ok": 1}  # its sibling is not "extra"
    result = dsm.reshard("one", str(tmp_path / "files" / "one-2"), num_shards=2, registry=registry)
    assert result.dataset == "one@2"  # a folder beside the file: nothing of one@1 is there
    with pytest.raises(InputError, match="overlaps the location of one@1"):
        dsm.reshard("one@1", str(tmp_path / "files"), num_shards=3, overwrite=True, registry=registry)


def test_a_destination_in_the_registry_is_refused(tmp_path: Path, small: pa.Table) -> None:
    registry, _ = make_dataset(tmp_path, small)
    with pytest.raises(InputError, match="overlaps the registry"):
        dsm.convert_format("web", registry + "/copies", format="jsonl", registry=registry)


def test_a_retired_version_whose_files_are_gone_no_longer_claims_its_folder(
    tmp_path: Path, small: pa.Table
) -> None:
    registry, _ = make_dataset(tmp_path, small)
    dest = str(tmp_path / "out")
    report = start_cutover("web@prod", to=dest, through="copy", registry=registry, **FAST)
    dsm.rollback_cutover(report.id, discard_target=True, registry=registry)
    assert dsm.show("web@2", registry=registry).status == "retired"
    again = dsm.reshard("web@1", dest, num_shards=2, registry=registry)  # web@2's data was discarded
    assert again.dataset == "web@3" and dsm.verify("web@3", deep=True, registry=registry).ok


def test_rollback_discards_only_the_files_dsm_wrote_that_no_other_version_lists(
    tmp_path: Path, small: pa.Table
) -> None:
    """The copy web@2 at out/: ``peek`` registered one of its files through a symlink, a user put two files
    of their own there and replaced a third; the discard removes only the copy's untouched files."""
    registry, _ = make_dataset(tmp_path, small)
    out = tmp_path / "out"
    report = start_cutover("web@prod", to=str(out), through="copy", registry=registry, **FAST)
    copied = [s.path for s in dsm.show("web@2", registry=registry).shards]
    (tmp_path / "peek-link").symlink_to(out)
    dsm.register(str(tmp_path / "peek-link" / copied[0]), name="peek", registry=registry)
    write_parquet_shards(out / "mine", small, 1)  # the user's own files, beside dsm's
    (out / "notes.txt").write_text("mine")
    replaced = out / copied[1]
    replaced.write_bytes(replaced.read_bytes() + b"appended by someone")
    before = _hashes(tmp_path, skip=(Path(registry),))

    back = dsm.rollback_cutover(report.id, discard_target=True, registry=registry)
    assert back.ok and back.state.phase == "rolled_back"
    assert any("2 file(s)" in n and "were kept" in n for n in back.notes), back.notes
    after = _hashes(tmp_path, skip=(Path(registry),))
    assert set(before) - set(after) == {f"out/{p}" for p in copied[2:]}
    assert {k: before[k] for k in after} == after  # every other file as it was
    assert dsm.verify("peek@1", deep=True, registry=registry).ok and dsm.verify("web@1", registry=registry).ok
    assert sorted(f.name for f in out.iterdir()) == sorted([*copied[:2], "mine", "notes.txt"])


# ------------------------------------------------------------------------------------ paths stay inside


@pytest.mark.parametrize("path", ["../outside.parquet", "/etc/passwd", "a/../../b.parquet", "C:/x.parquet"])
def test_a_shard_path_that_leaves_its_location_is_refused_at_read_and_publish(
    tmp_path: Path, path: str
) -> None:
    body = {
        "dsm": 1,
        "name": "evil",
        "location": str(tmp_path / "data"),
        "format": "parquet",
        "schema": {"fields": [{"name": "id", "type": "int64"}]},
        "shards": [{"path": "ok.parquet", "bytes": 1}, {"path": path, "bytes": 1}],
    }
    with pytest.raises(ContractError, match=r"shards\[1\]\.path.*(\.\.|absolute)"):
        Contract.from_dict(body)
    file = tmp_path / "evil.yaml"
    file.write_text(json.dumps(body))
    out = cli("verify", str(file), "--registry", str(tmp_path / "registry"))
    assert out.exit_code == 2 and "shards[1].path" in out.stderr
    built = Contract.from_dict({**body, "shards": body["shards"][:1]}).evolve(
        shards=(dsm.Shard(path=path, bytes=1),)
    )
    with pytest.raises(ContractError, match="shards"):
        Registry(str(tmp_path / "registry")).publish(built)
    with pytest.raises(ContractError, match=r"shards\[0\]\.path"):
        dsm.verify(built)  # a contract made in Python, never loaded, is checked too
    with (
        pytest.raises(InputError, match=r"would leave its location|is absolute"),
        location(str(tmp_path / "data")).open(path),  # and storage refuses the path itself
    ):
        pass
    assert not (tmp_path / "registry").exists()


def _tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["../../escape.txt", "/abs/sample.txt", "a/../../b.txt"])
def test_webdataset_member_names_that_leave_the_archive_are_refused(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "wds"
    folder.mkdir()
    (folder / "shard-0.tar").write_bytes(_tar({"ok.txt": b"fine", name: b"evil"}))
    out = cli("register", str(folder), "--name", "wds", "--registry", str(tmp_path / "registry"))
    assert out.exit_code == 2 and "shard-0.tar" in out.stderr and name in out.stderr, out.output
    fmt = get_format("webdataset")
    writer = fmt.open_writer(io.BytesIO(), pa.schema([("__key__", pa.string()), ("txt", pa.string())]))
    key = name.rsplit(".", 1)[0]
    with pytest.raises(FormatError, match="inside their archive"):
        writer.write_batch(pa.record_batch({"__key__": [key], "txt": ["x"]}))


# --------------------------------------------------------------------- one rewrite at a time per folder


def test_a_second_rewrite_into_a_busy_destination_gets_exit_3_and_touches_nothing(
    storage: StorageRoot, small: pa.Table, registry_url: str
) -> None:
    source = storage.join("source")
    write_parquet_shards(StorageRoot(kind=storage.kind, url=source, options=storage.options), small, 2)
    dsm.register(source, name="web", registry=registry_url, storage_options=storage.options)
    dest = location(storage.join("dest"), storage.options)
    # another process (on another host) writes there now: its claim, and a temporary file of its own
    other = Lease(dest, CLAIM_FILE, what="dest", owner=Owner(host="elsewhere", pid=4242, user="bob"))
    other.acquire()
    dest.write_bytes_atomic(".dsm-tmp-0123456789ab-part-00000-of-00002.parquet", b"theirs, half written")
    before = {f.path: dest.read_bytes(f.path) for f in dest.list_files()}

    with pytest.raises(ConflictError, match=r"another rewrite is writing .*dest.*bob@elsewhere"):
        dsm.reshard("web", dest.url, num_shards=2, registry=registry_url, storage_options=storage.options)
    assert {f.path: dest.read_bytes(f.path) for f in dest.list_files()} == before
    assert dest.read_bytes(".dsm-tmp-0123456789ab-part-00000-of-00002.parquet") == b"theirs, half written"

    other.release()  # the other run finished (failed): this one now writes, and leaves only data behind
    done = dsm.reshard("web", dest.url, num_shards=2, registry=registry_url, storage_options=storage.options)
    assert done.dataset == "web@2"
    assert sorted(f.path for f in dest.list_files()) == [s.path for s in done.contract.shards]


def test_the_claim_of_a_dead_process_is_stale(tmp_path: Path, small: pa.Table) -> None:
    registry, _ = make_dataset(tmp_path, small, shards=2)
    dest = location(str(tmp_path / "out"))
    dead = Lease(
        dest, CLAIM_FILE, what="dest", owner=Owner(host=os.uname().nodename, pid=2**22 + 7, user="x")
    )
    dead.acquire()
    out = cli("reshard", "web", dest.url, "--num-shards", "2", "--registry", registry)
    assert out.exit_code == 0, out.output  # its pid runs no more on this host: taken at once
    expired = Lease(location(str(tmp_path / "out2")), CLAIM_FILE, what="d", seconds=0.05)
    expired.owner = Owner(host="elsewhere", pid=1, user="bob")
    expired.acquire()
    time.sleep(0.1)
    claim = DestinationClaim(location(str(tmp_path / "out2"))).take()
    assert claim.held
    claim.remove()
    assert not (tmp_path / "out2" / CLAIM_FILE).exists()


def test_a_claim_lost_in_a_race_names_the_winner_as_a_claim_found_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes read "no claim" at the same moment and both write theirs with a compare-and-swap: the
    one that loses is told who won, in the words it would read had it come a moment later."""
    import dsm.storage.lease as lease_module

    dest = location(str(tmp_path / "out"))
    winner = DestinationClaim(dest)
    winner.owner = Owner(host="elsewhere", pid=4242, user="bob")
    swap = lease_module.compare_and_swap

    def after_the_winner(*args: Any, **kwargs: Any) -> None:
        monkeypatch.setattr(lease_module, "compare_and_swap", swap)
        winner.acquire()  # between the loser's read and its swap
        swap(*args, **kwargs)

    monkeypatch.setattr(lease_module, "compare_and_swap", after_the_winner)
    with pytest.raises(ConflictError, match=r"another rewrite is writing .*out.*bob@elsewhere"):
        DestinationClaim(dest).acquire()
    assert winner.held


def test_two_rewrites_at_once_one_writes_the_other_is_refused(tmp_path: Path, small: pa.Table) -> None:
    import subprocess
    import sys

    registry, _ = make_dataset(tmp_path, small, shards=4)
    dest = str(tmp_path / "out")
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dsm",
                "reshard",
                "web@1",
                dest,
                "--num-shards",
                "4",
                "--registry",
                registry,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = [(run.wait(timeout=300), run.stderr.read() if run.stderr else "") for run in runs]
    codes = sorted(code for code, _ in outcomes)
    # whichever came second: refused with exit 3 naming the busy destination, or (if the first had already
    # finished) told that this same rewrite is published; never a missing temporary file
    assert codes in ([0, 0], [0, 3]), outcomes
    for code, err in outcomes:
        assert "No such file" not in err and "Traceback" not in err, err
        if code == 3:
            assert "another rewrite is writing" in err
    assert (
        Registry(registry).versions("web") == [1, 2] and dsm.verify("web@2", deep=True, registry=registry).ok
    )


def _before_the_claim(monkeypatch: pytest.MonkeyPatch, other: Callable[[], Any]) -> list[bool]:
    """Run ``other`` (another rewrite, start to end) the first time a rewrite is about to take its claim,
    after it has judged the destination; the list returned says whether it ran."""
    take, raced = DestinationClaim.take, []

    def in_between(self: DestinationClaim) -> DestinationClaim:
        if not raced:
            raced.append(True)
            other()
        return take(self)

    monkeypatch.setattr(DestinationClaim, "take", in_between)
    return raced


def test_a_rewrite_the_same_plan_published_while_it_took_the_claim_is_reported_published(
    tmp_path: Path, small: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of two identical rewrites, the second looks for a published version of the plan, finds none, and
    takes the claim; if the first publishes and lets go of the claim in between, the second finds the
    version under the claim: published already, nothing rewritten (not "not empty: it holds files dsm did
    not write", exit 2, as the two processes of the test above once answered)."""
    registry, _ = make_dataset(tmp_path, small, shards=4)
    dest = str(tmp_path / "out")
    same = partial(dsm.reshard, "web@1", dest, num_shards=4, registry=registry)
    raced = _before_the_claim(monkeypatch, same)
    second = same()
    assert raced and second.already_published and second.units_written == 0
    assert second.dataset == "web@2" and Registry(registry).versions("web") == [1, 2]
    assert not location(dest).exists(CLAIM_FILE) and dsm.verify("web@2", deep=True, registry=registry).ok


def test_a_rewrite_refuses_a_destination_another_published_to_while_it_took_the_claim(
    tmp_path: Path, small: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The destination is judged again under the claim: a version of another plan published there in
    between is never written among, even with --overwrite (which would replace its files of the same
    names), and its files stay as they were."""
    registry, _ = make_dataset(tmp_path, small, shards=4)
    dest = str(tmp_path / "out")
    other = partial(dsm.reshard, "web@1", dest, num_shards=4, name="other", registry=registry)
    raced = _before_the_claim(monkeypatch, other)
    with pytest.raises(InputError, match=r"overlaps the location of other@1"):
        dsm.reshard("web@1", dest, num_shards=4, seed=3, shuffle=True, overwrite=True, registry=registry)
    assert raced and Registry(registry).versions("web") == [1] and not location(dest).exists(CLAIM_FILE)
    assert dsm.verify("other@1", deep=True, registry=registry).ok
