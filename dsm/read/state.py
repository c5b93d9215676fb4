"""The state of a reader, as typed frozen objects: :class:`ReadOrder` (what decides which rows come and in
what order) and :class:`IteratorState` (where an iterator is), with the ``state_dict`` format they read
and write, and :func:`merge_states` to re-split the states of every rank among another number of ranks.

A state is a small JSON-serialisable dict (``IteratorState.to_dict()``): the dataset's identity, the order
arguments, the iterator's share of the epoch as ranges of positions, and a cursor counted in rows
(docs/reading.md, "State"). Its format is ``dsm-iterator-state/1`` and does not change within that name.

>>> order = ReadOrder(shuffle=True, seed=7, rank=1, world_size=4)
>>> ReadOrder.from_dict(order.to_dict()) == order
True
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import xxhash

from dsm.contract import Contract
from dsm.errors import InputError, StateError
from dsm.read.order import DEFAULT_BLOCK_ROWS, EpochOrder, Range, range_rows, remaining_ranges, split_ranges

__all__ = [
    "LOADER_STATE_FORMAT",
    "ORDER_ARGUMENTS",
    "STATE_FORMAT",
    "IteratorState",
    "ReadOrder",
    "SkippedRows",
    "dataset_identity",
    "merge_states",
]

STATE_FORMAT = "dsm-iterator-state/1"
"""The ``format`` value of every iterator state; a state of another format is refused."""

LOADER_STATE_FORMAT = "dsm-loader-state/1"
"""The ``format`` of a DataLoader's state (:mod:`dsm.read.torch`): one iterator state per worker of a rank."""

ORDER_ARGUMENTS = ("shuffle", "seed", "epoch", "block_rows", "rank", "world_size", "drop_last")
"""The iterator arguments that define which rows it yields and in what order (``batch_size`` only cuts)."""


