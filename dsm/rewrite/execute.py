"""Executing the units of a rewrite plan: stream record batches from source shards into output files.

Every unit streams batches of about ``plan.batch_rows`` rows, so memory is bounded by a few batches (plus
one Parquet row group being built, or one shuffle bucket) whatever the size of the dataset or of a shard.

**Shuffle (two passes, external).** Pass 1 (*scatter*, one unit per source shard or Parquet row range): each
row's global index ``g`` goes through the seeded permutation (:mod:`dsm.hashing.permutation`) to its output
*position* ``p``; the positions are cut into buckets of about ``BUCKET_BYTES`` of decoded rows (an output
file is one or more consecutive buckets); the rows, with a ``p`` column, go to the unit's Arrow IPC spill
file grouped by bucket, one IPC batch per bucket for each ``SPILL_BUFFER_BYTES`` of rows read, and an index
of which IPC batch holds which bucket. Pass 2 (*gather*, one unit per output file): for each of its buckets
in order, read that bucket's pieces from every spill file (random access), put each row at its place (``p``
less the bucket's first position), drop ``p`` and write. Output file ``k`` thus holds the rows whose
positions fall in its range, in position order: a uniform global shuffle, the same for a seed whatever the
worker count, in memory bounded by one bucket per worker.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from dsm import _testing
from dsm.arrow_types import take
from dsm.contract import Contract, Shard
from dsm.engine.ahead import ReadAhead
from dsm.engine.base import workers_idle
from dsm.errors import CheckFailed
from dsm.formats import DEFAULT_BATCH_ROWS, Format, contract_format, convert_batch
from dsm.formats.arrow import ArrowFormat
from dsm.hashing.checksum import HashingWriter
from dsm.hashing.fingerprint import RowDigest, digest_batch
from dsm.hashing.permutation import Permutation
from dsm.rewrite.chains import Unit, UnitChain
from dsm.rewrite.journal import JOURNAL_DIR, Journal
from dsm.rewrite.plan import OutputUnit, RewritePlan, ScatterUnit, SourceRange
from dsm.rewrite.reading import Kept, read_range, short_rows
from dsm.shards import DescribedShard, describe_shard, shard_entry
from dsm.storage import Location, redact

__all__ = [
    "POSITION_FIELD",
    "RewriteContext",
    "copy_units",
    "gather_unit",
    "scatter_units",
    "source_format",
    "spill_name",
]

POSITION_FIELD = "__dsm_position__"
TAIL_AHEAD = 8
"""Batches decoded ahead of the writer once a worker is idle (:func:`_write_file`): at up to ~8 MiB each,
two row groups of ``ROW_GROUP_BYTES``, read while the writer encodes the one before."""


def _spill_format(spill: Location) -> ArrowFormat:
    """Arrow IPC for shuffle spill files: uncompressed on local disk, where they are read back from the page
    cache (lz4 took a sixth of a shuffled reshard's CPU there); lz4 elsewhere, to send and fetch fewer bytes.
    A reader needs neither: IPC records each buffer's codec."""
    return ArrowFormat() if spill.is_local else ArrowFormat(compression="lz4")


def source_format(contract: Contract) -> Format:
    """The format instance that reads ``contract``'s shards (its recorded options included)."""
    return contract_format(contract)


@dataclass(kw_only=True)
class RewriteContext:
    """What every unit of one rewrite needs: where to read and write, how, and the plan.

    It is data only (the executor may pickle it to other processes or machines: locations cross as their
    URLs and are opened again there); progress is the caller's, advanced as units finish.
    """

    source: Contract
    source_loc: Location
    source_fmt: Format
    dest: Location
    out_fmt: Format
    schema: pa.Schema
    """The source's schema: the rows are read with it."""
    plan: RewritePlan
    journal: Journal
    spill: Location | None = None
    """Where the shuffle's pass-1 files go (default: the journal's folder at the destination)."""
    bucket_pieces: Mapping[int, Sequence[tuple[int, int]]] = field(default_factory=dict)
    read_back: bool = False
    """Prove each written file by reading it back (else from the written batches and bytes)."""
    checked_in_read: frozenset[str] = frozenset()
    """Source shards whose size and checksum are checked by the read that copies them (one read each)."""
    fragments: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """The fragment rows of the source shards that units split (:func:`~dsm.rewrite.chains.chain_units`)."""
    out_schema: pa.Schema | None = None
    """What the target format's files hold (``Format.storage``); the source's schema when None."""
    keep_groups: bool = False
    """Write source Parquet row groups as stored where they can be (:mod:`dsm.rewrite.reading`)."""

    @property
    def written_schema(self) -> pa.Schema:
        return self.schema if self.out_schema is None else self.out_schema

    @property
    def spill_loc(self) -> Location:
        return self.spill if self.spill is not None else self.dest.child(JOURNAL_DIR)

    def shard(self, path: str) -> Shard:
        return self.source.shard(path)

    def check_of(self, rng: SourceRange) -> Shard | None:
        """The contract entry to check ``rng``'s shard against while reading it, if this read does."""
        return self.shard(rng.shard) if rng.whole and rng.shard in self.checked_in_read else None

    def range_bytes(self, rng: SourceRange) -> int:
        shard = self.shard(rng.shard)
        return shard.bytes * (rng.stop - rng.start) // max(1, shard.rows or 0)

    def unit_bytes(self, unit: OutputUnit) -> int:
        """The source bytes an output file stands for (what the progress bar advances by)."""
        if self.plan.shuffle:
            return self.source.total_bytes * unit.rows // max(1, self.plan.total_rows)
        return sum(self.range_bytes(r) for r in unit.ranges)


def spill_name(index: int) -> str:
    """The name of shuffle pass-1 file ``index`` in the spill location."""
    return f"_scatter-{index:05d}.arrow"


# --------------------------------------------------------------------------------------------- writing


@dataclass(frozen=True, kw_only=True)
class _Written:
    """What writing one output file measured: its size and checksum (from the bytes as they were written)
    and the row digest of the batches handed to the writer."""

    size: int
    checksum: str
    digest: RowDigest


def _digested(
    batches: Iterable[pa.RecordBatch | Kept], schema: pa.Schema, into: list[RowDigest]
) -> Iterator[pa.RecordBatch | Kept]:
    """``batches`` converted exactly into ``schema`` (the types the target stores), adding each one's row
    digest to ``into[0]``: the digest is of the values the writer is given (of a kept group, of its rows
    decoded from the bytes the writer is given)."""
    for batch in batches:
        if isinstance(batch, Kept):
            into[0] = into[0] + batch.digest
            yield batch
            continue
        batch = convert_batch(batch, schema)
        into[0] = into[0] + digest_batch(batch)
        yield batch


def _write_file(
    dest: Location, path: str, fmt: Format, schema: pa.Schema, batches: Iterable[pa.RecordBatch | Kept]
) -> _Written:
    """Write ``batches`` as the file ``path`` (temporary name, renamed when complete).

    The rows are digested as they are handed to the writer and the bytes hashed as they are written, so the
    file's contract entry needs no second read; the digest is taken in the read-ahead thread, beside the
    encoding.

    The read-ahead thread keeps one batch ready while the executor's other workers have units of their own.
    Once one has none left (the last files of a job), it may run :data:`TAIL_AHEAD` batches ahead: a
    Parquet writer encodes a whole row group in one call, and with one batch ready the reading waited for
    it, so a file written alone took one core of two (the last of a JSONL -> Parquet of seven files ran
    alone on one core for 2.2 s of the job's 11.7).
    """
    digest = [RowDigest.empty()]
    with dest.atomic_writer(path) as handle:
        sink = HashingWriter(handle)
        writer = fmt.open_writer(sink, schema)  # type: ignore[arg-type]
        ahead = ReadAhead(_digested(batches, schema, digest))
        alone = False
        try:
            for count, batch in enumerate(ahead):
                if not alone and workers_idle():
                    alone = True
                    ahead.deepen(TAIL_AHEAD)
                if isinstance(batch, Kept):
                    writer.write_stored(batch.group)
                else:
                    writer.write_batch(batch)
                if count == 0:
                    _testing.writing(path)  # a test's worker-death point (dsm._testing)
            writer.close()
        except BaseException:
            writer.abort()  # an unfinished writer must not flush into the file when it is collected
            raise
        finally:
            ahead.close()
        sink.flush()
    return _Written(size=sink.size, checksum=sink.checksum, digest=digest[0])


def _check_output(ctx: RewriteContext, unit: OutputUnit, digest: RowDigest, how: str) -> None:
    """The rows of one output file against the plan and, for a one-to-one rewrite, its source shard."""
    if digest.rows != unit.rows:
        raise CheckFailed(
            f"output {redact(ctx.dest.url_of(unit.path))}: {how} {digest.rows} rows, "
            f"{unit.rows} were planned; the target format did not keep every row"
        )
    origin = unit.source_shard
    if origin is not None and not ctx.plan.shuffle:
        expected = ctx.shard(origin)
        if (expected.fingerprint, expected.ordered_fingerprint) != (digest.unordered, digest.ordered):
            raise CheckFailed(
                f"output {unit.path}: row fingerprint {digest.unordered[:12]}.. differs from source "
                f"shard {origin} ({(expected.fingerprint or '')[:12]}..): a value changed in the conversion "
                f"to {ctx.out_fmt.name}; nothing was registered"
            )


def _describe_output(ctx: RewriteContext, unit: OutputUnit, written: _Written) -> DescribedShard:
    """The contract entry of a written file, proven as ``ctx.read_back`` asks.

    Default (``written-batches``): the checksum and size of the bytes as written (the size also checked
    against storage) and the digest of the batches handed to the writer. With ``read_back``: the file is
    read again as a reader will (checksum of the stored bytes, rows decoded under the contract schema),
    which also catches a writer that changes a value.
    """
    if not ctx.read_back:
        stored = ctx.dest.size(unit.path)
        if stored != written.size:
            raise CheckFailed(
                f"output {redact(ctx.dest.url_of(unit.path))}: {stored} bytes on storage, {written.size} "
                "were written; the storage did not keep the whole file; run again with --overwrite"
            )
        _check_output(ctx, unit, written.digest, "wrote")
        entry = shard_entry(unit.path, written.size, written.checksum, written.digest)
        return DescribedShard(shard=entry, digest=written.digest)
    # hand the writer's freed buffers back before decoding again (the dsm command keeps freed pages instead:
    # dsm.cli._arrow_allocator_for_bulk_work)
    pa.default_memory_pool().release_unused()
    found = describe_shard(
        ctx.dest, unit.path, ctx.out_fmt, ctx.written_schema, batch_rows=ctx.plan.batch_rows
    )
    _check_output(ctx, unit, found.digest, "reads back")
    return found


class _RowStream:
    """One stream of batches cut into consecutive parts of given row counts (the units of a chain)."""

    def __init__(self, batches: Iterator[pa.RecordBatch | Kept]) -> None:
        self._batches = batches
        self._held: pa.RecordBatch | None = None

    def take(self, rows: int | None) -> Iterator[pa.RecordBatch | Kept]:
        """The next ``rows`` rows (fewer where the stream ends); ``None``: every row left, to the end of the
        stream, so that checks that run after a shard's last batch (its checksum) run inside this part. A
        kept row group is never cut: it was kept because it lies whole in one part."""
        while rows is None or rows > 0:
            batch = self._held if self._held is not None else next(self._batches, None)
            self._held = None
            if batch is None:
                return
            if rows is not None:
                if batch.num_rows > rows:
                    if isinstance(batch, Kept):
                        raise RuntimeError("a row group kept as stored lies across two output files")
                    self._held, batch = batch.slice(rows), batch.slice(0, rows)
                rows -= batch.num_rows
            yield batch


def _chain_parts(
    ctx: RewriteContext, chain: UnitChain[Unit]
) -> Iterator[tuple[Unit, Iterator[pa.RecordBatch | Kept]]]:
    """Each unit of ``chain`` with its rows, all cut from one pass over the chain's source ranges (see
    :func:`~dsm.rewrite.chains.chain_units`); a unit's rows must be consumed before the next unit's. With
    ``ctx.keep_groups``, row groups that can be written as stored come as :class:`Kept`
    (:func:`_keeping`)."""
    ends = list(itertools.accumulate(unit.rows for unit in chain.units))

    def batches() -> Generator[pa.RecordBatch | Kept, None, None]:
        offset = 0  # of the range in the chain's stream of rows
        for rng in chain.ranges:
            length = rng.stop - rng.start
            cuts = [end - offset + rng.start for end in ends if offset < end < offset + length]
            yield from read_range(ctx, rng, cuts)
            offset += length

    source = batches()
    stream = _RowStream(source)
    try:
        for count, unit in enumerate(chain.units, start=1):
            yield unit, stream.take(None if count == len(chain.units) else unit.rows)
    finally:
        source.close()  # the open shard of a chain that stopped early


def copy_units(ctx: RewriteContext, chain: UnitChain[OutputUnit]) -> list[DescribedShard]:
    """Write the output files of ``chain`` in order from one pass over its source ranges; record each in the
    journal when it is checked."""
    found = []
    for unit, rows in _chain_parts(ctx, chain):
        written = _write_file(ctx.dest, unit.path, ctx.out_fmt, ctx.written_schema, rows)
        if written.digest.rows != unit.rows:
            raise short_rows(
                f"output {unit.path}", written.digest.rows, unit.rows, (r.shard for r in unit.ranges)
            )
        described = _describe_output(ctx, unit, written)
        ctx.journal.record("unit", unit.index, described.shard.to_dict())
        found.append(described)
    return found


def spill_schema(schema: pa.Schema) -> pa.Schema:
    """The rows as the spill format stores them (``Format.storage``), plus their output position."""
    stored = ArrowFormat().storage(schema).schema  # the same whatever the codec
    return stored.append(pa.field(POSITION_FIELD, pa.uint64(), nullable=False))


def scatter_units(ctx: RewriteContext, chain: UnitChain[ScatterUnit]) -> list[dict[str, Any]]:
    """Shuffle pass 1 for a chain of source ranges, from one pass over them: each range's spill file."""
    return [
        _scatter(ctx, unit, cast(Iterator[pa.RecordBatch], rows))  # never kept groups: a shuffle decodes
        for unit, rows in _chain_parts(ctx, chain)
    ]


def _scatter(ctx: RewriteContext, unit: ScatterUnit, source: Iterator[pa.RecordBatch]) -> dict[str, Any]:
    """Write the rows of one source range (``source``), grouped by bucket, to its spill file."""
    plan = ctx.plan
    permutation = Permutation(plan.total_rows, plan.seed or 0)
    starts = np.asarray(plan.bucket_starts, dtype=np.uint64)
    bucket_type = np.min_scalar_type(len(starts))  # 16 bits or fewer: NumPy's stable sort is a radix sort
    schema = spill_schema(ctx.schema)
    stored = schema.remove(schema.get_field_index(POSITION_FIELD))
    path = spill_name(unit.index)
    index: list[int] = []
    offset = unit.offset
    with (
        ctx.spill_loc.atomic_writer(path) as handle,
        closing(ReadAhead(source)) as ahead,
    ):
        sink = HashingWriter(handle)
        with _spill_format(ctx.spill_loc).open_writer(sink, schema) as writer:  # type: ignore[arg-type]
            pending = _BucketPieces(writer, index, schema)
            for batch in ahead:
                count = batch.num_rows
                if not count:
                    continue
                positions = permutation(np.arange(offset, offset + count, dtype=np.uint64))
                offset += count
                buckets = (np.searchsorted(starts, positions, side="right") - 1).astype(bucket_type)
                order = np.argsort(buckets, kind="stable")
                ordered = buckets[order]
                batch = convert_batch(batch, stored)
                spilled = pa.RecordBatch.from_arrays([*batch.columns, pa.array(positions)], schema=schema)
                spilled = take(spilled, pa.array(order))
                cuts = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), count]
                for a, b in itertools.pairwise(cuts):
                    pending.add(int(ordered[a]), spilled.slice(a, b - a))
                pending.account(spilled.nbytes)
            pending.flush()
    rows = offset - unit.offset
    if rows != unit.stop - unit.start:
        raise short_rows(f"shuffle pass 1 of {unit.shard}", rows, unit.stop - unit.start, [unit.shard])
    record = {"path": path, "bytes": sink.size, "checksum": sink.checksum, "rows": rows, "buckets": index}
    ctx.journal.record("scatter", unit.index, record)
    return record


