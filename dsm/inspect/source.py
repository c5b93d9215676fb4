"""A row source over a registered dataset: random access to rows, rendered by role and masked.

``open_rows(REF)`` gives a :class:`RowSource` over any dataset dsm reads (every format, local disk and object
stores). It knows ``num_rows`` from the contract and reads only what a look needs: ``read(offset, count)``
decodes the row groups (Parquet), record batches (Arrow), blocks of lines (JSONL, CSV) or tar members
(WebDataset) that hold those rows, found through each shard's row index (:mod:`dsm.inspect.index`). What it
returns is the plain view model of :mod:`dsm.inspect.view`, with classified fields masked: the raw values of a
masked field never leave this module. Unmasking is an argument of :func:`open_rows`, audited in the registry
before the source opens. That is also why the module is longer than 600 lines: reads, key lookups, episode
scans and media all handle unmasked values, and keeping them in one class keeps those values in one place.

>>> rows = open_rows("web-text@prod")  # doctest: +SKIP
>>> page = rows.read(4_000_000, 10, columns=["id", "text"])  # doctest: +SKIP
>>> page.rows[0].location.describe()  # doctest: +SKIP
'shard part-00031.parquet, row group 7 (row 1,234 of it), row 116,306 of the shard'
"""

from __future__ import annotations

import bisect
import contextlib
import posixpath
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dsm._version import tool_name
from dsm.contract import Contract, Shard
from dsm.errors import CheckFailed, FormatError, InputError, SchemaError
from dsm.formats import Format, ShardIndex, get_format
from dsm.inspect.episodes import EpisodeLayout, EpisodeSummary, EpisodeTracker
from dsm.inspect.index import IndexCache
from dsm.inspect.masking import MaskPolicy
from dsm.inspect.media import MediaRef, media_type_of_path, sniff
from dsm.inspect.positions import MAX_ROWS, KeyMatches, check_count, runs, sample_positions
from dsm.inspect.roles import RoleProposal, infer_roles
from dsm.inspect.view import (
    FieldView,
    RowLocation,
    RowPage,
    column_values,
    field_views,
    row_views,
)
from dsm.registry import Registry, open_registry
from dsm.shards import iter_open_shard, open_shard
from dsm.storage import Location, location, redact

if TYPE_CHECKING:
    from dsm.engine import Progress

__all__ = ["MAX_ROWS", "KeyMatches", "MediaRef", "RowSource", "open_rows"]


RANDOM_BLOCK = 1 << 20
"""Read-ahead of remote files opened for random access (a look reads a few pieces, not the whole file)."""

BATCH_BYTES = 16 << 20
"""Stored bytes decoded at once (at most 65,536 rows): memory stays bounded for wide rows (images, long
text) whatever the size of a row group."""

LOOK_BATCH_ROWS = 1024  # a look decodes up to the batch holding its last row, not the rest of the piece


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


