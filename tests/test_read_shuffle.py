"""The shuffled iterator gathers its batches by index from whole decoded row groups: on generated layouts
(row groups, blocks and batches that do not line up, any rank split) it yields exactly the documented
order and resumes exactly; the read-ahead thread keeps order and errors as they were."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsm
from dsm.engine.ahead import ReadAhead
from dsm.read.dataset import Dataset
from dsm.read.order import EpochOrder, keyed_permutation, rank_ranges
from tests.read_data import ids, register_local

SIZES = (333, 1000, 7, 650)
STARTS = [sum(SIZES[:i]) for i in range(len(SIZES))]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    # Parquet row groups of 128 rows (tests/read_data.py): never a multiple of the blocks drawn below.
    ref, registry = register_local(tmp_path_factory.mktemp("shuffle"), "parquet", sizes=SIZES)
    return dsm.open(ref, registry=registry)


def expected_ids(*, seed: int, epoch: int, block_rows: int, rank: int, world_size: int) -> list[int]:
    """The documented order (docs/reading.md), computed position by position from its definition."""
    order = EpochOrder(shard_rows=SIZES, shuffle=True, seed=seed, epoch=epoch, block_rows=block_rows)
    out: list[int] = []
    for start, stop in rank_ranges(order.total, rank, world_size, drop_last=False):
        for position in range(start, stop):
            shard, row = order.locate(position)
            out.append(STARTS[shard] + int(order.file_rows(shard, row, 1)[0]))
    return out


def test_large_permutations_are_pinned() -> None:
    """Digests of whole permutations (the small pins are in test_read.py): the sort behind them may change,
    the order may not."""
    for args, digest in (
        ((8192, 2, 7, 0, 3, 1), "ee41d3909131fbf8"),
        ((65536, 1, 0, 5), "ba909205f22adb00"),
        ((1000, 2, 2**63 + 5, 1, 0, 9), "718edb85abd89ca9"),
    ):
        assert xxhash.xxh3_64_hexdigest(keyed_permutation(*args).astype("<i8").tobytes()) == digest


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    block_rows=st.sampled_from([1, 50, 128, 200, 256, 999, 5000]),
    batch_size=st.integers(1, 700),
    seed=st.integers(0, 2**64 - 1),
    world=st.integers(1, 4).flatmap(lambda w: st.tuples(st.just(w), st.integers(0, w - 1))),
    cut=st.integers(0, 8),
)
def test_shuffled_order_and_resume_on_any_layout(
    dataset: Dataset, block_rows: int, batch_size: int, seed: int, world: tuple[int, int], cut: int
) -> None:
    world_size, rank = world
    kw = {"shuffle": True, "seed": seed, "epoch": 1, "block_rows": block_rows, "rank": rank}
    expected = expected_ids(seed=seed, epoch=1, block_rows=block_rows, rank=rank, world_size=world_size)
    it = dataset.iterator(batch_size, world_size=world_size, **kw)
    batches = list(it)
    assert [b.num_rows for b in batches[:-1]] == [batch_size] * (len(batches) - 1)
    assert ids(batches) == expected
    # Stop after `cut` batches, resume in a fresh iterator: the rest is exactly what the first run yielded.
    first = dataset.iterator(batch_size, world_size=world_size, **kw)
    head = [next(first) for _ in range(min(cut, len(batches)))]
    state = first.state_dict()
    first.close()
    rest = list(dataset.restore(state))
    assert ids(head) + ids(rest) == expected


def _numbers(stop: int, fail_at: int | None = None) -> Iterator[int]:
    for value in range(stop):
        if value == fail_at:
            raise ValueError(f"bad item {value}")
        yield value


def test_read_ahead_keeps_order_end_and_errors() -> None:
    assert list(ReadAhead(_numbers(50))) == list(range(50))
    ahead = ReadAhead(_numbers(10, fail_at=6))
    assert [next(ahead) for _ in range(6)] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="bad item 6"):
        next(ahead)
    with pytest.raises(StopIteration):
        next(ahead)


def test_read_ahead_stops_its_thread_on_close() -> None:
    before = threading.active_count()
    ahead = ReadAhead(_numbers(10**9))
    assert next(ahead) == 0
    ahead.close()
    assert threading.active_count() == before
    with pytest.raises(StopIteration):
        next(ahead)


def test_read_ahead_is_bounded() -> None:
    made: list[int] = []

    def counting() -> Iterator[pa.RecordBatch]:
        for value in range(100):
            made.append(value)
            yield pa.record_batch({"x": [value]})

    ahead = ReadAhead(counting(), depth=2)
    next(ahead)
    threading.Event().wait(0.2)  # let the thread run as far as it may
    assert len(made) <= 3  # the one handed out and two ready
    ahead.close()


def test_read_ahead_deepened_runs_further_ahead_and_never_less() -> None:
    made: list[int] = []

    def counting() -> Iterator[int]:
        for value in range(100):
            made.append(value)
            yield value

    def settled(count: int) -> int:
        """How many items the thread has made once it may make ``count`` (waits up to 5 s for them)."""
        for _ in range(500):
            if len(made) >= count:
                break
            threading.Event().wait(0.01)
        threading.Event().wait(0.1)  # and a moment more, in which it must not make another
        return len(made)

    ahead = ReadAhead(counting(), depth=1)
    assert next(ahead) == 0
    assert settled(2) == 2  # the one handed out and one ready
    ahead.deepen(5)
    assert settled(6) == 6  # now five ready
    ahead.deepen(2)  # a smaller depth changes nothing
    assert [next(ahead) for _ in range(3)] == [1, 2, 3]
    assert settled(9) == 9
    ahead.close()


def _readers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "dsm-read-ahead"}


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
def test_closing_or_dropping_an_iterator_stops_reading_ahead(tmp_path: Path, shuffle: bool) -> None:
    """On a shard of more rows than a decoded batch and the one read ahead hold (so that the thread is still
    reading when the iterator is closed; consecutive row groups are decoded together)."""
    folder = tmp_path / "data"
    folder.mkdir()
    table = pa.table({"id": pa.array(range(300_000), pa.int64())})
    pq.write_table(table, folder / "part-0.parquet", row_group_size=1000)
    registry = str(tmp_path / "registry")
    dataset = dsm.open(dsm.register(str(folder), name="long", registry=registry).ref, registry=registry)
    gc.collect()
    before = _readers()
    it = dataset.iterator(10, shuffle=shuffle, seed=3, block_rows=200)
    next(it)
    assert _readers() - before
    it.close()
    assert not _readers() - before
    dropped = dataset.iterator(10, shuffle=shuffle, seed=3, block_rows=200)
    next(dropped)
    del dropped  # never closed: collected, its thread told to stop
    gc.collect()
    for _ in range(100):
        if not _readers() - before:
            break
        threading.Event().wait(0.01)
    assert not _readers() - before
