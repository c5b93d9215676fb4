"""The cutover's own tests on every store (local disk, ``memory://``, S3 on a moto server, Azure Blob on
Azurite), one body each, like the register and verify tests: every stage with ``--delete-old``, a corrupt
target then rollback, and a crash in the copy then resume.

The registry is on local disk; the data, the target and the other dataset are on the store. Changes behind
dsm's back go through the store's own API (``tests/servers.py``). ``kill -9`` runs the CLI as a subprocess on
local disk and the object stores; a ``memory://`` store lives in one process and dies with it, so there the
crash is an interrupt (Ctrl-C at the same point) and the resume runs in the same process.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest

import dsm
from dsm import _testing
from dsm.commands.cutover import resume_cutover, rollback_cutover, run_cutover, start_cutover
from dsm.registry import Registry
from dsm.storage import location
from tests.conftest import StorageRoot, write_parquet_shards

from .cutover_support import FAST, FAST_CLI, sample_schema
from .servers import raw_put, raw_read

SHARDS = ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]


@pytest.fixture
def small(sample_table: pa.Table) -> pa.Table:
    return sample_table.slice(0, 300)


def _source(storage: StorageRoot, table: pa.Table, registry: str) -> None:
    v1 = StorageRoot(kind=storage.kind, url=storage.join("v1"), options=storage.options)
    write_parquet_shards(v1, table, 3)
    opts = storage.options
    dsm.register(v1.url, name="web", registry=registry, schema=sample_schema(table), storage_options=opts)
    dsm.alias("web", "prod", 1, registry=registry)


def _snapshot(storage: StorageRoot) -> dict[str, str]:
    """sha256 of every file under the store's root, read with the store's own API."""
    listed = location(storage.url, storage.options).list_files()
    return {f.path: hashlib.sha256(raw_read(storage, f.path)).hexdigest() for f in listed}


def test_every_stage_then_delete_old_keeps_what_another_dataset_lists(
    storage: StorageRoot, small: pa.Table, registry_url: str
) -> None:
    _source(storage, small, registry_url)
    opts = storage.options
    # a second dataset, registered from the parent folder (a glob there), lists one of web@1's files
    dsm.register(
        storage.join("*/part-00001.parquet"), name="parent", registry=registry_url, storage_options=opts
    )
    before = _snapshot(storage)
    dest = storage.url.rstrip("/") + "-v2"
    report = start_cutover(
        "web@prod",
        to=dest,
        format="jsonl",
        run=True,
        delete_old=True,
        registry=registry_url,
        storage_options=opts,
        **FAST,
    )
    assert report.ok and report.ran == ("plan", "copy", "verify", "shadow", "switch", "complete"), (
        report.failed
    )
    assert report.state.phase == "completed" and Registry(registry_url).aliases("web")["prod"] == 2
    deleted = report.state.stage("complete").evidence["deleted"]
    assert (deleted["files_removed"], deleted["files_kept_count"]) == (2, 1)
    assert deleted["files_kept"][0]["path"] == "part-00001.parquet"
    assert "parent@1" in deleted["files_kept"][0]["reason"]
    after = _snapshot(storage)
    assert set(before) - set(after) == {"v1/part-00000.parquet", "v1/part-00002.parquet"}
    assert all(after[path] == digest for path, digest in before.items() if path in after)
    target = dsm.show("web@prod", registry=registry_url)
    listed = sorted(f.path for f in location(dest, opts).list_files())
    assert listed == sorted(s.path for s in target.shards)  # data alone: no journal, claim or temporary
    assert dsm.verify("parent@1", deep=True, registry=registry_url, storage_options=opts).ok
    assert report.state.stage("verify").evidence["verify"]["ok"]  # the target's deep verify, by the cutover
    assert dsm.show("web@1", registry=registry_url).status == "retired"


def test_delete_old_keeps_a_file_overwritten_with_other_bytes_of_the_same_size_where_it_can_tell(
    storage: StorageRoot, small: pa.Table, registry_url: str
) -> None:
    """After the switch, other bytes of the same size are written over one of web@1's files with the
    store's own API. That file is kept where dsm can tell it is no longer the one listed: by its bytes on
    local disk, by the store's full-object checksum where the contract recorded one. Elsewhere the size is
    all that is compared, and the stage says how many files it deleted so."""
    _source(storage, small, registry_url)
    opts = storage.options
    dest = storage.url.rstrip("/") + "-v2"
    report = start_cutover(
        "web@prod",
        to=dest,
        through="switch",
        delete_old=True,
        registry=registry_url,
        storage_options=opts,
        **FAST,
    )
    assert report.ok and report.state.stage("switch").status == "done", report.failed
    rel = f"v1/{SHARDS[1]}"
    original = raw_read(storage, rel)
    raw_put(storage, rel, original[:100] + bytes([original[100] ^ 0xFF]) + original[101:])
    listed = {s.path: s for s in dsm.show("web@1", registry=registry_url).shards}[SHARDS[1]]
    done = run_cutover(report.id, registry=registry_url, storage_options=opts)
    assert done.ok and done.state.phase == "completed", done.failed
    deleted = done.state.stage("complete").evidence["deleted"]
    tells = storage.kind == "local" or listed.server_checksum is not None
    if tells:
        assert (deleted["files_removed"], deleted["files_kept_count"]) == (2, 1), deleted
        assert deleted["files_kept"][0]["path"] == SHARDS[1]
        assert raw_read(storage, rel) != original  # the other bytes are still there
    else:
        assert (deleted["files_removed"], deleted["files_compared_by_size_only"]) == (3, 3), deleted
        assert any("by size alone" in note for note in done.notes), done.notes
    if storage.kind == "local":
        assert deleted["files_compared_by_size_only"] == 0


def test_a_corrupt_target_fails_verify_and_rollback_discards_only_the_copy(
    storage: StorageRoot, small: pa.Table, registry_url: str
) -> None:
    _source(storage, small, registry_url)
    opts = storage.options
    before = _snapshot(storage)
    report = start_cutover(
        "web@prod", to=storage.join("v2"), through="copy", registry=registry_url, storage_options=opts, **FAST
    )
    assert report.ran == ("plan", "copy")
    shard = dsm.show("web@2", registry=registry_url).shards[1].path
    data = raw_read(storage, f"v2/{shard}")
    raw_put(storage, f"v2/{shard}", data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    failed = run_cutover(report.id, registry=registry_url, storage_options=opts)
    assert (
        not failed.ok and shard in (failed.failed or "") and failed.state.stage("verify").status == "failed"
    )
    assert Registry(registry_url).aliases("web")["prod"] == 1
    back = rollback_cutover(report.id, discard_target=True, registry=registry_url, storage_options=opts)
    assert (
        back.ok and back.state.phase == "rolled_back" and Registry(registry_url).aliases("web")["prod"] == 1
    )
    assert _snapshot(storage) == before  # the copy is gone, all of it; the source is as it was
    assert dsm.verify("web@1", deep=True, registry=registry_url, storage_options=opts).ok


def _crash_in_copy_and_resume(storage: StorageRoot, registry: str) -> str:
    """Start the cutover, crash it after the copy journaled one unit; return the cutover id."""
    if storage.kind == "memory":
        return _interrupt_in_process(storage, registry)
    protocol = {"s3": "s3", "azure": "az"}.get(storage.kind)
    env = {**os.environ, _testing.KILL_ENV: "copy:1"}
    if protocol is not None:
        env["DSM_STORAGE_OPTIONS"] = json.dumps({protocol: storage.options})
    command = [sys.executable, "-m", "dsm", "cutover", "start", "web@prod", "--to", storage.join("v2")]
    killed = subprocess.run(
        [*command, "--run", *FAST_CLI, "--registry", registry],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (cutover_id,) = [c.id for c in dsm.list_cutovers(registry=registry, storage_options=storage.options)]
    return cutover_id


def _interrupt_in_process(storage: StorageRoot, registry: str) -> str:
    def interrupt() -> None:
        raise KeyboardInterrupt

    mp = pytest.MonkeyPatch()
    mp.setattr(_testing, "_ARMED", ("copy", "1"))
    mp.setattr(_testing, "_units_journaled", 0)
    mp.setattr(_testing, "_kill", interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            start_cutover(
                "web@prod",
                to=storage.join("v2"),
                run=True,
                registry=registry,
                storage_options=storage.options,
                **FAST,
            )
    finally:
        mp.undo()
    (cutover_id,) = [c.id for c in dsm.list_cutovers(registry=registry, storage_options=storage.options)]
    return cutover_id


def test_a_crash_in_the_copy_then_resume_completes_with_the_same_rows(
    storage: StorageRoot, small: pa.Table, registry_url: str
) -> None:
    _source(storage, small, registry_url)
    opts = storage.options
    cutover_id = _crash_in_copy_and_resume(storage, registry_url)
    assert Registry(registry_url).aliases("web")["prod"] == 1  # readers never saw the unfinished copy
    resumed = resume_cutover(cutover_id, force=True, registry=registry_url, storage_options=opts)
    assert resumed.ok and resumed.state.phase == "completed", resumed.failed
    copy: dict[str, Any] = resumed.state.stage("copy").evidence
    assert copy["units_resumed"] >= 1 and copy["units_resumed"] + copy["units_written"] == 3
    new, old = dsm.show("web@prod", registry=registry_url), dsm.show("web@1", registry=registry_url)
    assert new.version == 2 and new.fingerprint == old.fingerprint
    assert resumed.state.stage("verify").evidence["verify"]["ok"]  # deep verify of the resumed copy
    listed = sorted(f.path for f in location(storage.join("v2"), opts).list_files())
    assert listed == [s.path for s in new.shards]  # no journal, no claim, no temporary file left
