"""``--spill-dir``: a shuffled reshard's pass-1 files in a folder of their own (one every worker of a cluster
reaches), the same output bytes as with the default (under the destination), and no spill file left once
the new version is published, even after an interrupted run that used another spill folder."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from dsm import _testing
from dsm.cli.app import app
from dsm.commands.register import register
from dsm.commands.rewrite import reshard
from dsm.errors import InputError

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
