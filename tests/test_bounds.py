"""Bounded by the data, not by the arguments: size-like arguments are checked before anything is allocated,
in the library (Python callers get the errors CLI users get), and no plan has more files than rows."""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.commands.cutover import start_cutover
from dsm.engine import map_units
from dsm.errors import InputError
from dsm.read.order import rank_ranges, split_ranges
from dsm.read.state import merge_states
from dsm.registry import Registry
from dsm.rewrite import layout
from tests.conftest import write_parquet_shards

from .cutover_support import FAST, make_dataset

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def web(tmp_path: Path, sample_table: pa.Table) -> tuple[str, Path]:
    return make_dataset(tmp_path, sample_table.slice(0, 600), shards=2)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_more_shards_than_rows_is_refused_before_anything_is_planned(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    registry, _ = web
    before = _peak_rss_mb()
    for shards in ("1000000000", "100000", "601"):
        out = cli("reshard", "web", str(tmp_path / "out"), "--num-shards", shards, "--registry", registry)
        assert out.exit_code == 2, out.output
        assert "more than the 600 row(s)" in out.stderr and "ask for at most 600" in out.stderr
    assert _peak_rss_mb() - before < 200  # nothing grew with the argument
    assert not (tmp_path / "out").exists() and Registry(registry).versions("web") == [1]
    with pytest.raises(InputError, match=r"999,999,400 of the files would be empty"):
        dsm.reshard("web", str(tmp_path / "out"), num_shards=10**9, registry=registry)
    with pytest.raises(InputError, match="more than the 600 row"):
        start_cutover("web@prod", to=str(tmp_path / "out"), num_shards=10**6, registry=registry, **FAST)
    assert not (Path(registry) / "web" / "cutovers").exists()  # refused at start: no cutover created
    done = dsm.reshard("web", str(tmp_path / "out"), num_shards=600, registry=registry)
    assert done.shards == 600 and {s.rows for s in done.contract.shards} == {1}


def test_an_empty_dataset_reshards_into_one_file(tmp_path: Path) -> None:
    write_parquet_shards(tmp_path / "empty", pa.table({"id": pa.array([], pa.int64())}), 1)
    registry = str(tmp_path / "registry")
    dsm.register(str(tmp_path / "empty"), name="empty", registry=registry)
    with pytest.raises(InputError, match="ask for at most 1"):
        dsm.reshard("empty", str(tmp_path / "two"), num_shards=2, registry=registry)
    assert dsm.reshard("empty", str(tmp_path / "one"), num_shards=1, registry=registry).shards == 1


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"num_shards": 0}, "at least 1"),
        ({"num_shards": -3}, "at least 1"),
        ({"num_shards": True}, "whole number"),
        ({"rows_per_shard": 0}, "at least 1"),
        ({"shard_size": "0"}, "at least 1 byte"),
        ({"shard_size": "-1MB"}, "not a size"),
        ({"num_shards": 2, "workers": 0}, "at least 1"),
        ({"num_shards": 2, "workers": 10**9}, "more than 4,096"),
    ],
)
def test_bad_sizes_are_refused_by_the_library(
    tmp_path: Path, web: tuple[str, Path], keywords: dict[str, Any], message: str
) -> None:
    registry, _ = web
    with pytest.raises(InputError, match=message):
        dsm.reshard("web", str(tmp_path / "out"), registry=registry, **keywords)
    assert not (tmp_path / "out").exists()


def test_world_size_beyond_the_rows_is_refused_on_every_rank_without_growing(
    web: tuple[str, Path],
) -> None:
    registry, _ = web
    ds = dsm.open("web@1", registry=registry)
    before = _peak_rss_mb()
    for rank in (0, 599, 10**9 - 1):
        with pytest.raises(InputError, match=r"world_size 1,000,000,000 is more than the 600 rows"):
            ds.iterator(8, rank=rank, world_size=10**9)
    assert _peak_rss_mb() - before < 200
    with pytest.raises(InputError, match="world_size"):
        ds.iterator(8, world_size=0)
    with pytest.raises(InputError, match="batch_size"):
        ds.iterator(0)
    whole = ds.iterator(10**12)  # one batch: the rows there are, nothing sized by the argument
    assert [b.num_rows for b in whole] == [600]
    states = [ds.iterator(8, rank=r, world_size=2).state_dict() for r in range(2)]
    with pytest.raises(InputError, match=r"world_size 1,000,000,000 is more than the 600 row\(s\) left"):
        merge_states(states, world_size=10**9)
    forged = [{**states[0], "order": {**states[0]["order"], "world_size": 10**12}}]
    with pytest.raises(dsm.StateError, match="1 state"):
        merge_states(forged, world_size=2)
    assert _peak_rss_mb() - before < 200


