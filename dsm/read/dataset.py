"""The read platform: ``dsm.open(REF)`` and iterators with exact, cheap checkpoint and restart.

An iterator's order is a pure function of the contract and its arguments (see :mod:`dsm.read.order` and
docs/reading.md). Its state (``state_dict()``) is a small JSON-serialisable dict: the dataset's identity, the
arguments that define the order, this iterator's share of the epoch and a cursor counted in rows. Loading it
into a fresh iterator continues with exactly the rows the first would have yielded next, after a seek (a
Parquet row group from the footer, a JSONL byte offset recorded in the state), never a replay of the epoch.

>>> ds = dsm.open("web-text@prod")  # doctest: +SKIP
>>> it = ds.iterator(256, shuffle=True, seed=7, rank=0, world_size=4)  # doctest: +SKIP
>>> batch = next(it)  # doctest: +SKIP
>>> saved = it.state_dict()  # doctest: +SKIP
>>> again = ds.iterator(256, shuffle=True, seed=7, rank=0, world_size=4)  # doctest: +SKIP
>>> again.load_state_dict(saved)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

import pyarrow as pa

from dsm.contract import Contract, Shard
from dsm.errors import CheckFailed, InputError, SchemaError
from dsm.formats import Format, get_format
from dsm.read.cache import ShardCache
from dsm.read.iterator import DatasetIterator, ReadReport
from dsm.read.order import DEFAULT_BLOCK_ROWS
from dsm.read.state import (
    LOADER_STATE_FORMAT,
    STATE_FORMAT,
    IteratorState,
    ReadOrder,
    SkippedRows,
    dataset_identity,
    merge_states,
)
from dsm.registry import Registry, resolve
from dsm.shards import open_shard as reader_open_shard
from dsm.storage import Location, location, redact
from dsm.units import parse_size

__all__ = [
    "LOADER_STATE_FORMAT",
    "STATE_FORMAT",
    "Dataset",
    "DatasetIterator",
    "ReadReport",
    "SkippedRows",
    "dataset_identity",
    "merge_states",
    "open",
]


def open(
    ref: str | Contract,
    *,
    registry: str | Registry | None = None,
    columns: Sequence[str] | None = None,
    cache_dir: str | None = None,
    cache_limit: int | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Dataset:
    """Open a registered dataset for reading (``NAME``, ``NAME@3``, ``NAME@prod``, a contract path).

    ``columns`` projects by name. ``cache_dir`` keeps verified copies of remote shards on local disk, shared
    by every process using the same folder, within ``cache_limit`` (bytes, or text such as ``"50GB"``); a
    dataset on local disk is read in place. Nothing is read until an iterator asks.

    >>> ds = open("web-text@prod", cache_dir="/tmp/dsm-cache", cache_limit="50GB")  # doctest: +SKIP
    >>> ds.num_rows, ds.schema.names  # doctest: +SKIP
    (4000000, ['id', 'text'])
    """
    if cache_limit is not None and cache_dir is None:
        raise InputError("cache_limit needs cache_dir: give the folder the cache lives in")
    contract = resolve(ref, registry, storage_options)
    cache = None
    if cache_dir is not None:
        limit = None
        if cache_limit is not None:
            limit = parse_size(cache_limit, what="cache_limit")
        cache = ShardCache(cache_dir, limit=limit)
    return Dataset(contract, columns=columns, cache=cache, storage_options=storage_options)


class Dataset:
    """One version of a dataset, open for reading: its ``schema``, ``num_rows``, ``shards`` and iterators."""

    def __init__(
        self,
        contract: Contract,
        *,
        columns: Sequence[str] | None = None,
        cache: ShardCache | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        unknown = [s.path for s in contract.shards if s.rows is None]
        if unknown:
            raise InputError(
                f"{contract.ref}: the contract has no row count for shard {unknown[0]}; "
                "re-register the dataset so that every shard records its rows"
            )
        self.contract = contract
        self.identity = dataset_identity(contract)
        """What an iterator state is tied to (:func:`dsm.read.state.dataset_identity`); not the row
        fingerprint of the contract."""
        self._storage_options = dict(storage_options or {})
        self._location: Location | None = None
        self.format: Format = get_format(contract.format, **dict(contract.format_options))
        self._full_schema: pa.Schema = contract.schema.to_arrow()
        if columns is not None:
            columns = list(columns)
            missing = [c for c in columns if self._full_schema.get_field_index(c) < 0]
            if missing:
                raise SchemaError(
                    f"{contract.ref}: no column {', '.join(repr(c) for c in missing)} "
                    f"(columns: {', '.join(self._full_schema.names)})"
                )
        self.columns: tuple[str, ...] | None = tuple(columns) if columns is not None else None
        self.schema: pa.Schema = (
            pa.schema([self._full_schema.field(c) for c in self.columns])
            if self.columns
            else self._full_schema
        )
        self._cache = cache

    def __repr__(self) -> str:
        return f"Dataset({self.ref!r}, rows={self.num_rows}, shards={len(self.shards)})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_location"] = None  # filesystems are made again in the receiving process
        return state

    @property
    def ref(self) -> str:
        return self.contract.ref

    @property
    def fingerprint(self) -> str:
        """Deprecated name of :attr:`identity` (it is not the contract's row fingerprint)."""
        warnings.warn(
            "Dataset.fingerprint is renamed Dataset.identity (it is the identity a state is tied to, not the "
            "row fingerprint); the old name works until dsm 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.identity

    @property
    def num_rows(self) -> int:
        return sum(s.rows or 0 for s in self.contract.shards)

    @property
    def shards(self) -> tuple[Shard, ...]:
        return self.contract.shards

    @property
    def location(self) -> Location:
        if self._location is None:
            self._location = location(self.contract.location, self._storage_options)
        return self._location

    @property
    def cache(self) -> ShardCache | None:
        """The shard cache in use: None for datasets on local disk or without ``cache_dir``."""
        if self._cache is not None and self.location.is_local:
            return None
        return self._cache

    def iterator(
        self,
        batch_size: int,
        *,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
        on_error: str = "raise",
        block_rows: int = DEFAULT_BLOCK_ROWS,
    ) -> DatasetIterator:
        """An iterator over this rank's share of one epoch, as record batches of ``batch_size`` rows.

        The last batch may be short unless ``drop_last`` (which also gives every rank the same number of
        rows, so that ranks take the same number of steps). With ``shuffle``, shards are permuted by
        ``seed`` and ``epoch`` and rows within blocks of ``block_rows`` rows. ``on_error="skip"`` skips
        the rest of a shard that is corrupt or does not decode, and records it (``report()``, state).
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
        order = ReadOrder(
            shuffle=shuffle,
            seed=seed,
            epoch=epoch,
            block_rows=block_rows,
            rank=rank,
            world_size=world_size,
            drop_last=drop_last,
        )
        return DatasetIterator(self, batch_size=batch_size, order=order, on_error=on_error)

    def restore(self, state: Mapping[str, Any], *, batch_size: int | None = None) -> DatasetIterator:
        """A fresh iterator made with the arguments recorded in ``state``, with ``state`` loaded."""
        saved = IteratorState.from_dict(state)
        it = DatasetIterator(
            self, batch_size=batch_size or saved.batch_size, order=saved.order, on_error=saved.on_error
        )
        it.load_state_dict(state)
        return it

    def rows(self, **arguments: Any) -> Iterator[dict[str, Any]]:
        """Rows as dicts, in the order ``iterator(**arguments)`` gives (``batch_size`` defaults to 1024)."""
        arguments.setdefault("batch_size", 1024)
        return self.iterator(**arguments).rows()

    def close(self) -> None:
        """Stop background prefetching (iterators still work; they fetch on demand)."""
        if self._cache is not None:
            self._cache.close()

    # ------------------------------------------------------------------------------------- internals

    @contextlib.contextmanager
    def open_shard(self, index: int) -> Iterator[IO[bytes]]:
        """The file of shard ``index``: from the cache (verified), or from its location after a size check.

        Files on local disk (cached ones too) are opened as pyarrow native files, so decoding reads them
        without the Python file layer.
        """
        shard = self.contract.shards[index]
        cache = self.cache
        if cache is not None:
            with cache.open(self.location, shard) as handle, pa.OSFile(handle.name, "rb") as native:
                yield native  # type: ignore[misc]
            return
        loc = self.location
        size = loc.size(shard.path)
        if size != shard.bytes:
            raise CheckFailed(
                f"shard {redact(loc.url_of(shard.path))}: {size} bytes, the contract records {shard.bytes}: "
                "the file changed after registration; run `dsm verify` and restore it or re-register"
            )
        with reader_open_shard(loc, shard.path) as handle:
            yield handle

    def prefetch(self, indexes: Sequence[int]) -> None:
        """Ask the cache to download these shards next (no-op without a cache)."""
        cache = self.cache
        if cache is not None and indexes:
            cache.prefetch(self.location, [self.contract.shards[i] for i in indexes])
