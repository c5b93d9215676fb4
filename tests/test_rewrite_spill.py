"""``--spill-dir``: a shuffled reshard's pass-1 files in a folder of their own (one every worker of a cluster
reaches), the same output bytes as with the default (under the destination), and no spill file left once
the new version is published, even after an interrupted run that used another spill folder."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dsm import _testing
from dsm.cli.app import app
from dsm.commands.register import register
from dsm.commands.rewrite import reshard
from dsm.demo import make_sample_table
from dsm.errors import InputError
from dsm.rewrite import execute, plan

from .conftest import write_parquet_shards

runner = CliRunner()


class Crash(Exception):
    """Stands for a SIGKILL at a crash point: what was written stays, nothing after it runs."""


@pytest.fixture
def registry(tmp_path: Path, sample_table: pa.Table) -> str:
    url = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "src", sample_table, 4)
    register(str(tmp_path / "src"), name="web", registry=url)
    return url


def _record_buckets(path: Path) -> list[int]:
    """The bucket of each IPC batch of a spill file, from its pass-1 journal record."""
    return [int(b) for b in json.loads(path.read_text())["buckets"]]


def _data(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.glob("part-*")}


def test_a_spill_dir_gives_the_same_bytes_and_is_emptied_when_published(
    registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shuffle = {"num_shards": 3, "shuffle": True, "seed": 7, "registry": registry}
    default = reshard("web@1", str(tmp_path / "default"), **shuffle)

    def crash() -> None:
        raise Crash

    # An interrupted run: pass 1 is done (4 spill files in the first spill folder), pass 2 has not started.
    monkeypatch.setattr(_testing, "_ARMED", ("units", "4"))
    monkeypatch.setattr(_testing, "_units_journaled", 0)
    monkeypatch.setattr(_testing, "_kill", crash)
    with pytest.raises(Crash):
        reshard("web@1", str(tmp_path / "out"), spill_dir=str(tmp_path / "spill-a"), **shuffle)
    monkeypatch.setattr(_testing, "_ARMED", None)
    spilled = list((tmp_path / "spill-a").rglob("_scatter-*.arrow"))
    assert len(spilled) == 4 and spilled[0].parent.name.startswith("dsm-spill-")
    assert not list((tmp_path / "out").rglob("*.arrow"))  # nothing spilled under the destination
    assert len(list((tmp_path / "out" / "_dsm_rewrite").glob("_scatter-*.json"))) == 4  # the records are

    # Resumed with another spill folder: the first one's files are this plan's, and go.
    resumed = reshard("web@1", str(tmp_path / "out"), spill_dir=str(tmp_path / "spill-b"), **shuffle)
    assert any("pass-1 files an interrupted run left" in note for note in resumed.notes)
    assert _data(tmp_path / "out") == _data(tmp_path / "default")
    assert [s.checksum for s in resumed.contract.shards] == [s.checksum for s in default.contract.shards]
    for folder in ("spill-a", "spill-b", "out"):
        assert not list((tmp_path / folder).rglob("*.arrow")), folder
    assert not (tmp_path / "out" / "_dsm_rewrite").exists()


def test_a_spill_dir_is_refused_where_it_cannot_work(registry: str, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    with pytest.raises(InputError, match="--spill-dir only applies with --shuffle"):
        reshard("web@1", out, num_shards=2, spill_dir=str(tmp_path / "spill"), registry=registry)
    shuffle = {"num_shards": 2, "shuffle": True, "registry": registry}
    with pytest.raises(InputError, match="inside the location of web@1"):
        reshard("web@1", out, spill_dir=str(tmp_path / "src" / "tmp"), **shuffle)
    with pytest.raises(InputError, match="inside the destination"):
        reshard("web@1", out, spill_dir=str(tmp_path / "out" / "spill"), **shuffle)
    assert not (tmp_path / "out").exists()  # refused before anything was written
    result = runner.invoke(
        app, ["reshard", "web@1", out, "--num-shards", "2", "--spill-dir", "x", "--registry", registry]
    )
    assert result.exit_code == 2 and "--spill-dir only applies with --shuffle" in result.stderr
    # A folder that holds the source and the destination is fine: the files go to a folder of their own.
    done = reshard("web@1", out, spill_dir=str(tmp_path), **shuffle)
    assert done.rows == 3000 and not list(tmp_path.glob("dsm-spill-*/*.arrow"))


def test_spill_pieces_do_not_grow_with_source_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scatter unit writes each bucket's rows as one piece per buffer, not one per source batch (row
    groups of 40 rows here, cut into 6 buckets); the output bytes do not depend on how pass 1 buffered."""

    table = make_sample_table(2400)
    (tmp_path / "src").mkdir()
    for i in range(2):
        pq.write_table(table.slice(i * 1200, 1200), tmp_path / "src" / f"part-{i}.parquet", row_group_size=40)
    registry = str(tmp_path / "registry")
    register(str(tmp_path / "src"), name="small", registry=registry)
    row_bytes = table.nbytes // table.num_rows
    monkeypatch.setattr(plan, "BUCKET_BYTES", row_bytes * 400)  # 6 buckets of ~400 rows
    shuffle = {"num_shards": 3, "shuffle": True, "seed": 3, "registry": registry}

    def crash() -> None:
        raise Crash

    monkeypatch.setattr(_testing, "_ARMED", ("units", "2"))  # stop once both spill files are written
    monkeypatch.setattr(_testing, "_units_journaled", 0)
    monkeypatch.setattr(_testing, "_kill", crash)
    with pytest.raises(Crash):
        reshard("small@1", str(tmp_path / "out"), **shuffle)
    monkeypatch.setattr(_testing, "_ARMED", None)
    spills = sorted((tmp_path / "out").rglob("_scatter-*.arrow"))
    assert len(spills) == 2
    records = sorted((tmp_path / "out" / "_dsm_rewrite").glob("_scatter-*.json"))
    for spill, record in zip(spills, records, strict=True):
        buckets = _record_buckets(record)
        assert len(set(buckets)) > 3  # the unit's rows fall in most of the 6 buckets
        assert sorted(buckets) == sorted(set(buckets)), "one piece per bucket, not one per source batch"
        assert ipc.open_file(str(spill)).num_record_batches == len(buckets)
    resumed = reshard("small@1", str(tmp_path / "out"), **shuffle)

    monkeypatch.setattr(execute, "SPILL_BUFFER_BYTES", 1)  # a piece per source batch and bucket, as before
    unbuffered = reshard("small@1", str(tmp_path / "unbuffered"), **shuffle)
    assert _data(tmp_path / "out") == _data(tmp_path / "unbuffered")
    assert resumed.contract.fingerprint == unbuffered.contract.fingerprint