SPILL_BUFFER_BYTES = 64 << 20
"""Decoded bytes a scatter unit gathers, by bucket, before it writes them to its spill file: each bucket's
rows then go out as one piece (one IPC batch) per buffer, not one per source batch. Pieces of a few rows each
(a source batch cut into every bucket) made the spill file, and the gather that reads every piece of a
bucket, grow with source batches times buckets."""


class _BucketPieces:
    """The rows a scatter unit has read, by bucket, written out as one piece per bucket (in bucket order)
    once :data:`SPILL_BUFFER_BYTES` are held, and at the end; ``index`` gets the bucket of each IPC batch."""

    def __init__(self, writer: Any, index: list[int], schema: pa.Schema) -> None:
        self._writer = writer
        self._index = index
        self._schema = schema
        self._parts: dict[int, list[pa.RecordBatch]] = defaultdict(list)
        self._held = 0

    def add(self, bucket: int, part: pa.RecordBatch) -> None:
        self._parts[bucket].append(part)

    def account(self, nbytes: int) -> None:
        """A source batch's rows were added (``nbytes`` of them): write everything out past the budget."""
        self._held += nbytes
        if self._held >= SPILL_BUFFER_BYTES:
            self.flush()

    def flush(self) -> None:
        for bucket in sorted(self._parts):
            rows = pa.Table.from_batches(self._parts[bucket], schema=self._schema).combine_chunks()
            # the Arrow writer cuts batches to DEFAULT_BATCH_ROWS: the index names each IPC batch written
            for piece in rows.to_batches(max_chunksize=DEFAULT_BATCH_ROWS):
                self._writer.write_batch(piece)
                self._index.append(bucket)
        self._parts.clear()
        self._held = 0


