"""dsm.torch: DataLoader workers share a rank's rows without duplicates; the loader state resumes exactly."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'dsm[torch]')")

import dsm  # noqa: E402
from dsm.dataset import Dataset, merge_states  # noqa: E402
from dsm.errors import InputError, StateError  # noqa: E402
from dsm.torch import DataLoader, IterableDataset  # noqa: E402
from tests.read_data import ROWS, ids, register_local  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

BATCH = 96


@pytest.fixture(scope="module", params=["parquet", "jsonl"])
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    ref, registry = register_local(tmp_path_factory.mktemp(request.param), request.param)
    return dsm.open(ref, registry=registry)


def make(ds: Dataset, **kw: Any) -> IterableDataset:
    kw.setdefault("batch_size", BATCH)
    kw.setdefault("block_rows", 256)
    return IterableDataset(ds, **kw)


def run(loader: Any, steps: int | None = None) -> list[list[int]]:
    """The ids of the first ``steps`` batches the loader hands out (all with None), none taken beyond."""
    return [batch["id"].tolist() for batch in itertools.islice(loader, steps)]


def test_workers_read_the_rank_share_once(dataset: Dataset) -> None:
    for workers in (0, 1, 3):
        batches = run(make(dataset, shuffle=True, seed=2, rank=1, world_size=3).loader(num_workers=workers))
        flat = [x for b in batches for x in b]
        assert sorted(flat) == sorted(
            ids(dataset.iterator(BATCH, block_rows=256, shuffle=True, seed=2, rank=1, world_size=3))
        )
        assert all(len(b) == BATCH for b in batches[:-1])
    single = run(make(dataset, shuffle=True, seed=2).loader(num_workers=0))
    assert [x for b in single for x in b] == ids(
        dataset.iterator(BATCH, block_rows=256, shuffle=True, seed=2)
    )


@pytest.mark.parametrize("workers", [0, 2, 3])
def test_loader_resume_equals_one_run(dataset: Dataset, workers: int) -> None:
    kw = {"shuffle": True, "seed": 5, "rank": 2, "world_size": 3}
    full = run(make(dataset, **kw).loader(num_workers=workers))
    for stop in (0, 1, 2, 4, len(full) - 1, len(full)):
        first = make(dataset, **kw)
        loader = first.loader(num_workers=workers)
        got = run(loader, stop)
        state = json.loads(json.dumps(loader.state_dict()))
        second = make(dataset, **kw)
        second.load_state_dict(state)
        got += run(second.loader(num_workers=workers))
        assert got == full, f"{workers} workers, stopped after batch {stop}"


def test_another_worker_count_reads_the_rest_once(dataset: Dataset) -> None:
    first = make(dataset, rank=0, world_size=2)
    seen = [x for b in run(first.loader(num_workers=3), 5) for x in b]
    state = first.state_dict()
    second = make(dataset, rank=0, world_size=2)
    second.load_state_dict(state)
    seen += [x for b in run(second.loader(num_workers=2)) for x in b]
    assert sorted(seen) == sorted(ids(dataset.iterator(BATCH, block_rows=256, rank=0, world_size=2)))


def test_loader_states_of_four_ranks_resume_on_two(dataset: Dataset) -> None:
    seen: list[int] = []
    states = []
    for rank in range(4):
        data = make(dataset, shuffle=True, seed=3, rank=rank, world_size=4)
        loader = data.loader(num_workers=2)
        seen += [x for b in run(loader, 3) for x in b]
        states.append(loader.state_dict())
    for rank, state in enumerate(merge_states(states, world_size=2)):
        data = make(dataset, shuffle=True, seed=3, rank=rank, world_size=2)
        data.load_state_dict(state)
        seen += [x for b in run(data.loader(num_workers=2)) for x in b]
    assert sorted(seen) == list(range(ROWS))


def test_enough_work_is_checked_up_front(tmp_path: Path) -> None:
    ref, registry = register_local(tmp_path, "parquet", sizes=(150, 50))
    ds = dsm.open(ref, registry=registry)
    data = IterableDataset(ds, batch_size=100)
    with pytest.raises(InputError, match=r"holds 2 batch\(es\) .* fewer than num_workers=3"):
        DataLoader(data, num_workers=3)
    with pytest.raises(InputError, match="fewer rows than one batch"):
        IterableDataset(ds, batch_size=100, world_size=3, drop_last=True)
    with pytest.raises(InputError, match="persistent_workers"):
        data.loader(num_workers=1, persistent_workers=True)
    with pytest.raises(InputError, match="batch_size unset"):
        DataLoader(data, batch_size=4)
    with pytest.raises(StateError, match="not a loader state"):
        data.load_state_dict({"format": "x"})


def test_epochs_and_tensors(dataset: Dataset) -> None:
    data = make(dataset, shuffle=True, seed=1, columns=None)
    first = run(data.loader(num_workers=2))
    data.set_epoch(1)
    second = run(data.loader(num_workers=2))
    assert first != second and sorted(x for b in first for x in b) == sorted(x for b in second for x in b)
    batch = next(iter(data.loader(num_workers=0)))
    assert batch["id"].dtype == torch.int64 and batch["score"].dtype == torch.float64
    assert isinstance(batch["text"], list) and batch["text"][0].startswith("row ")


def test_workers_read_through_a_shared_cache(tmp_path: Path) -> None:
    import uuid

    from fsspec.implementations.memory import MemoryFileSystem

    from tests.read_data import write_shards

    root = f"memory://dsm-torch-cache-{uuid.uuid4().hex}"
    write_shards(MemoryFileSystem(), root, "parquet")
    contract = dsm.register(root, name="remote", registry=str(tmp_path / "registry"))
    ds = dsm.open(contract.ref, registry=str(tmp_path / "registry"), cache_dir=str(tmp_path / "cache"))
    next(ds.iterator(10))  # the parent has a cache (and a prefetch thread) before the workers fork
    data = IterableDataset(ds, batch_size=BATCH, shuffle=True, seed=4)
    seen = [x for b in run(data.loader(num_workers=2)) for x in b]
    assert sorted(seen) == list(range(ROWS))
    assert len(list((tmp_path / "cache" / "objects").iterdir())) == len(ds.shards)


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_own_dataloader_reads_every_row_once(dataset: Dataset, workers: int) -> None:
    """torch's own DataLoader (not dsm's): the same batches as dsm's loader, every row once."""
    kw = {"shuffle": True, "seed": 3}
    plain = run(torch.utils.data.DataLoader(make(dataset, **kw), batch_size=None, num_workers=workers))
    assert plain == run(make(dataset, **kw).loader(num_workers=workers))
    assert sorted(x for b in plain for x in b) == list(range(ROWS))


def test_an_empty_dataset_iterates_to_nothing(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "empty"
    folder.mkdir()
    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), folder / "part-00000.parquet")
    registry = str(tmp_path / "registry")
    ds = dsm.open(dsm.register(str(folder), name="empty", registry=registry).ref, registry=registry)
    assert list(ds.iterator(8, world_size=4, rank=3)) == []
    data = IterableDataset(ds, batch_size=8, world_size=2, rank=1)
    assert run(data.loader(num_workers=2)) == []
    assert (
        run(torch.utils.data.DataLoader(IterableDataset(ds, batch_size=8), batch_size=None, num_workers=2))
        == []
    )
