"""PyTorch: a dsm dataset as an ``IterableDataset`` split across DataLoader workers, with one state for the
whole loader. Needs ``torch`` (``pip install 'dsm[torch]'``); nothing else in dsm imports it.

Each rank's share of the epoch is cut into one contiguous piece of whole batches per worker. The
DataLoader takes batches from its workers in turn, so the loader's order is a function of the arguments
and ``num_workers``. :class:`DataLoader` (or :meth:`IterableDataset.loader`) notes, for every batch it
hands out, which worker made it and that worker's iterator state: ``state_dict()`` is what the training
loop has received, not what workers prefetched.

>>> from dsm.torch import IterableDataset
>>> data = IterableDataset("web-text@prod", batch_size=256, shuffle=True, seed=7)  # doctest: +SKIP
>>> loader = data.loader(num_workers=4)  # doctest: +SKIP
>>> for step, batch in enumerate(loader):  # doctest: +SKIP
...     if step == 100:
...         saved = loader.state_dict()
...         break
>>> again = IterableDataset("web-text@prod", batch_size=256, shuffle=True, seed=7)  # doctest: +SKIP
>>> again.load_state_dict(saved)  # doctest: +SKIP
>>> rest = list(again.loader(num_workers=4))  # doctest: +SKIP
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import torch
import torch.utils.data as tud

from dsm.errors import InputError, StateError
from dsm.read.dataset import Dataset, DatasetIterator
from dsm.read.dataset import open as open_dataset
from dsm.read.order import DEFAULT_BLOCK_ROWS, Range, range_rows, remaining_ranges, split_batches
from dsm.read.state import LOADER_STATE_FORMAT, STATE_FORMAT, ReadOrder

__all__ = ["LOADER_STATE_FORMAT", "DataLoader", "IterableDataset", "to_tensors"]


def to_tensors(batch: pa.RecordBatch) -> dict[str, Any]:
    """The default transform: a dict of column name to a tensor (numeric, boolean and temporal columns
    without nulls) or a list of Python values (everything else)."""
    out: dict[str, Any] = {}
    for field, column in zip(batch.schema, batch.columns, strict=True):
        type_ = field.type
        numeric = pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_boolean(type_)
        temporal = pa.types.is_timestamp(type_) or pa.types.is_date(type_) or pa.types.is_duration(type_)
        if (numeric or temporal) and column.null_count == 0 and not pa.types.is_float16(type_):
            values = column.view(pa.int64() if type_.bit_width == 64 else pa.int32()) if temporal else column
            out[field.name] = torch.from_numpy(np.array(values.to_numpy(zero_copy_only=False)))
        else:
            out[field.name] = column.to_pylist()
    return out


class _Tagged(NamedTuple):
    """A batch on its way from a worker: which slot made it, and that slot's state after it."""

    item: Any
    slot: int
    state: dict[str, Any]


class _TaggedCollate:
    """Applies the user's ``collate_fn`` (default: torch's ``default_convert``) to the batch only."""

    def __init__(self, inner: Callable[[Any], Any] | None) -> None:
        self.inner = inner

    def __call__(self, data: Any) -> Any:
        convert = self.inner or tud.default_convert
        if isinstance(data, _Tagged):
            return _Tagged(convert(data.item), data.slot, data.state)
        return convert(data)