def dataset_identity(contract: Contract) -> str:
    """The identity a state is tied to: a digest of the shards (paths, sizes, rows, checksums) and of the
    dataset's ordered row fingerprint. A new version with the same shards has the same identity; a moved
    copy (another location) too."""
    payload = {
        "shards": [[s.path, s.bytes, s.rows, s.checksum, s.ordered_fingerprint] for s in contract.shards],
        "fingerprint": contract.fingerprint.ordered if contract.fingerprint else None,
        "format": contract.format,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return f"xxh3-128:{xxhash.xxh3_128_hexdigest(text.encode('utf-8'))}"


@dataclass(frozen=True, kw_only=True)
class SkippedRows:
    """Rows an iterator with ``on_error="skip"`` did not yield: epoch positions ``[start, stop)``, all in
    ``shard`` from its within-shard row ``row``, and why."""

    shard: str
    start: int
    stop: int
    row: int
    error: str

    @property
    def rows(self) -> int:
        return self.stop - self.start

    def to_dict(self) -> dict[str, Any]:
        return {
            "shard": self.shard,
            "start": self.start,
            "stop": self.stop,
            "row": self.row,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SkippedRows:
        return cls(
            shard=str(data["shard"]),
            start=int(data["start"]),
            stop=int(data["stop"]),
            row=int(data["row"]),
            error=str(data["error"]),
        )


@dataclass(frozen=True, kw_only=True)
class ReadOrder:
    """The iterator arguments that decide which rows it yields and in what order (``batch_size`` only cuts
    them into batches): checked when made, so an order that exists is a valid one."""

    shuffle: bool = False
    seed: int = 0
    epoch: int = 0
    block_rows: int = DEFAULT_BLOCK_ROWS
    rank: int = 0
    world_size: int = 1
    drop_last: bool = False

    def __post_init__(self) -> None:
        for name in ("world_size", "block_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be a whole number of at least 1, got {value!r}")
        for name in ("seed", "epoch", "rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"{name} must be a whole number, got {value!r}")
        if self.epoch < 0:
            raise InputError(f"epoch must be at least 0, got {self.epoch}")
        if not 0 <= self.rank < self.world_size:
            raise InputError(
                f"rank must be in 0..{self.world_size - 1} for world_size {self.world_size}, got {self.rank}"
            )
        object.__setattr__(self, "shuffle", bool(self.shuffle))
        object.__setattr__(self, "drop_last", bool(self.drop_last))

    def to_dict(self) -> dict[str, Any]:
        """The ``order`` entry of a state (keys in :data:`ORDER_ARGUMENTS` order)."""
        return {name: getattr(self, name) for name in ORDER_ARGUMENTS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReadOrder:
        """The order a state's ``order`` entry records; StateError when it is not one."""
        missing = [name for name in ORDER_ARGUMENTS if name not in data]
        if missing:
            raise StateError(f"iterator state has no order argument {missing[0]!r}")
        try:
            return cls(**{name: data[name] for name in ORDER_ARGUMENTS})
        except InputError as exc:
            raise StateError(f"iterator state order: {exc}") from None

    def epoch_order(self, shard_rows: Sequence[int]) -> EpochOrder:
        """The global order of this epoch over shards of ``shard_rows`` rows."""
        return EpochOrder(
            shard_rows=tuple(int(r) for r in shard_rows),
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=self.epoch,
            block_rows=self.block_rows,
        )


@dataclass(frozen=True, kw_only=True)
class IteratorState:
    """Where one iterator is: the dataset it reads (``ref``, its identity as ``fingerprint``, ``rows``),
    its order, its share of the epoch (``ranges`` of positions) and how far into it it is (``cursor``).

    ``seeks`` are the format's resume points (a Parquet row group, a JSONL byte offset) near the cursor;
    ``skipped`` the rows passed over under ``on_error="skip"``.
    """

    dataset: Mapping[str, Any]
    order: ReadOrder
    batch_size: int
    on_error: str = "raise"
    ranges: tuple[Range, ...] = ()
    cursor: int = 0
    position: int | None = None
    seeks: tuple[Mapping[str, Any], ...] = ()
    skipped: tuple[SkippedRows, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The state dict (format :data:`STATE_FORMAT`)."""
        return {
            "format": STATE_FORMAT,
            "dataset": dict(self.dataset),
            "order": self.order.to_dict(),
            "batch_size": self.batch_size,
            "on_error": self.on_error,
            "ranges": [[start, stop] for start, stop in self.ranges],
            "cursor": self.cursor,
            "position": self.position,
            "seeks": [dict(seek) for seek in self.seeks],
            "skipped": [s.to_dict() for s in self.skipped],
        }

    @classmethod
    def from_dict(cls, state: Any) -> IteratorState:
        """The state a dict from ``state_dict()`` holds; StateError (saying what is wrong) when it is not
        one. Its ranges are checked against the epoch by :meth:`check_ranges`."""
        check_shape(state)
        try:
            ranges = tuple((int(start), int(stop)) for start, stop in state["ranges"])
        except (TypeError, ValueError):
            raise StateError("iterator state 'ranges' must be a list of [start, stop] pairs") from None
        return cls(
            dataset=dict(state["dataset"]),
            order=ReadOrder.from_dict(state["order"]),
            batch_size=int(state["batch_size"]),
            on_error=str(state.get("on_error", "raise")),
            ranges=ranges,
            cursor=int(state["cursor"]),
            position=state.get("position"),
            seeks=tuple(dict(seek) for seek in state.get("seeks", [])),
            skipped=tuple(SkippedRows.from_dict(s) for s in state.get("skipped", [])),
        )

    def check_ranges(self, total: int) -> None:
        """Refuse ranges outside an epoch of ``total`` rows, or a cursor outside the ranges."""
        check_ranges([list(r) for r in self.ranges], total)
        held = sum(stop - start for start, stop in self.ranges)
        if not 0 <= self.cursor <= held:
            raise StateError(f"state cursor {self.cursor} is outside its ranges ({held} rows)")


def check_shape(state: Any) -> None:
    if not isinstance(state, Mapping):
        raise StateError(f"a state is a dict from state_dict(), got {type(state).__name__}")
    if state.get("format") != STATE_FORMAT:
        raise StateError(
            f"not an iterator state of this dsm (format {state.get('format')!r}, expected {STATE_FORMAT!r})"
        )
    for key in ("dataset", "order", "ranges", "cursor", "batch_size"):
        if key not in state:
            raise StateError(f"iterator state has no {key!r}; pass the dict state_dict() returned, unchanged")
    missing = [name for name in ORDER_ARGUMENTS if name not in state["order"]]
    if missing:
        raise StateError(f"iterator state has no order argument {missing[0]!r}")


def check_dataset(saved: Mapping[str, Any], ref: str, identity: str) -> None:
    """Refuse a state saved reading another dataset (``saved`` is its ``dataset`` entry)."""
    if saved.get("fingerprint") != identity:
        raise StateError(
            f"the state was saved reading {saved.get('ref')} and this iterator reads {ref}, whose "
            f"shards or rows differ ({saved.get('fingerprint')} vs {identity}): a state resumes "
            f"only the dataset version it was saved from; open {saved.get('ref')} to resume it"
        )


def mismatch(name: str, saved: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    if name in ("rank", "world_size"):
        return (
            f"the state was saved by rank {saved['rank']} of {saved['world_size']}, and this iterator is "
            f"rank {current['rank']} of {current['world_size']}: load each rank's own state, or re-split the "
            "ranks' states for another world size with dsm.merge_states(states, world_size=N)"
        )
    return (
        f"the state was saved with {name}={saved[name]!r}, and this iterator has {name}={current[name]!r}: "
        "the rows that come next depend on it; make the iterator with the state's arguments "
        "(dataset.restore(state) does)"
    )


def check_ranges(raw: Any, total: int) -> list[Range]:
    ranges: list[Range] = []
    try:
        for start, stop in raw:
            ranges.append((int(start), int(stop)))
    except (TypeError, ValueError):
        raise StateError("iterator state 'ranges' must be a list of [start, stop] pairs") from None
    for start, stop in ranges:
        if not 0 <= start <= stop <= total:
            raise StateError(f"iterator state range [{start}, {stop}) is outside the epoch (0..{total})")
    return ranges


def _rank_state(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """An iterator state for the rank a loader state (one state per DataLoader worker) belongs to."""
    if not isinstance(state, Mapping) or state.get("format") != LOADER_STATE_FORMAT:
        return state
    slots = list(state.get("slots") or [])
    if not slots:
        raise StateError("loader state has no worker states")
    for slot in slots:
        check_shape(slot)
    remaining: list[Range] = []
    for slot in slots:
        remaining.extend(
            remaining_ranges(check_ranges(slot["ranges"], int(slot["dataset"]["rows"])), int(slot["cursor"]))
        )
    remaining.sort()
    return {
        **slots[0],
        "ranges": [[start, stop] for start, stop in remaining],
        "cursor": 0,
        "seeks": [seek for slot in slots for seek in slot.get("seeks", [])],
    }


def merge_states(states: Sequence[Mapping[str, Any]], world_size: int) -> list[dict[str, Any]]:
    """Re-split the rest of an epoch, saved as the states of every rank, among ``world_size`` new ranks.

    ``states`` holds one state per rank of the old world (any order): iterator states, or the loader states
    of ``dsm.torch``. The result holds one state per new
    rank (index = rank); across them, every row the old ranks had not yet yielded is read exactly once,
    in contiguous pieces of the remaining positions (with ``drop_last``, equal pieces and the last
    ``remaining % world_size`` rows are left out). Load result ``k`` into
    ``dataset.iterator(..., rank=k, world_size=world_size)`` or use ``dataset.restore(result[k])``.

    >>> new = merge_states([it.state_dict() for it in old_iterators], world_size=2)  # doctest: +SKIP
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise InputError(f"world_size must be a whole number of at least 1, got {world_size!r}")
    if not states:
        raise StateError("merge_states needs the states of every rank; got none")
    states = [_rank_state(state) for state in states]
    for state in states:
        check_shape(state)
    first = states[0]
    old_world = int(first["order"]["world_size"])
    for state in states:
        if state["dataset"].get("fingerprint") != first["dataset"].get("fingerprint"):
            raise StateError(
                f"states of different datasets ({first['dataset'].get('ref')} and "
                f"{state['dataset'].get('ref')}) cannot be merged"
            )
        for name in ORDER_ARGUMENTS:
            if name != "rank" and state["order"][name] != first["order"][name]:
                raise StateError(
                    mismatch(name, first["order"], state["order"]).replace("this iterator", "another")
                )
    ranks = sorted(int(s["order"]["rank"]) for s in states)
    if len(ranks) != old_world or ranks != list(range(old_world)):
        twice = sorted({r for r in ranks if ranks.count(r) > 1})
        if twice:
            problem = f"rank(s) {twice} given twice"
        elif old_world - len(ranks) <= 100:  # a world size from a state is never trusted to allocate
            problem = f"rank(s) {sorted(set(range(old_world)) - set(ranks))} missing"
        else:
            problem = f"{len(ranks)} state(s) for {old_world:,} ranks"
        raise StateError(
            f"merge_states needs exactly one state per rank of the old world size {old_world}: {problem}; "
            "without every rank's state, rows would be skipped or read twice"
        )
    remaining: list[Range] = []
    skipped: list[dict[str, Any]] = []
    seeks: list[dict[str, Any]] = []
    for state in states:
        ranges = check_ranges(state["ranges"], int(state["dataset"].get("rows", 0)))
        remaining.extend(remaining_ranges(ranges, int(state["cursor"])))
        skipped.extend(dict(s) for s in state.get("skipped", []))
        seeks.extend(dict(s) for s in state.get("seeks", []))
    remaining.sort()
    for (_, stop), (start, _) in itertools.pairwise(remaining):
        if start < stop:
            raise StateError("the states overlap (two ranks hold the same rows): they are not from one run")
    left = range_rows(remaining)
    if world_size > max(1, left):  # every rank past the rows would read nothing (and a list would grow)
        raise InputError(
            f"world_size {world_size:,} is more than the {left:,} row(s) left in the epoch: ranks would get "
            f"no rows; use at most {max(1, left):,}"
        )
    pieces = split_ranges(remaining, world_size, equal=bool(first["order"]["drop_last"]))
    base = IteratorState.from_dict(first)
    return [
        replace(
            base,
            order=replace(base.order, rank=rank, world_size=world_size),
            ranges=tuple(piece),
            cursor=0,
            position=piece[0][0] if piece else None,
            seeks=tuple(seeks),
            skipped=tuple(SkippedRows.from_dict(s) for s in skipped),
        ).to_dict()
        for rank, piece in enumerate(pieces)
    ]