class RowSource:
    """Rows of one dataset version, by position (0-based, shards in contract order).

    Build one with :func:`open_rows`. Every method that returns values returns view-model objects with
    ``policy``'s fields masked. Index lookups and footers are kept for the object's life.
    """

    def __init__(
        self,
        contract: Contract,
        *,
        policy: MaskPolicy | None = None,
        storage_options: Mapping[str, Any] | None = None,
        index_cache: IndexCache | None = None,
    ) -> None:
        unknown = [s.path for s in contract.shards if s.rows is None]
        if unknown:
            raise InputError(
                f"{contract.ref}: the contract has no row count for shard {unknown[0]}; "
                "re-register the dataset so that every shard records its rows"
            )
        self.contract = contract
        self.policy = policy or MaskPolicy.of(contract.schema)
        self.format: Format = get_format(contract.format, **dict(contract.format_options))
        self.schema: pa.Schema = contract.schema.to_arrow()
        self.fields: tuple[FieldView, ...] = field_views(
            contract.schema.fields, self.policy, contract.schema.key
        )
        self.episode_layout = EpisodeLayout.of(self.fields)
        self.index_cache = index_cache or IndexCache()
        self._storage_options = dict(storage_options or {})
        self._location: Location | None = None
        self._episodes: tuple[EpisodeSummary, ...] | None = None
        self._episodes_lock = threading.Lock()
        self._starts = [0]
        for shard in contract.shards:
            self._starts.append(self._starts[-1] + int(shard.rows or 0))

    def __repr__(self) -> str:
        return f"RowSource({self.ref!r}, rows={self.num_rows})"

    # ------------------------------------------------------------------------------------- properties

    @property
    def ref(self) -> str:
        return self.contract.ref

    @property
    def num_rows(self) -> int:
        """Rows of the dataset, from the contract (nothing is read)."""
        return self._starts[-1]

    @property
    def shards(self) -> tuple[Shard, ...]:
        return self.contract.shards

    @property
    def location(self) -> Location:
        if self._location is None:
            self._location = location(self.contract.location, self._storage_options)
        return self._location

    def field(self, name: str) -> FieldView:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaError(f"{self.ref}: no field {name!r} (fields: {', '.join(f.name for f in self.fields)})")

    def shard_start(self, index: int) -> int:
        """The position of the first row of shard ``index``."""
        return self._starts[index]

    # ---------------------------------------------------------------------------------------- positions

    def _check_position(self, position: int) -> None:
        if not 0 <= position < self.num_rows:
            raise InputError(
                f"{self.ref}: row {position:,} does not exist; rows are 0 to {self.num_rows - 1:,}"
                if self.num_rows
                else f"{self.ref}: the dataset has no rows"
            )

    def shard_of(self, position: int) -> tuple[int, int]:
        """``(shard index, row within the shard)`` of a position."""
        self._check_position(position)
        shard = bisect.bisect_right(self._starts, position) - 1
        return shard, position - self._starts[shard]

    @contextlib.contextmanager
    def _open(self, shard: int, *, scan: bool = False) -> Iterator[IO[bytes]]:
        path = self.contract.shards[shard].path
        loc = self.location
        if loc.is_local:
            with open_shard(loc, path) as handle:
                yield handle
            return
        options: dict[str, Any] = {} if scan else {"block_size": RANDOM_BLOCK}
        with loc.open(path, "rb", **options) as handle:
            yield handle

    def index(self, shard: int) -> ShardIndex:
        """The row index of shard ``shard`` (built or loaded on first use, see :mod:`dsm.inspect.index`)."""
        return self.index_cache.get(
            self.location,
            self.contract.shards[shard],
            self.format,
            lambda: self._open(shard, scan=True),
            schema=self.schema,
        )

    def _locations(self, shard: int, rows: Sequence[int]) -> list[RowLocation]:
        """Locations of ``rows`` (increasing) of one shard; line formats read their blocks for the lines."""
        index = self.index(shard)
        path = self.contract.shards[shard].path
        lines: dict[int, tuple[int, int]] = {}
        if index.kind == "lines" and rows:
            with self._open(shard) as handle:
                for start, stop in runs(rows):
                    found = self.format.row_lines(handle, index, shard=path, start=start, stop=stop)
                    for step, place in enumerate(found or []):
                        lines[start + step] = place
        out = []
        for row in rows:
            piece = index.piece_of(row)
            line: int | None = None
            offset: int | None = None
            if row in lines:
                line, offset = lines[row]
            elif len(index.offsets) == len(index.starts):
                offset = int(index.offsets[piece])
            out.append(
                RowLocation(
                    position=self._starts[shard] + row,
                    shard=path,
                    shard_index=shard,
                    row=row,
                    piece_kind=index.kind,
                    piece=piece,
                    piece_row=row - int(index.starts[piece]),
                    line=line,
                    byte_offset=offset,
                )
            )
        return out

    def locate(self, position: int) -> RowLocation:
        """Where row ``position`` lives: shard, row group (record batch, block, sample), line."""
        shard, row = self.shard_of(position)
        return self._locations(shard, [row])[0]

    # ------------------------------------------------------------------------------------------ reading

    def _columns(self, columns: Sequence[str] | None) -> list[str]:
        if columns is None:
            return list(self.schema.names)
        names = list(dict.fromkeys(columns))
        missing = [c for c in names if self.schema.get_field_index(c) < 0]
        if missing:
            raise SchemaError(
                f"{self.ref}: no column {', '.join(repr(c) for c in missing)} "
                f"(columns: {', '.join(self.schema.names)})"
            )
        return names

    def _shard_rows(self, shard: int, start: int, stop: int, columns: list[str]) -> pa.Table:
        """Rows ``start`` up to ``stop`` of one shard, unmasked (private to this package)."""
        index = self.index(shard)
        path = self.contract.shards[shard].path
        schema = pa.schema([self.schema.field(c) for c in columns])
        with self._open(shard) as handle:
            try:
                batches = list(
                    self.format.read_rows(
                        handle,
                        index,
                        shard=path,
                        start=start,
                        stop=stop,
                        schema=self.schema,
                        columns=columns,
                        batch_rows=min(self._batch_rows(shard), max(LOOK_BATCH_ROWS, stop - start)),
                    )
                )
            except (FormatError, SchemaError, InputError):
                raise
            except (pa.ArrowException, ValueError, EOFError) as exc:
                raise FormatError(
                    f"shard {redact(self.location.url_of(path))}: cannot be decoded ({exc})"
                ) from None
        table = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
        if table.num_rows != stop - start:
            raise CheckFailed(
                f"shard {redact(self.location.url_of(path))}: rows {start}..{stop} gave {table.num_rows} "
                "rows; the file changed after registration; run `dsm verify`"
            )
        return table

    def _range(self, offset: int, count: int, columns: list[str]) -> tuple[pa.Table, list[RowLocation]]:
        """Rows ``offset`` up to ``offset + count`` (unmasked) and their locations."""
        tables, places = [], []
        stop = min(offset + count, self.num_rows)
        position = offset
        while position < stop:
            shard, row = self.shard_of(position)
            end = min(stop - self._starts[shard], int(self.contract.shards[shard].rows or 0))
            tables.append(self._shard_rows(shard, row, end, columns))
            places += self._locations(shard, range(row, end))
            position = self._starts[shard] + end
        return _concat(tables, pa.schema([self.schema.field(c) for c in columns])), places

    def _take(self, positions: Sequence[int], columns: list[str]) -> tuple[pa.Table, list[RowLocation]]:
        """Rows at ``positions`` (in the order given; unmasked) and their locations. Each piece holding
        a wanted row is decoded once."""
        wanted = sorted(set(positions))
        by_shard: dict[int, list[int]] = {}
        for position in wanted:
            shard, row = self.shard_of(position)
            by_shard.setdefault(shard, []).append(row)
        found: dict[int, tuple[pa.Table, int]] = {}
        places: dict[int, RowLocation] = {}
        for shard, rows in by_shard.items():
            index = self.index(shard)
            groups: dict[int, list[int]] = {}
            for row in rows:
                groups.setdefault(index.piece_of(row), []).append(row)
            for group in groups.values():
                table = self._shard_rows(shard, group[0], group[-1] + 1, columns)
                for row in group:
                    found[self._starts[shard] + row] = (table, row - group[0])
            for place in self._locations(shard, rows):
                places[place.position] = place
        schema = pa.schema([self.schema.field(c) for c in columns])
        pieces = [found[p][0].slice(found[p][1], 1) for p in positions]
        return _concat(pieces, schema), [places[p] for p in positions]

    def _page(
        self,
        table: pa.Table,
        places: list[RowLocation],
        selection: Mapping[str, Any],
        episodes_of_rows: bool = True,
    ) -> RowPage:
        shown = [f for f in self.fields if f.name in table.column_names]
        episodes: tuple[EpisodeSummary, ...] = ()
        if self.episode_layout is not None and places and episodes_of_rows:
            episodes = self.episodes(positions=[p.position for p in places])
        return RowPage(
            dataset=self.ref,
            total_rows=self.num_rows,
            selection=dict(selection),
            fields=tuple(shown),
            rows=row_views(table, places, shown),
            episodes=episodes,
            masked=tuple(n for n in self.policy.masked if n in table.column_names),
            unmasked=self.policy.unmasked,
            notes=tuple(self.index_cache.notes),
        )

    def read(
        self, offset: int, count: int, *, columns: Sequence[str] | None = None, episodes: bool = True
    ) -> RowPage:
        """Rows ``offset`` up to ``offset + count`` (fewer at the end), rendered and masked.

        ``episodes=False`` leaves :attr:`RowPage.episodes` empty: the first summary of a ``rows`` or
        ``stream`` layout scans the RL columns of the whole dataset, which a viewer paging through rows
        asks for separately (:meth:`episodes`), in the background."""
        check_count(count)
        if offset < 0:
            raise InputError(f"offset must be at least 0, got {offset}")
        if offset > self.num_rows:
            raise InputError(f"{self.ref}: offset {offset:,} is past the last row ({self.num_rows:,} rows)")
        table, places = self._range(offset, count, self._columns(columns))
        return self._page(table, places, {"kind": "range", "offset": offset, "count": count}, episodes)

    def take(
        self,
        positions: Sequence[int],
        *,
        columns: Sequence[str] | None = None,
        selection: Mapping[str, Any] | None = None,
        episodes: bool = True,
    ) -> RowPage:
        """The rows at ``positions``, in that order, rendered and masked (``episodes`` as in
        :meth:`read`)."""
        check_count(len(positions))
        table, places = self._take(list(positions), self._columns(columns))
        chosen = selection or {"kind": "positions", "positions": list(positions)}
        return self._page(table, places, chosen, episodes)

    def sample(self, count: int, *, seed: int = 0, columns: Sequence[str] | None = None) -> RowPage:
        """``count`` rows drawn uniformly from the whole dataset (same ``seed``, same rows), in position
        order; only the pieces holding them are decoded."""
        check_count(count)
        positions = sample_positions(self.num_rows, count, seed)
        table, places = self._take(positions, self._columns(columns))
        return self._page(table, places, {"kind": "sample", "count": count, "seed": seed})

    # ------------------------------------------------------------------------------------------ scanning

    def _batch_rows(self, shard: int) -> int:
        """Rows decoded at once from ``shard``: about :data:`BATCH_BYTES` of it as stored."""
        entry = self.contract.shards[shard]
        per_row = entry.bytes / max(int(entry.rows or 1), 1)
        return int(max(1, min(65_536, BATCH_BYTES // max(per_row, 1))))

    def _scan_shard(self, shard: int, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        """Every row of one shard, projected to ``columns``, unmasked (private to this package)."""
        path = self.contract.shards[shard].path
        batch_rows = self._batch_rows(shard)
        with self._open(shard, scan=True) as handle:
            yield from iter_open_shard(
                handle,
                self.location,
                path,
                self.format,
                schema=self.schema,
                columns=list(columns),
                batch_rows=batch_rows,
            )

    def _scan(
        self, columns: Sequence[str], progress: Progress | None = None, what: str = "scan"
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """``(position of its first row, batch)`` over the whole dataset in order, unmasked; ``progress``
        moves by the stored bytes each batch stands for."""
        shards = self.contract.shards
        if progress is not None:
            progress.start(total_bytes=self.contract.total_bytes, total_units=len(shards), description=what)
        try:
            for shard in range(len(shards)):
                position = self._starts[shard]
                per_row = shards[shard].bytes / max(int(shards[shard].rows or 1), 1)
                for batch in self._scan_shard(shard, columns):
                    yield position, batch
                    position += batch.num_rows
                    if progress is not None:
                        progress.advance(int(per_row * batch.num_rows))
        finally:
            if progress is not None:
                progress.finish()

    def find(
        self,
        key: Mapping[str, Any],
        *,
        all: bool = False,
        limit: int = 10_000,
        progress: Progress | None = None,
    ) -> KeyMatches:
        """Positions of rows whose fields equal ``key`` (text values are parsed by the field's type).

        Reads only the key's columns; stops at the first match unless ``all`` (then at ``limit`` matches).
        """
        import pyarrow.compute as pc

        if not key:
            raise InputError("give at least one KEY=VALUE to find")
        columns = self._columns(list(key))
        wanted = {name: self._key_value(name, value) for name, value in key.items()}
        found: list[int] = []
        scanned = 0
        for position, batch in self._scan(columns, progress, f"find in {self.ref}"):
            mask = None
            for name, value in wanted.items():
                column = batch.column(name)
                hit = pc.is_null(column) if value is None else pc.fill_null(pc.equal(column, value), False)
                mask = hit if mask is None else pc.and_(mask, hit)
            if mask is None:
                continue
            for hit in np.flatnonzero(mask.to_numpy(zero_copy_only=False)):
                found.append(position + int(hit))
                if not all or len(found) >= limit:
                    return KeyMatches(
                        positions=tuple(found), scanned_rows=scanned + int(hit) + 1, complete=False
                    )
            scanned += batch.num_rows
        return KeyMatches(positions=tuple(found), scanned_rows=scanned, complete=True)

    def _key_value(self, name: str, value: Any) -> pa.Scalar | None:
        type_ = self.schema.field(name).type
        if value is None:
            return None
        try:
            if isinstance(value, str) and not (pa.types.is_string(type_) or pa.types.is_large_string(type_)):
                return pa.scalar(value, pa.string()).cast(type_)
            return pa.scalar(value, type_)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            shown = self.policy.text(name, value)
            raise InputError(
                f"{self.ref}: {name}={shown} is not a value of the field's type {type_}"
            ) from None

    def propose_roles(self, *, rows: int = 500) -> list[RoleProposal]:
        """Roles for the fields without one, proposed from names and the first ``rows`` rows (see
        :func:`dsm.inspect.roles.infer_roles`); no value is returned."""
        table, _ = self._range(0, min(rows, self.num_rows), list(self.schema.names))
        return infer_roles(table, known={f.name: f.role for f in self.fields})

    # ---------------------------------------------------------------------------------------- episodes

    def episodes(
        self,
        *,
        positions: Sequence[int] | None = None,
        episode_ids: Sequence[Any] | None = None,
        progress: Progress | None = None,
    ) -> tuple[EpisodeSummary, ...]:
        """Summaries of the episodes of an RL dataset (see :mod:`dsm.inspect.episodes`): all of them, or
        those holding ``positions``, or with ``episode_ids``. () when the dataset has no RL roles.

        Reads only the RL columns; the ``list`` layout reads only the rows asked.
        """
        layout = self.episode_layout
        if layout is None:
            return ()
        if any(self.policy.is_masked(name) for name in layout.columns):
            return ()  # summaries would show values of a masked field
        if layout.layout == "list" and positions is not None:
            tracker = EpisodeTracker(layout, wanted=positions)
            table, _ = self._take(sorted(set(positions)), layout.columns)
            for position, row in zip(sorted(set(positions)), range(table.num_rows), strict=True):
                tracker.add(table.slice(row, 1), position)
            return tuple(tracker.finish())
        every = self._all_episodes(layout, progress)
        if positions is None and episode_ids is None:
            return every
        if positions is not None and layout.layout == "rows" and layout.episode is not None:
            table, _ = self._take(sorted(set(positions)), [layout.episode])
            episode_ids = column_values(table.column(layout.episode))
        if episode_ids is not None:
            wanted = {_hashable(e) for e in episode_ids}
            return tuple(e for e in every if _hashable(e.episode) in wanted)
        spots = sorted(set(positions or ()))
        return tuple(e for e in every if any(e.first_position <= p <= e.last_position for p in spots))

    def _all_episodes(
        self, layout: EpisodeLayout, progress: Progress | None = None
    ) -> tuple[EpisodeSummary, ...]:
        """Every episode, from one scan of the RL columns, kept for this source's life (a viewer paging
        through the rows pays for the scan once)."""
        with self._episodes_lock:  # one scan when several threads ask at once
            if self._episodes is None:
                tracker = EpisodeTracker(layout)
                for position, batch in self._scan(layout.columns, progress, f"episodes of {self.ref}"):
                    tracker.add(batch, position)
                self._episodes = tuple(tracker.finish())
            return self._episodes

    # -------------------------------------------------------------------------------------------- media

    def media_ref(self, position: int, field: str) -> MediaRef:
        """Where the bytes of ``field`` at row ``position`` are (see :class:`MediaRef`)."""
        return self._media(position, field)[0]

    def media_bytes(self, position: int, field: str, *, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``start`` up to ``end`` of the media value of ``field`` at row ``position``; a stored
        member or a referenced file is read in that range only (an HTTP Range request maps onto it)."""
        ref, value = self._media(position, field)
        end = ref.size if end is None else min(end, ref.size)
        if not 0 <= start <= end:
            raise InputError(f"byte range {start}..{end} is not within the value's {ref.size} bytes")
        if ref.source == "member":
            path = self.contract.shards[self.shard_of(position)[0]].path
            return self._read_range(self.location, path, int(ref.offset or 0) + start, end - start)
        if ref.source == "file":
            return self._read_range(*self._referenced(str(value)), start, end - start)
        return bytes(value)[start:end]

    def _media(self, position: int, field: str) -> tuple[MediaRef, Any]:
        """The reference to a media value, and the value decoded from the row (None for a member)."""
        view = self.field(field)
        if view.masked:
            raise InputError(
                f"{self.ref}: field {field!r} is classified ({view.classification}); open the source with "
                f"unmask=[{field!r}] (audited) to read its bytes"
            )
        shard, row = self.shard_of(position)
        path = self.contract.shards[shard].path
        stored = self.format.value_range(self.index(shard), row, field)
        if stored is not None:
            head = self._read_range(self.location, path, stored[0], min(stored[1], 64))
            url = redact(self.location.url_of(path))
            media_type = view.media_type or sniff(head).media_type
            ref = MediaRef(
                position=position,
                field=field,
                source="member",
                media_type=media_type,
                size=stored[1],
                url=url,
            )
            return replace(ref, offset=stored[0], length=stored[1]), None
        value = self._shard_rows(shard, row, row + 1, [field]).column(0)[0].as_py()
        if value is None:
            raise InputError(f"{self.ref}: row {position:,} has no value in {field!r} (null)")
        if isinstance(value, str):
            loc, rel = self._referenced(value)
            size, url = loc.size(rel), redact(loc.url_of(rel))
            media_type = view.media_type or media_type_of_path(value)
            ref = MediaRef(
                position=position, field=field, source="file", media_type=media_type, size=size, url=url
            )
            return replace(ref, offset=0, length=size), value
        data = bytes(value)
        media_type = view.media_type or sniff(data[:64]).media_type
        return MediaRef(
            position=position, field=field, source="value", media_type=media_type, size=len(data)
        ), data

    def _referenced(self, value: str) -> tuple[Location, str]:
        """The location and path of a file a path value names: relative to the dataset, or a URL."""
        if "://" in value or value.startswith("/"):
            parent, _, name = value.rstrip("/").rpartition("/")
            return location(parent or "/", self._storage_options), name
        return self.location, posixpath.normpath(value)

    @staticmethod
    def _read_range(loc: Location, rel: str, offset: int, size: int) -> bytes:
        with loc.open(rel, "rb", **({} if loc.is_local else {"block_size": max(size, 1)})) as handle:
            handle.seek(offset)
            data = handle.read(size)
        if len(data) != size:
            raise CheckFailed(f"{redact(loc.url_of(rel))}: ends before byte {offset + size}; it changed")
        return bytes(data)


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def open_rows(
    ref: str | Contract,
    *,
    registry: str | Registry | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    command: str = "open_rows",
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> RowSource:
    """A :class:`RowSource` over the dataset ``ref`` names (``NAME``, ``NAME@3``, ``NAME@prod``, a contract
    file, or a :class:`Contract`).

    Fields with a ``classification`` are masked in everything the source returns. ``unmask`` names
    classified fields to show: each unmasking is recorded in the registry's audit log (who, when, which
    dataset, fields, ``command`` and ``reason``) before the source is returned; if the record cannot be
    written, nothing is unmasked and :class:`dsm.errors.StorageError` is raised.
    """
    reg = open_registry(registry, storage_options)
    contract = reg.resolve(ref)
    policy = MaskPolicy.of(contract.schema, unmask)
    if policy.unmasked:
        reg.record_unmask(
            dataset=contract.name,
            version=contract.version,
            fields=policy.unmasked,
            classifications=dict(policy.classified),
            command=command,
            reason=reason,
            tool=tool_name(),
        )
    return RowSource(
        contract, policy=policy, storage_options=storage_options, index_cache=IndexCache(cache_dir)
    )