@settings(max_examples=200, deadline=None)
@given(
    total=st.integers(min_value=0, max_value=10**6),
    world=st.integers(min_value=1, max_value=300),
    drop_last=st.booleans(),
    data=st.data(),
)
def test_rank_ranges_is_the_rank_piece_of_split_ranges(
    total: int, world: int, drop_last: bool, data: Any
) -> None:
    rank = data.draw(st.integers(min_value=0, max_value=world - 1))
    assert (
        rank_ranges(total, rank, world, drop_last=drop_last)
        == split_ranges([(0, total)], world, equal=drop_last)[rank]
    )


@settings(max_examples=100, deadline=None)
@given(total=st.integers(min_value=0, max_value=10**5), shards=st.integers(min_value=1, max_value=10**5))
def test_a_layout_never_has_an_empty_file_unless_the_dataset_is_empty(total: int, shards: int) -> None:
    if shards > max(1, total):
        with pytest.raises(InputError, match="would be empty"):
            layout(total, num_shards=shards)
        return
    spans = layout(total, num_shards=shards)
    assert len(spans) == shards and sum(n for _, n in spans) == total
    assert total == 0 or min(n for _, n in spans) >= 1


def test_worker_counts_are_checked_before_anything_starts() -> None:
    for bad in (0, -1, True, 2.5, 10**9):
        with pytest.raises(InputError, match="workers"):
            map_units(abs, [1, 2], workers=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="more than 4,096"):
        dsm.bench("nope@1", workers=10**6)


# ------------------------------------------------------------------------------ YAML: size and aliases


def _alias_bomb(levels: int = 9, fan: int = 10) -> str:
    """``levels`` anchors, each a list of ``fan`` aliases of the one before: fan**levels values."""
    lines = ["l0: &l0 [" + ", ".join(['"lol"'] * fan) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_or_a_cycle_anywhere_dsm_reads_yaml_is_refused_at_once(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    registry, folder = web
    good = Registry(registry).get("web", 1).to_yaml()
    bomb = "metadata:\n  " + _alias_bomb().replace("\n", "\n  ").rstrip() + "\n"
    cases = {
        "bomb.yaml": good.replace("\nshards:", "\n" + bomb + "shards:", 1),
        "cycle.yaml": good.replace("\nshards:", "\nmetadata: &m {again: *m}\nshards:", 1),
    }
    before = _peak_rss_mb()
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        for command in ("verify", "show"):
            out = cli(command, str(tmp_path / name), "--registry", registry, "--json")
            assert out.exit_code == 2, out.output
            assert name in out.stderr and ("alias bomb" in out.stderr or "a cycle" in out.stderr), out.stderr
    # in the registry itself: a version, the aliases and the statuses of a dataset
    versions = Path(registry) / "web" / "versions"
    (versions / "2.yaml").write_text(cases["bomb.yaml"])
    out = cli("show", "web@2", "--registry", registry)
    assert out.exit_code == 2 and "2.yaml" in out.stderr and "alias bomb" in out.stderr, out.output
    (versions / "2.yaml").unlink()
    for file in ("aliases.yaml", "status.yaml"):
        path = Path(registry) / "web" / file
        kept = path.read_bytes() if path.exists() else None
        path.write_text(_alias_bomb())
        out = cli("show", "web@prod", "--registry", registry)
        assert out.exit_code == 2 and file in out.stderr and "alias bomb" in out.stderr, out.output
        if kept is None:
            path.unlink()
        else:
            path.write_bytes(kept)
    schema = tmp_path / "schema.yaml"
    schema.write_text("fields: &f [{name: id, type: int64}, *f]\n")
    out = cli("register", str(folder), "--name", "x", "--schema", str(schema), "--registry", registry)
    assert out.exit_code == 2 and "schema.yaml" in out.stderr and "alias bomb" in out.stderr, out.output
    assert _peak_rss_mb() - before < 200
    assert dsm.verify("web", registry=registry).ok  # the registry reads as before


def test_a_read_block_larger_than_every_file_allocates_no_more_than_the_largest(
    web: tuple[str, Path],
) -> None:
    registry, _ = web
    before = _peak_rss_mb()
    huge = dsm.bench("web", registry=registry, block_size="1000TB", pattern="random", seed=3)
    assert _peak_rss_mb() - before < 200
    small = dsm.bench("web", registry=registry, block_size="64KiB")
    total = Registry(registry).get("web", 1).total_bytes
    assert huge.ref.results[0].bytes == small.ref.results[0].bytes == total  # every byte once, either way