def test_spill_files_are_uncompressed_on_local_disk_and_lz4_elsewhere_with_the_same_output(
    registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The codec of the pass-1 files follows where they are (the page cache locally, fewer bytes sent
    elsewhere); a run resumed on pass-1 files written with the other codec reads them, and every way gives
    the same output bytes."""
    from dsm.storage import location

    assert execute._spill_format(location(str(tmp_path))).compression is None
    assert execute._spill_format(location("memory://spill-codec")).compression == "lz4"
    shuffle = {"num_shards": 3, "shuffle": True, "seed": 11, "registry": registry}
    default = reshard("web@1", str(tmp_path / "default"), **shuffle)
    remote = reshard("web@1", str(tmp_path / "remote"), spill_dir="memory://spill-codec", **shuffle)
    assert _data(tmp_path / "remote") == _data(tmp_path / "default")

    def crash() -> None:
        raise Crash

    written = execute._spill_format
    monkeypatch.setattr(execute, "_spill_format", lambda spill: written(location("memory://x")))  # lz4
    monkeypatch.setattr(_testing, "_ARMED", ("units", "4"))
    monkeypatch.setattr(_testing, "_units_journaled", 0)
    monkeypatch.setattr(_testing, "_kill", crash)
    with pytest.raises(Crash):
        reshard("web@1", str(tmp_path / "mixed"), **shuffle)
    monkeypatch.setattr(_testing, "_ARMED", None)
    monkeypatch.setattr(execute, "_spill_format", written)
    lz4_spilled = sorted((tmp_path / "mixed").rglob("_scatter-*.arrow"))
    assert len(lz4_spilled) == 4
    from dsm.rewrite import run

    def no_pass_1(*args: object) -> None:
        raise AssertionError("pass 1 was run again instead of reading the lz4 files")

    monkeypatch.setattr(run, "scatter_units", no_pass_1)
    resumed = reshard("web@1", str(tmp_path / "mixed"), **shuffle)
    assert _data(tmp_path / "mixed") == _data(tmp_path / "default")
    assert remote.contract.fingerprint == resumed.contract.fingerprint == default.contract.fingerprint