def bucket_pieces(records: Mapping[int, Mapping[str, Any]]) -> dict[int, list[tuple[int, int]]]:
    """bucket -> [(spill unit, IPC batch index)] in spill-unit order."""
    pieces: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for unit_index in sorted(records):
        for batch_index, bucket in enumerate(records[unit_index]["buckets"]):
            pieces[int(bucket)].append((unit_index, batch_index))
    return dict(pieces)


class _SpillReaders:
    """Open spill files of one gather unit, opened on first use and closed together.

    A local spill file (uncompressed Arrow IPC, in the page cache) is memory-mapped: its pieces are read in
    place, not copied into fresh buffers first. The mapped pages count as the process's memory while
    mapped, so :meth:`release` unmaps them after each bucket (pyarrow keeps a mapping alive while a buffer
    still points into it). A remote spill file stays open for the whole unit."""

    def __init__(self, ctx: RewriteContext) -> None:
        self._ctx = ctx
        self._open: dict[int, tuple[Any, Any]] = {}

    def batch(self, unit: int, index: int) -> pa.RecordBatch:
        if unit not in self._open:
            path = spill_name(unit)
            spill = self._ctx.spill_loc
            handle: Any = pa.memory_map(spill.path(path)) if spill.is_local else spill.open_handle(path)
            self._open[unit] = (handle, ipc.open_file(handle))
        return self._open[unit][1].get_batch(index)

    def release(self) -> None:
        """Unmap the local spill files (read again from the page cache for the next bucket)."""
        if self._ctx.spill_loc.is_local:
            self.close()

    def close(self) -> None:
        for handle, _ in self._open.values():
            handle.close()
        self._open.clear()