class IterableDataset(tud.IterableDataset):  # type: ignore[type-arg]
    """One rank's share of an epoch of a dsm dataset, as batches, split across DataLoader workers.

    ``dataset`` is a :class:`dsm.read.dataset.Dataset` or a reference opened with ``registry``, ``columns``,
    ``cache_dir``, ``cache_limit`` and ``storage_options``. ``rank`` and ``world_size`` default to
    ``torch.distributed``'s when it is initialised. ``transform`` turns each ``pyarrow.RecordBatch`` into
    what the loader yields (default :func:`to_tensors`). Call :meth:`set_epoch` before each epoch.

    Raises :class:`dsm.errors.InputError` at once when this rank's share holds no batch.
    """

    def __init__(
        self,
        dataset: Dataset | str,
        *,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = False,
        on_error: str = "raise",
        block_rows: int = DEFAULT_BLOCK_ROWS,
        transform: Callable[[pa.RecordBatch], Any] | None = None,
        registry: str | None = None,
        columns: Sequence[str] | None = None,
        cache_dir: str | None = None,
        cache_limit: int | str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(dataset, Dataset):
            dataset = open_dataset(
                dataset,
                registry=registry,
                columns=columns,
                cache_dir=cache_dir,
                cache_limit=cache_limit,
                storage_options=storage_options,
            )
        if rank is None or world_size is None:
            distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
            rank = rank if rank is not None else (torch.distributed.get_rank() if distributed else 0)
            world_size = (
                world_size
                if world_size is not None
                else (torch.distributed.get_world_size() if distributed else 1)
            )
        self.dataset = dataset
        self.transform = transform or to_tensors
        # Checks the arguments and that this rank has work, before any worker starts.
        first = dataset.iterator(
            batch_size,
            shuffle=shuffle,
            seed=seed,
            epoch=epoch,
            rank=rank,
            world_size=world_size,
            drop_last=drop_last,
            on_error=on_error,
            block_rows=block_rows,
        )
        self.batch_size = first.batch_size
        self.order: ReadOrder = first.read_order
        self.on_error = first.on_error
        self._loaded: dict[str, Any] | None = None
        self._slots: list[dict[str, Any]] | None = None
        self._first_slot = 0
        self._next_slot = 0
        self._tagged = False

    # ----------------------------------------------------------------------------------------- public

    @property
    def arguments(self) -> dict[str, Any]:
        """The iterator arguments (``batch_size``, the order's, ``on_error``) as a dict."""
        return {"batch_size": self.batch_size, **self.order.to_dict(), "on_error": self.on_error}

    @property
    def epoch(self) -> int:
        return self.order.epoch

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` next (a different shuffle); forgets any progress of the current one."""
        self.order = replace(self.order, epoch=int(epoch))
        self._iterator()
        self._loaded = None
        self._slots = None

    def loader(self, **kwargs: Any) -> DataLoader:
        """A :class:`DataLoader` over this dataset (keyword arguments as torch's DataLoader takes)."""
        return DataLoader(self, **kwargs)

    def batches(self) -> int:
        """Batches this rank yields in a whole epoch."""
        rows = self._iterator().rows_assigned
        size = self.batch_size
        return rows // size if self.order.drop_last else -(-rows // size)

    def check_workers(self, num_workers: int) -> None:
        """Refuse (InputError) a worker count that would leave a worker without a batch."""
        workers = max(int(num_workers), 1)
        batches = self.batches()
        if batches < workers:
            a = self.arguments
            raise InputError(
                f"rank {a['rank']} of {a['world_size']} holds {batches} batch(es) of {a['batch_size']} rows "
                f"in {self.dataset.ref}, fewer than num_workers={workers}: some workers would get no work; "
                f"use at most {batches} workers or a smaller batch_size"
            )

    def state_dict(self) -> dict[str, Any]:
        """The state of the whole loader: each worker's iterator state as of the last batch the training
        loop received, and which worker hands out the next batch."""
        if self._slots is None:
            if self._loaded is not None:
                return copy.deepcopy(self._loaded)
            slots = self._fresh_slots(1)
            return self._loader_state(slots, 0)
        return self._loader_state(self._slots, self._next_slot)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a loader state at the next ``iter()``. With the same ``num_workers`` the batches
        come in exactly the order the saving loader would have given; with another, every remaining row
        still comes exactly once, re-split among the workers. An iterator state of this rank (such as one
        of ``dsm.merge_states``'s results) is taken too."""
        if isinstance(state, Mapping) and state.get("format") == STATE_FORMAT:
            state = {"format": LOADER_STATE_FORMAT, "next_slot": 0, "slots": [dict(state)]}
        if not isinstance(state, Mapping) or state.get("format") != LOADER_STATE_FORMAT:
            found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise StateError(
                f"not a loader state of this dsm (format {found!r}, expected {LOADER_STATE_FORMAT!r}); "
                "pass what IterableDataset.state_dict() returned"
            )
        slots = list(state.get("slots") or [])
        if not slots:
            raise StateError("loader state has no worker states")
        # Each slot state is checked against this dataset and these arguments by an iterator.
        for slot in slots:
            self._iterator().load_state_dict(slot)
        self._loaded = {
            "format": LOADER_STATE_FORMAT,
            "next_slot": int(state.get("next_slot", 0)),
            "slots": slots,
        }
        self._slots = None

    # ------------------------------------------------------------------------------------ iteration

    def __iter__(self) -> Iterator[Any]:
        info = tud.get_worker_info()
        if info is None:  # the main process (num_workers=0)
            if not self._tagged:
                self._begin(1)
            worker, workers = 0, 1
        else:
            worker, workers = info.id, info.num_workers
            self.dataset._location = None  # make this process's own filesystem objects
        slots = self._slots
        if slots is None or len(slots) != workers:
            raise StateError(f"worker {worker}: the loader was not prepared for {workers} worker(s)")
        slot = (worker + self._first_slot) % workers
        it = self._iterator()
        it.load_state_dict(slots[slot])
        for batch in it:
            item = self.transform(batch)
            if self._tagged:
                yield _Tagged(item, slot, it.state_dict())
            else:
                self._delivered(slot, it.state_dict(), workers)
                yield item

    # ------------------------------------------------------------------------------------- internals

    def _iterator(self) -> DatasetIterator:
        return DatasetIterator(
            self.dataset, batch_size=self.batch_size, order=self.order, on_error=self.on_error
        )

    def _fresh_slots(self, workers: int) -> list[dict[str, Any]]:
        base = self._iterator().state_dict()
        pieces = split_batches(
            [tuple(r) for r in base["ranges"]],  # type: ignore[misc]
            workers,
            self.batch_size,
            drop_last=self.order.drop_last,
        )
        return [{**base, "ranges": [list(r) for r in piece], "cursor": 0, "seeks": []} for piece in pieces]

    def _begin(self, workers: int) -> None:
        """Fix the workers' pieces before they start: from a loaded state, or fresh for this epoch."""
        if self._loaded is None:
            self.check_workers(workers)
            slots, first = self._fresh_slots(workers), 0
        else:
            slots, first = self._loaded["slots"], int(self._loaded["next_slot"])
            if len(slots) != workers:
                slots, first = _regroup(slots, workers, self.batch_size, self.order.drop_last), 0
            self._loaded = None
        self._slots = [dict(s) for s in slots]
        self._first_slot = first % workers
        self._next_slot = self._first_slot

    def _delivered(self, slot: int, state: dict[str, Any], workers: int) -> None:
        if self._slots is not None:
            self._slots[slot] = state
        self._next_slot = (slot + 1) % workers

    def _loader_state(self, slots: list[dict[str, Any]], next_slot: int) -> dict[str, Any]:
        return {
            "format": LOADER_STATE_FORMAT,
            "num_workers": len(slots),
            "next_slot": next_slot,
            "rows_remaining": sum(range_rows(_ranges(s)) - int(s["cursor"]) for s in slots),
            "slots": copy.deepcopy(slots),
        }


def _ranges(state: Mapping[str, Any]) -> list[Range]:
    return [(int(a), int(b)) for a, b in state["ranges"]]


def _regroup(
    slots: list[dict[str, Any]], workers: int, batch_size: int, drop_last: bool
) -> list[dict[str, Any]]:
    """The rest of the workers' pieces, re-cut into ``workers`` pieces of whole batches."""
    remaining: list[Range] = []
    for slot in slots:
        remaining.extend(remaining_ranges(_ranges(slot), int(slot["cursor"])))
    remaining.sort()
    seeks = [seek for slot in slots for seek in slot.get("seeks", [])]
    base = slots[0]
    pieces = split_batches(remaining, workers, batch_size, drop_last=drop_last)
    return [
        {
            **base,
            "ranges": [list(r) for r in piece],
            "cursor": 0,
            "seeks": seeks,
            "skipped": base.get("skipped", []),
        }
        for piece in pieces
    ]


class DataLoader(tud.DataLoader):  # type: ignore[type-arg]
    """``torch.utils.data.DataLoader`` over a :class:`IterableDataset` that knows what it handed out:
    ``state_dict()`` / ``load_state_dict()`` are the dataset's, for the whole loader.

    The dataset makes the batches, so ``batch_size`` here must stay None; ``persistent_workers`` is
    refused (a worker that outlives an epoch cannot learn the next epoch or a loaded state).
    """

    def __init__(self, dataset: IterableDataset, **kwargs: Any) -> None:
        if not isinstance(dataset, IterableDataset):
            raise InputError("dsm.torch.DataLoader reads a dsm.torch.IterableDataset")
        if kwargs.get("batch_size") is not None and "batch_size" in kwargs:
            raise InputError(
                "leave the DataLoader's batch_size unset: dsm makes whole batches "
                "(set batch_size on dsm.torch.IterableDataset)"
            )
        if kwargs.get("persistent_workers"):
            raise InputError(
                "persistent_workers is not supported: workers must start with each epoch's state"
            )
        if kwargs.get("in_order") is False:
            raise InputError("in_order=False would make the batch order, and so the state, depend on timing")
        kwargs["batch_size"] = None
        kwargs["collate_fn"] = _TaggedCollate(kwargs.get("collate_fn"))
        dataset.check_workers(int(kwargs.get("num_workers", 0)))
        super().__init__(dataset, **kwargs)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        dataset: IterableDataset = self.dataset  # type: ignore[assignment]
        workers = max(self.num_workers, 1)
        dataset._begin(workers)
        dataset._tagged = True
        try:
            for tagged in super().__iter__():
                dataset._delivered(tagged.slot, tagged.state, workers)
                yield tagged.item
        finally:
            dataset._tagged = False

    def state_dict(self) -> dict[str, Any]:
        """The loader's state (see :meth:`IterableDataset.state_dict`)."""
        dataset: IterableDataset = self.dataset  # type: ignore[assignment]
        return dataset.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        dataset: IterableDataset = self.dataset  # type: ignore[assignment]
        dataset.load_state_dict(state)
