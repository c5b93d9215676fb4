"""dsm.open and its iterators: order, rank sharding, batches, exact resume, elastic resume, bad data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import dsm
from dsm.dataset import Dataset, DatasetIterator, merge_states
from dsm.errors import CheckFailed, FormatError, InputError, StateError
from dsm.order import EpochOrder, keyed_permutation, split_batches, split_ranges
from tests.read_data import ROW_GROUP, ROWS, SIZES, batch_ids, ids, register_local

FORMATS = ["parquet", "jsonl"]
BATCH = 96
BLOCK = 256


@pytest.fixture(scope="module", params=FORMATS)
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    ref, registry = register_local(tmp_path_factory.mktemp(request.param), request.param)
    return dsm.open(ref, registry=registry)


def make(ds: Dataset, **kw: Any) -> DatasetIterator:
    kw.setdefault("block_rows", BLOCK)
    return ds.iterator(kw.pop("batch_size", BATCH), **kw)


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(state)
    assert len(text) < 2000, "a state stays small"
    return json.loads(text)  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------------------ order


def test_plain_order_is_the_contract_order(dataset: Dataset) -> None:
    assert dataset.num_rows == ROWS and len(dataset.shards) == len(SIZES)
    assert ids(make(dataset)) == list(range(ROWS))


def test_batches_have_exactly_batch_size_rows(dataset: Dataset) -> None:
    sizes = [b.num_rows for b in make(dataset)]
    assert sizes == [BATCH] * (ROWS // BATCH) + [ROWS % BATCH]
    assert [b.num_rows for b in make(dataset, drop_last=True)] == [BATCH] * (ROWS // BATCH)


def test_shuffle_is_a_seeded_permutation(dataset: Dataset) -> None:
    first = ids(make(dataset, shuffle=True, seed=3))
    assert sorted(first) == list(range(ROWS)) and first != list(range(ROWS))
    assert ids(make(dataset, shuffle=True, seed=3)) == first
    assert ids(make(dataset, shuffle=True, seed=4)) != first
    assert ids(make(dataset, shuffle=True, seed=3, epoch=1)) != first


def test_shuffle_follows_the_documented_rule(dataset: Dataset) -> None:
    """Shards permuted by (seed, epoch), rows permuted within blocks of block_rows, blocks in file order."""
    it = make(dataset, shuffle=True, seed=11, epoch=2)
    order = EpochOrder(shard_rows=SIZES, shuffle=True, seed=11, epoch=2, block_rows=BLOCK)
    starts = [sum(SIZES[:i]) for i in range(len(SIZES))]
    expected = []
    for shard in order.shard_order:
        expected.extend(starts[shard] + order.file_rows(shard, 0, SIZES[shard]))
    assert ids(it) == [int(x) for x in expected]


def test_permutations_are_pinned() -> None:
    """The order is a pure function of its inputs, forever: a change here breaks every saved state."""
    assert keyed_permutation(8, 1, 7, 0).tolist() == [0, 1, 5, 2, 7, 3, 6, 4]
    assert keyed_permutation(5, 2, 0, 0, 3, 1).tolist() == [3, 2, 1, 0, 4]


def test_ranks_cut_the_epoch_into_contiguous_pieces(dataset: Dataset) -> None:
    for shuffle in (False, True):
        whole = ids(make(dataset, shuffle=shuffle, seed=5))
        pieces = [ids(make(dataset, shuffle=shuffle, seed=5, rank=r, world_size=3)) for r in range(3)]
        assert [len(p) for p in pieces] == [1334, 1333, 1333]
        assert pieces[0] + pieces[1] + pieces[2] == whole


def test_drop_last_gives_every_rank_the_same_batches(dataset: Dataset) -> None:
    counts = [len(list(make(dataset, rank=r, world_size=3, drop_last=True))) for r in range(3)]
    assert counts == [ROWS // 3 // BATCH] * 3


def test_columns_and_rows(tmp_path: Path) -> None:
    ref, registry = register_local(tmp_path, "parquet")
    ds = dsm.open(ref, registry=registry, columns=["score", "id"])
    assert ds.schema.names == ["score", "id"]
    rows = list(ds.rows(batch_size=500))
    assert len(rows) == ROWS and rows[3] == {"score": 3 / 7, "id": 3}
    with pytest.raises(dsm.SchemaError, match="no column 'nope'"):
        dsm.open(ref, registry=registry, columns=["nope"])


def test_arguments_are_checked_up_front(dataset: Dataset) -> None:
    with pytest.raises(InputError, match="batch_size"):
        dataset.iterator(0)
    with pytest.raises(InputError, match=r"rank must be in 0\.\.1"):
        dataset.iterator(8, rank=2, world_size=2)
    with pytest.raises(InputError, match="on_error"):
        dataset.iterator(8, on_error="ignore")
    with pytest.raises(InputError, match="fewer rows than one batch"):
        dataset.iterator(ROWS, world_size=2, drop_last=True)
    with pytest.raises(InputError, match="would get no rows"):
        dataset.iterator(8, rank=ROWS, world_size=ROWS + 1)


def test_split_helpers() -> None:
    assert split_ranges([(0, 5), (10, 12)], 3) == [[(0, 3)], [(3, 5)], [(10, 12)]]
    assert split_ranges([(0, 10)], 3, equal=True) == [[(0, 3)], [(3, 6)], [(6, 9)]]
    assert split_batches([(0, 10)], 2, 3, drop_last=False) == [[(0, 6)], [(6, 10)]]
    assert split_batches([(0, 10)], 2, 3, drop_last=True) == [[(0, 6)], [(6, 9)]]
    assert split_batches([(0, 10)], 3, 3, drop_last=False) == [[(0, 4)], [(4, 7)], [(7, 10)]]
    assert split_batches([(0, 4)], 3, 3, drop_last=False) == [[(0, 3)], [(3, 4)], []]


# ----------------------------------------------------------------------------------------------- resume


def _rank_rows(ds: Dataset, **kw: Any) -> list[int]:
    return ids(make(ds, **kw))


def _shard_ends(ds: Dataset, it: DatasetIterator) -> list[int]:
    """Indexes, in the rank's row order, of rows that are the last of a shard in the epoch order."""
    ends = []
    start = it.state_dict()["ranges"][0][0]
    size = it.rows_assigned
    offset = 0
    for shard in it.order.shard_order:
        offset += ds.shards[shard].rows or 0
        if start <= offset - 1 < start + size:
            ends.append(offset - 1 - start)
    return ends


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
@pytest.mark.parametrize("world_size", [1, 3])
def test_resume_at_batch_boundaries_equals_one_run(dataset: Dataset, shuffle: bool, world_size: int) -> None:
    for rank in range(world_size):
        kw = {"shuffle": shuffle, "seed": 9, "rank": rank, "world_size": world_size}
        full = batch_ids(make(dataset, **kw))
        ends = {i // BATCH for i in _shard_ends(dataset, make(dataset, **kw))}
        stops = sorted({0, 1, 2, len(full) // 2, len(full) - 1, len(full), *ends, *(e + 1 for e in ends)})
        for stop in stops:
            first = make(dataset, **kw)
            got = [b.column("id").to_pylist() for _, b in zip(range(stop), first, strict=False)]
            second = make(dataset, **kw)
            second.load_state_dict(roundtrip(first.state_dict()))
            got += batch_ids(second)
            assert got == full, f"rank {rank}, stopped after batch {stop}"


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
def test_resume_at_rows_equals_one_run(dataset: Dataset, shuffle: bool) -> None:
    """Stops after the first row, the last row of every shard, mid-block rows and the epoch's last row."""
    kw = {"shuffle": shuffle, "seed": 1, "rank": 1, "world_size": 3}
    full = _rank_rows(dataset, **kw)
    ends = _shard_ends(dataset, make(dataset, **kw))
    stops = sorted({0, 1, BLOCK - 1, BLOCK, *ends, *(e + 1 for e in ends), len(full) - 1})
    for stop in stops:
        first = make(dataset, **kw)
        rows = first.rows()
        got = [next(rows)["id"] for _ in range(stop + 1)]
        second = make(dataset, **kw)
        second.load_state_dict(roundtrip(first.state_dict()))
        got += ids(second)
        assert got == full, f"stopped after row {stop}"


def test_a_chain_of_restarts_with_another_batch_size(dataset: Dataset) -> None:
    kw = {"shuffle": True, "seed": 2, "rank": 0, "world_size": 2}
    full = _rank_rows(dataset, **kw)
    got: list[int] = []
    state = None
    for batch_size, steps in [(50, 3), (96, 7), (7, 40), (200, 2), (96, 1000)]:
        it = make(dataset, batch_size=batch_size, **kw)
        if state is not None:
            it.load_state_dict(state)
        for _, batch in zip(range(steps), it, strict=False):
            got.extend(batch.column("id").to_pylist())
        state = roundtrip(it.state_dict())
    assert got == full
    assert state is not None and state["cursor"] == len(full) and state["position"] is None
    done = make(dataset, **kw)
    done.load_state_dict(state)
    assert list(done) == []


def test_restore_makes_the_iterator_from_the_state(dataset: Dataset) -> None:
    it = make(dataset, shuffle=True, seed=4, epoch=3, rank=2, world_size=3)
    head = [next(it) for _ in range(3)]
    again = dataset.restore(roundtrip(it.state_dict()))
    assert again.order_arguments == it.order_arguments
    assert ids(head) + ids(again) == _rank_rows(dataset, shuffle=True, seed=4, epoch=3, rank=2, world_size=3)


def test_resume_seeks_instead_of_replaying(dataset: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    """Near the end of the epoch, a resume decodes about one batch (and at most one Parquet row group).

    Reads are made one batch at a time here (dsm normally decodes up to 16 MiB at once), so that what is
    decoded before the first row shows exactly."""
    monkeypatch.setattr(dsm.dataset, "READ_BATCH_BYTES", 1)
    it = make(dataset)
    for _ in range(ROWS // BATCH - 2):
        next(it)
    state = roundtrip(it.state_dict())
    fmt = dataset.format
    calls: list[dict[str, Any]] = []
    decoded: list[int] = []
    before_first: list[int] = []  # rows decoded when the stream hands out its first batch
    original_from, original_fragments = fmt.iter_batches_from, fmt.iter_fragments

    def from_(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        for item in original_from(*args, **kwargs):
            if not before_first:
                before_first.append(sum(decoded))
            yield item

    def fragments(*args: Any, **kwargs: Any) -> Any:
        for batch in original_fragments(*args, **kwargs):
            decoded.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(fmt, "iter_batches_from", from_)
    monkeypatch.setattr(fmt, "iter_fragments", fragments)
    again = make(dataset)
    again.load_state_dict(state)
    next(again)
    assert len(calls) == 1 and calls[0]["start_row"] > 0
    if dataset.contract.format == "parquet":
        # counted when the first batch comes out: the stream's read-ahead thread may decode more after that
        assert before_first and before_first[0] <= ROW_GROUP + BATCH
    else:
        seek = calls[0]["seek"]
        assert seek is not None, "JSONL jumps to a byte offset recorded in the state"
        assert 0 <= calls[0]["start_row"] - seek.row < BATCH, "and parses less than one batch before the row"


# -------------------------------------------------------------------------------------------- refusals


def test_a_state_is_refused_when_it_does_not_fit(dataset: Dataset) -> None:
    it = make(dataset, shuffle=True, seed=1, rank=0, world_size=2)
    next(it)
    state = it.state_dict()
    with pytest.raises(StateError, match=r"seed=1.*seed=2"):
        make(dataset, shuffle=True, seed=2, rank=0, world_size=2).load_state_dict(state)
    with pytest.raises(StateError, match="epoch"):
        make(dataset, shuffle=True, seed=1, epoch=1, rank=0, world_size=2).load_state_dict(state)
    with pytest.raises(StateError, match="merge_states"):
        make(dataset, shuffle=True, seed=1, rank=0, world_size=4).load_state_dict(state)
    started = make(dataset, shuffle=True, seed=1, rank=0, world_size=2)
    next(started)
    with pytest.raises(StateError, match="has started"):
        started.load_state_dict(state)
    with pytest.raises(StateError, match="not an iterator state"):
        make(dataset).load_state_dict({"cursor": 3})
    assert issubclass(StateError, InputError)


def test_a_state_from_another_version_is_refused(tmp_path: Path) -> None:
    ref, registry = register_local(tmp_path, "parquet")
    old = dsm.open(ref, registry=registry)
    it = old.iterator(64)
    next(it)
    state = it.state_dict()
    same = dsm.register(str(tmp_path / "data-parquet"), name="reads", registry=registry)
    resumed = dsm.open(same.ref, registry=registry).iterator(64)
    resumed.load_state_dict(state)  # the same shards under a new version number resume
    assert ids(resumed)[0] == 64
    changed = tmp_path / "data-parquet" / "part-00004.parquet"
    changed.write_bytes(changed.read_bytes())  # same bytes: still the same identity
    from tests.read_data import shard_bytes, table

    changed.write_bytes(shard_bytes("parquet", table(0, 10)))
    other = dsm.register(str(tmp_path / "data-parquet"), name="reads", registry=registry)
    with pytest.raises(StateError, match=r"saved reading reads@1 .* open reads@1"):
        dsm.open(other.ref, registry=registry).iterator(64).load_state_dict(state)


# --------------------------------------------------------------------------------------------- elastic


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
@pytest.mark.parametrize("new_world", [1, 2, 3])
def test_four_ranks_resume_on_fewer(dataset: Dataset, shuffle: bool, new_world: int) -> None:
    kw = {"shuffle": shuffle, "seed": 8}
    seen: list[int] = []
    states = []
    for rank in range(4):
        it = make(dataset, rank=rank, world_size=4, batch_size=64, **kw)
        for _ in range(rank + 2):  # ranks stopped at different points
            seen.extend(next(it).column("id").to_pylist())
        states.append(roundtrip(it.state_dict()))
    merged = merge_states(list(reversed(states)), world_size=new_world)
    assert [s["order"]["rank"] for s in merged] == list(range(new_world))
    rest = []
    for rank, state in enumerate(merged):
        it = make(dataset, rank=rank, world_size=new_world, batch_size=50, **kw)
        it.load_state_dict(roundtrip(state))
        rest.append(ids(it))
    everything = seen + [x for part in rest for x in part]
    assert sorted(everything) == list(range(ROWS)), "the rest of the epoch is read exactly once"
    lengths = [len(part) for part in rest]
    assert max(lengths) - min(lengths) <= 1


def test_elastic_twice_and_refusals(dataset: Dataset) -> None:
    states = [make(dataset, rank=r, world_size=4).state_dict() for r in range(4)]
    seen: list[int] = []
    two = []
    for state in merge_states(states, world_size=2):
        it = dataset.restore(state)
        seen.extend(ids([next(it), next(it)]))
        two.append(it.state_dict())
    for state in merge_states(two, world_size=3):
        seen.extend(ids(dataset.restore(state)))
    assert sorted(seen) == list(range(ROWS))
    with pytest.raises(StateError, match=r"rank\(s\) \[3\] missing"):
        merge_states(states[:3], world_size=2)
    with pytest.raises(StateError, match="given twice"):
        merge_states([*states, states[0]], world_size=2)
    other_seed = make(dataset, seed=5, rank=0, world_size=4).state_dict()
    with pytest.raises(StateError, match="seed"):
        merge_states([other_seed, *states[1:]], world_size=2)


# -------------------------------------------------------------------------------------------- bad data


def _corrupt(tmp_path: Path, fmt: str) -> tuple[Dataset, str]:
    ref, registry = register_local(tmp_path, fmt)
    ds = dsm.open(ref, registry=registry)
    path = tmp_path / f"data-{fmt}" / ds.shards[2].path
    data = bytearray(path.read_bytes())
    if fmt == "parquet":
        data[4 : len(data) - 8] = bytes(len(data) - 12)  # pages and footer zeroed: the size stays
    else:
        line = data.index(b"\n", 2000) + 1
        data[line : line + 5] = b"{oops"  # an invalid line, same size
    path.write_bytes(bytes(data))
    return ds, ds.shards[2].path


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_shard_that_does_not_decode_raises_naming_it(tmp_path: Path, fmt: str) -> None:
    ds, bad = _corrupt(tmp_path, fmt)
    with pytest.raises(FormatError, match=rf"{bad}.*epoch position \d+"):
        ids(ds.iterator(100))


@pytest.mark.parametrize("fmt", FORMATS)
def test_skip_records_the_rows_it_skipped(tmp_path: Path, fmt: str) -> None:
    ds, bad = _corrupt(tmp_path, fmt)
    start = sum(SIZES[:2])
    it = ds.iterator(100, on_error="skip")
    head = ids([next(it) for _ in range(8)])
    state = roundtrip(it.state_dict())
    rest = ids(ds.restore(state))
    got = head + rest
    report = it.report()
    assert report.skipped == () or report.skipped[0].shard == bad
    full = ds.iterator(100, on_error="skip")
    everything = ids(full)
    assert got == everything
    skipped = full.report().skipped
    assert len(skipped) == 1 and skipped[0].shard == bad and skipped[0].stop == start + SIZES[2]
    lost = set(range(skipped[0].start, skipped[0].stop))
    assert everything == [i for i in range(ROWS) if i not in lost]
    assert full.state_dict()["skipped"][0]["shard"] == bad
    assert full.report().to_dict()["skipped_rows"] == len(lost)


def test_a_resized_shard_is_a_failed_check(tmp_path: Path) -> None:
    ref, registry = register_local(tmp_path, "jsonl")
    ds = dsm.open(ref, registry=registry)
    path = tmp_path / "data-jsonl" / ds.shards[0].path
    path.write_bytes(path.read_bytes() + b"\n")
    with pytest.raises(CheckFailed, match=rf"{ds.shards[0].path}: .* bytes, the contract records"):
        next(ds.iterator(10))
    assert len(ids(ds.iterator(500, on_error="skip"))) == ROWS - SIZES[0]


@pytest.mark.parametrize("module", ["dsm.dataset", "dsm.cache", "dsm.order"])
def test_public_names(module: str) -> None:
    import importlib

    loaded = importlib.import_module(module)
    assert [n for n in loaded.__all__ if not hasattr(loaded, n)] == []
    for name in ("open", "merge_states", "Dataset", "DatasetIterator", "ReadReport", "StateError"):
        assert name in dsm.__all__ and getattr(dsm, name) is not None


@pytest.mark.parametrize("fmt", ["arrow", "csv"])
def test_other_formats_resume_exactly(tmp_path: Path, fmt: str) -> None:
    """Formats without a row index resume by decoding the start of one shard, never the epoch before it."""
    ref, registry = register_local(tmp_path, fmt)
    ds = dsm.open(ref, registry=registry)
    kw = {"shuffle": True, "seed": 6, "rank": 1, "world_size": 2}
    full = batch_ids(make(ds, **kw))
    for stop in (0, 1, 7, len(full) - 1):
        first = make(ds, **kw)
        got = [b.column("id").to_pylist() for _, b in zip(range(stop), first, strict=False)]
        second = make(ds, **kw)
        second.load_state_dict(roundtrip(first.state_dict()))
        assert got + batch_ids(second) == full