def _gathered(ctx: RewriteContext, unit: OutputUnit, readers: _SpillReaders) -> Iterator[pa.RecordBatch]:
    plan = ctx.plan
    schema = spill_schema(ctx.schema)
    for bucket in range(unit.first_bucket, unit.last_bucket):
        start = plan.bucket_starts[bucket]
        stop = plan.bucket_starts[bucket + 1] if bucket + 1 < len(plan.bucket_starts) else plan.total_rows
        # Memory: the bucket's pieces and its sorted copy, never a third (combined) copy; the previous
        # bucket is dropped before the next one is read.
        pieces = [readers.batch(u, i) for u, i in ctx.bucket_pieces.get(bucket, ())]
        table = pa.Table.from_batches(pieces, schema=schema)
        del pieces
        # The bucket holds each position in [start, stop) once: row i goes to place positions[i] - start.
        # Placing them (not a sort) also proves it: a position twice leaves a place empty.
        places = table.column(POSITION_FIELD).to_numpy() - np.uint64(start)
        order = np.full(stop - start, -1, dtype=np.int64)
        if len(places) == len(order) and (not len(places) or int(places.max()) < len(order)):
            order[places] = np.arange(len(places))
        if len(places) != len(order) or (order < 0).any():
            raise CheckFailed(
                f"shuffle bucket {bucket} of {unit.path}: its {table.num_rows} rows gathered do not hold "
                f"each of positions {start}-{stop - 1} once; the pass-1 files were changed; run again with "
                "--overwrite"
            )
        rows = table.drop_columns([POSITION_FIELD])
        del table, places
        rows = take(rows, pa.array(order)).combine_chunks()  # one chunk per column: batch bounds as before
        del order
        readers.release()
        yield from rows.to_batches(max_chunksize=plan.batch_rows)
        del rows
        # the pool would keep the freed bucket's pages (the dsm command keeps them on purpose:
        # dsm.cli._arrow_allocator_for_bulk_work)
        pa.default_memory_pool().release_unused()


def gather_unit(ctx: RewriteContext, unit: OutputUnit) -> DescribedShard:
    """Shuffle pass 2 for one output file: its buckets, each sorted by position, in order."""
    readers = _SpillReaders(ctx)
    try:
        written = _write_file(
            ctx.dest, unit.path, ctx.out_fmt, ctx.written_schema, _gathered(ctx, unit, readers)
        )
    finally:
        readers.close()
    found = _describe_output(ctx, unit, written)
    ctx.journal.record("unit", unit.index, found.shard.to_dict())
    return found


def digest_of(shard: Shard) -> RowDigest:
    """The row digest recorded in a contract entry."""
    return RowDigest.from_hex(
        rows=shard.rows or 0, unordered=shard.fingerprint or "", ordered=shard.ordered_fingerprint or ""
    )
