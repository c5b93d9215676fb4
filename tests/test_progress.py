"""Progress bars count the data once and move as the work completes, from threads and forked workers.

A recording :class:`~dsm.engine.progress.Progress` stands where the CLI's bar would: the total it is given
is the data's size (not twice it, for work that reads every byte twice), what it is advanced by adds up to
that total, and a deep verify's row pass moves it batch by batch within one shard, not only when the shard
is done.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsm
from dsm.demo import make_sample_table
from dsm.engine import map_units, report_progress
from dsm.engine.progress import Passes, rows_as_bytes, scaled
from tests.conftest import StorageRoot


class Recorder:
    def __init__(self) -> None:
        self.total: int | None = None
        self.steps: list[int] = []
        self.finished = False
        self._lock = threading.Lock()

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        self.total = total_bytes

    def advance(self, nbytes: int) -> None:
        with self._lock:
            self.steps.append(nbytes)

    def finish(self) -> None:
        self.finished = True


def _wide_rows(rows: int) -> pa.Table:
    """Rows of 4 KB of random letters: a deep verify decodes them in batches of a few hundred rows."""
    rng = np.random.default_rng(3)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    text = [bytes(letters[rng.integers(0, 26, 4_000)]).decode() for _ in range(rows)]
    return pa.table({"id": pa.array(range(rows), pa.int64()), "text": text})


def _one_shard_of_row_groups(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(make_sample_table(3000), folder / "part-00000.parquet", row_group_size=200)


@pytest.mark.parametrize("workers", [1, 2])
def test_deep_verify_counts_the_data_once_and_moves_within_a_shard(tmp_path: Path, workers: int) -> None:
    """Progress moves with each batch decoded: rows of 4 KB make batches of a few hundred rows (consecutive
    row groups are decoded together up to a batch's rows), so the first shard's 15 row groups give
    several steps."""
    (tmp_path / "data").mkdir()
    wide = _wide_rows(3000)
    pq.write_table(wide, tmp_path / "data" / "part-00000.parquet", row_group_size=200)
    pq.write_table(wide.slice(0, 500), tmp_path / "data" / "part-00001.parquet")
    registry = str(tmp_path / "registry")
    contract = dsm.register(str(tmp_path / "data"), name="d", registry=registry)
    bar = Recorder()
    report = dsm.verify("d", deep=True, workers=workers, registry=registry, progress=bar)
    assert report.ok and bar.finished
    assert bar.total == contract.total_bytes  # not twice the data
    assert contract.total_bytes - 2 <= sum(bar.steps) <= contract.total_bytes
    if workers == 1:  # in this process: runs of at most 4 row groups of the first shard, each a step
        assert len(bar.steps) >= 4


def test_deep_verify_reports_from_threads_and_workers_on_every_store(storage: StorageRoot) -> None:
    fs = storage.fs()
    fs.makedirs(storage.url, exist_ok=True)
    with fs.open(storage.join("part-00000.parquet"), "wb") as handle:
        pq.write_table(_wide_rows(2000), handle, row_group_size=250)
    registry = f"memory://registry-{storage.kind}-{id(storage)}"
    contract = dsm.register(storage.url, name="d", registry=registry, storage_options=storage.options)
    bar = Recorder()
    report = dsm.verify("d", deep=True, registry=registry, storage_options=storage.options, progress=bar)
    assert report.ok and bar.total == contract.total_bytes
    assert contract.total_bytes - 2 <= sum(bar.steps) <= contract.total_bytes
    assert len(bar.steps) >= 3  # the row pass moved with each run of its 8 row groups (at most 3 each)


def test_register_and_rewrites_count_the_data_once(tmp_path: Path) -> None:
    _one_shard_of_row_groups(tmp_path / "data")
    registry = str(tmp_path / "registry")
    bar = Recorder()
    contract = dsm.register(str(tmp_path / "data"), name="d", registry=registry, progress=bar)
    assert bar.total == contract.total_bytes and contract.total_bytes - 2 <= sum(bar.steps) <= bar.total
    for shuffle in (False, True):
        bar = Recorder()
        dsm.reshard(
            "d@1",
            str(tmp_path / f"out-{shuffle}"),
            num_shards=3,
            shuffle=shuffle,
            registry=registry,
            progress=bar,
        )
        assert bar.total == contract.total_bytes and contract.total_bytes - 3 <= sum(bar.steps) <= bar.total


def _reporting_unit(n: int) -> int:  # module level: forked workers find it by reference
    for _ in range(n):
        report_progress(10)
    return n


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_what_units_report_reaches_the_caller(mode: str) -> None:
    got: list[int] = []
    lock = threading.Lock()

    def add(nbytes: int) -> None:
        with lock:
            got.append(nbytes)

    assert map_units(_reporting_unit, [3, 4, 5], workers=3, mode=mode, on_progress=add) == [3, 4, 5]
    assert sum(got) == 120
    report_progress(5)  # outside an executor that listens: nothing, and no error


def test_the_weights_add_up_exactly() -> None:
    got: list[int] = []
    half = scaled(got.append, 0.5)
    for n in (3, 3, 3, 1):
        half(n)
    assert sum(got) == 5
    got.clear()
    rows = rows_as_bytes(got.append, 1000, 300)
    for _ in range(4):
        rows(100)  # one more batch than recorded: never past the shard's bytes
    assert sum(got) == 1000
    bar = Recorder()
    passes = Passes(bar, 3)
    passes.start(total_bytes=90, total_units=1, description="x")
    for _ in range(3):
        passes.advance(90)
    assert sum(bar.steps) == 90


@pytest.mark.parametrize("total", [0, 40_000_000])
def test_the_bar_shows_bytes_done_and_a_rate_with_or_without_a_total(
    monkeypatch: pytest.MonkeyPatch, total: int
) -> None:
    """The CLI's own bar on a terminal, on a clock the test moves: a benchmark that runs for a duration (no
    total) shows the bytes done, a rate and the time spent; with a total, the bytes of the total. Never a
    ``?``, and a rate once bytes moved."""
    import functools
    import io

    from rich.console import Console
    from rich.progress import Progress

    import dsm.cli.render as render

    clock = [0.0]
    monkeypatch.setattr(render, "err_console", Console(file=io.StringIO(), force_terminal=True))
    monkeypatch.setattr(render, "Progress", functools.partial(Progress, get_time=lambda: clock[0]))
    bar = render.BarProgress()
    bar.start(total_bytes=total, total_units=2, description="bench web")
    for _ in range(4):
        clock[0] += 1.0
        bar.advance(5_000_000)
    assert bar._bar is not None
    screen = Console(file=io.StringIO(), width=200, color_system=None)
    screen.print(bar._bar.make_tasks_table(bar._bar.tasks))
    bar.finish()
    line = screen.file.getvalue().strip()  # type: ignore[attr-defined]
    assert "?" not in line and line.startswith("bench web (2 shards)"), line
    assert ("20.0 MB of 40.0 MB" if total else "20.0 MB ") in line and "5.0 MB/s" in line, line
    if not total:
        assert line.endswith("0:00:04"), line  # the time spent, not a time left it cannot know
