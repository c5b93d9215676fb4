"""Reading a rewrite's source: the rows of a range of a source shard, checked against the shard's contract
entry by the read that copies them, and (Parquet to Parquet) the row groups that can be written as stored
(:mod:`dsm.formats._stored_groups`) and those assembled from their pages (:mod:`dsm.formats._stored_pages`: a
run of small groups into one, a large group in parts), as :class:`Kept` items among the batches."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol, TypeVar, cast

import pyarrow as pa
import pyarrow.parquet as pq

from dsm.contract import Shard
from dsm.errors import CheckFailed, FormatError, SchemaError
from dsm.formats import Format
from dsm.formats._common import describe_exception
from dsm.formats._stored_groups import Footer, StoredGroup, read_footer, read_schema, template_footer
from dsm.formats._stored_pages import Assembler, Observed, with_statistics
from dsm.formats._thrift import ThriftError, value_of
from dsm.formats.parquet import ParquetFormat
from dsm.hashing.checksum import algorithm_of, short_checksum
from dsm.hashing.fingerprint import RowDigest, digest_batch
from dsm.rewrite.plan import ROW_GROUP_BYTES, RewritePlan, SourceRange
from dsm.shards import iter_open_shard, iter_shard, open_shard, read_once
from dsm.storage import Location

__all__ = [
    "KEPT_GROUP_BYTES",
    "Kept",
    "RewriteSource",
    "SourceChanged",
    "iter_range",
    "keeps_stored_groups",
    "read_range",
    "short_rows",
]

_Item = TypeVar("_Item")


class RewriteSource(Protocol):
    """What reading a rewrite's source needs of its context (:class:`dsm.rewrite.execute.RewriteContext`)."""

    source_loc: Location
    source_fmt: Format
    out_fmt: Format
    schema: pa.Schema
    plan: RewritePlan
    keep_groups: bool

    @property
    def written_schema(self) -> pa.Schema: ...

    def check_of(self, rng: SourceRange) -> Shard | None: ...


KEPT_GROUP_BYTES = (ROW_GROUP_BYTES // 2, 2 * ROW_GROUP_BYTES)
"""A Parquet source row group whose footer declares this many decoded bytes (inclusive), and that lies whole
in one output file, is written as stored where :func:`keeps_stored_groups` allows: within a factor of two of
the groups the writer makes, re-cutting it would change nothing a reader needs."""


def iter_range(
    loc: Location,
    fmt: Format,
    schema: pa.Schema,
    rng: SourceRange,
    batch_rows: int,
    *,
    check: Shard | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``rng`` as batches of exactly ``schema``.

    A whole shard streams through the format; a part starts where the format can start
    (:meth:`Format.iter_batches_from`: the Parquet row group holding the first row, else the file's start)
    and stops after the last row of the range. With ``check`` (the contract entry of a whole shard), the
    shard is read once (:func:`~dsm.shards.read_once`) and its size and checksum are checked from the bytes
    decoded: CheckFailed after the last batch (before the consumer can finish its output) if they differ.
    """
    if rng.whole and check is not None and check.checksum:
        yield from _checked_shard(
            loc,
            rng.shard,
            check,
            lambda handle: iter_open_shard(handle, loc, rng.shard, fmt, schema=schema, batch_rows=batch_rows),
            in_order=fmt.index_by_scan,
        )
        return
    if rng.whole:
        yield from iter_shard(loc, rng.shard, fmt, schema=schema, batch_rows=batch_rows)
        return
    remaining = rng.stop - rng.start
    if remaining <= 0:
        return
    with open_shard(loc, rng.shard) as handle:
        batches = fmt.iter_batches_from(
            handle, shard=rng.shard, start_row=rng.start, schema=schema, batch_rows=batch_rows
        )
        try:
            for batch, _ in batches:
                if batch.num_rows > remaining:
                    batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
                yield batch
                if remaining <= 0:
                    return
        except (FormatError, SchemaError):
            raise
        except (pa.ArrowException, ValueError, UnicodeDecodeError, EOFError) as exc:
            raise FormatError(f"shard {rng.shard}: cannot be decoded: {describe_exception(exc)}") from None
        finally:
            batches.close()  # type: ignore[attr-defined]


def _checked_shard(
    loc: Location,
    path: str,
    shard: Shard,
    read: Callable[[IO[bytes]], Iterator[_Item]],
    *,
    in_order: bool = False,
) -> Iterator[_Item]:
    """What ``read`` yields from the shard opened once, its size and checksum checked (:func:`iter_range`);
    ``in_order``: ``read`` reads the file from its first byte on (see :func:`~dsm.shards.read_once`)."""
    algorithm = algorithm_of(shard.checksum or "")
    with read_once(loc, path, (algorithm,), in_order=in_order) as opened:
        if opened.size != shard.bytes:
            raise _changed_source(path, f"{opened.size} bytes, expected {shard.bytes}")
        handle: IO[bytes] = opened.file  # type: ignore[assignment]
        try:
            yield from read(handle)
        except Exception:
            # Bytes that do not decode are first of all changed bytes, if the checksum says so.
            if opened.finish()[algorithm] != shard.checksum:
                raise _changed_source(path, "its bytes do not decode and their checksum differs") from None
            raise
        actual = opened.finish()[algorithm]
    if actual != shard.checksum:
        raise _changed_source(
            path, f"checksum {short_checksum(actual)} expected {short_checksum(shard.checksum or '')}"
        )


def keeps_stored_groups(
    source_fmt: Format, out_fmt: Format, source: Location, *, shuffle: bool, given: Mapping[str, Any]
) -> bool:
    """Whether a rewrite may write source row groups as stored (:mod:`dsm.formats._stored_groups`):
    Parquet to Parquet, in source order, from local disk (where reading a group's bytes by offset costs a
    copy from the page cache), with the writer's defaults for what a stored group could not follow: no
    ``row_group_size`` or ``compression_level`` given (``given``: the options asked), dictionaries and
    statistics on. Which groups are kept is decided per group as the source is read (:func:`_keeping`)."""
    return (
        isinstance(source_fmt, ParquetFormat)
        and isinstance(out_fmt, ParquetFormat)
        and not shuffle
        and source.is_local
        and out_fmt.use_dictionary
        and out_fmt.write_statistics
        and not {"row_group_size", "compression_level"} & set(given)
    )


@dataclass(frozen=True)
class Kept:
    """A source row group to be written as stored, and the digest of its rows, decoded from the bytes that
    will be written (:meth:`StoredGroup.alone`)."""

    group: StoredGroup
    digest: RowDigest

    @property
    def num_rows(self) -> int:
        return self.group.rows


def read_range(ctx: RewriteSource, rng: SourceRange, cuts: Sequence[int]) -> Iterator[pa.RecordBatch | Kept]:
    """The rows of ``rng`` as :func:`iter_range` gives them; with ``ctx.keep_groups``, each row group that
    can be kept or assembled comes as :class:`Kept` items instead (:func:`_keeping`). ``cuts`` are the rows of
    the shard where one output file ends and the next begins: no kept or assembled group crosses one."""
    if not ctx.keep_groups or not _may_keep(ctx, rng, cuts):
        yield from iter_range(
            ctx.source_loc, ctx.source_fmt, ctx.schema, rng, ctx.plan.batch_rows, check=ctx.check_of(rng)
        )
        return
    check = ctx.check_of(rng)
    if check is not None and check.checksum:
        yield from _checked_shard(
            ctx.source_loc, rng.shard, check, lambda handle: _keeping(ctx, rng, cuts, handle)
        )
        return
    with open_shard(ctx.source_loc, rng.shard) as handle:
        yield from _keeping(ctx, rng, cuts, handle)


def _may_keep(ctx: RewriteSource, rng: SourceRange, cuts: Sequence[int]) -> bool:
    """Whether a row group of ``rng`` is of a size to keep or assemble (:func:`_groups_to_keep`) and in a
    file whose stored schema is the writer's: pyarrow's reading of the footer first (fast where a footer
    lists thousands of small groups), then the footer's schema itself (decoded without the groups). A file
    that cannot be read says so to the decoder."""
    try:
        with open_shard(ctx.source_loc, rng.shard) as handle:
            metadata = pq.read_metadata(handle)
            row = 0
            sized = False
            for index in range(metadata.num_row_groups):
                group = metadata.row_group(index)
                start, row = row, row + group.num_rows
                if row <= rng.start or start >= rng.stop:
                    continue
                whole = _whole_in_one_file(start, row, rng, cuts)
                sized = sized or _treatment(group.total_byte_size, whole) != "decode"
            if not sized:
                return False
            template, _ = template_footer(
                ctx.written_schema, str(cast(ParquetFormat, ctx.out_fmt).compression)
            )
            return read_schema(handle) == template.schema
    except (OSError, ValueError, pa.ArrowException, ThriftError):
        return False


def _whole_in_one_file(start: int, stop: int, rng: SourceRange, cuts: Sequence[int]) -> bool:
    return rng.start <= start and stop <= rng.stop and not any(start < cut < stop for cut in cuts)


@dataclass(frozen=True)
class _Span:
    """A source row group holding rows of the range: its index, first and stop rows (of the shard), its
    decoded bytes, and what is done with it: "keep" (:data:`KEPT_GROUP_BYTES`, whole in one output file),
    "small" (smaller, whole in one output file: assembled with its neighbours), "large" (larger, or as
    large and across output files: assembled in parts) or "decode"."""

    index: int
    start: int
    stop: int
    size: int
    what: str


def _groups_to_keep(ctx: RewriteSource, rng: SourceRange, cuts: Sequence[int], footer: Footer) -> list[_Span]:
    """Each row group holding rows of ``rng``, and what may be done with it (all "decode" where the file's
    stored schema is not the writer's)."""
    template, _ = template_footer(ctx.written_schema, str(cast(ParquetFormat, ctx.out_fmt).compression))
    stored = not footer.encrypted and footer.schema == template.schema
    spans = []
    row = 0
    for index, group in enumerate(footer.row_groups):
        rows = int(value_of(group, 3) or 0)
        start, row = row, row + rows
        if row <= rng.start or start >= rng.stop or rows == 0:
            continue
        size = int(value_of(group, 2) or 0)
        what = _treatment(size, _whole_in_one_file(start, row, rng, cuts)) if stored else "decode"
        spans.append(_Span(index, start, row, size, what))
    return spans


def _treatment(size: int, whole: bool) -> str:
    """What is done with a row group of ``size`` decoded bytes, ``whole`` in one output file or not (see
    :class:`_Span`)."""
    low, high = KEPT_GROUP_BYTES
    if size <= 0:
        return "decode"
    if whole and low <= size <= high:
        return "keep"
    if whole and size < low:
        return "small"
    return "large" if size >= low else "decode"


def _segments(
    spans: list[_Span], rng: SourceRange, cuts: Sequence[int]
) -> Iterator[tuple[str, list[int], int, int]]:
    """``(what, groups, first row, stop row)`` in order: a group to keep, runs of small groups to assemble
    into groups of about :data:`ROW_GROUP_BYTES` decoded (each in one output file), the parts of a large
    group to assemble (its rows in ``rng`` cut where an output file ends, and into groups of about
    :data:`ROW_GROUP_BYTES`), and single groups to decode."""
    run: list[int] = []
    first = stop = size = 0
    for span in spans:
        if run and (span.what != "small" or span.start in cuts or size >= ROW_GROUP_BYTES):
            yield "assemble", run, first, stop
            run = []
        if span.what == "small":
            if not run:
                first, size = span.start, 0
            run.append(span.index)
            size += span.size
            stop = span.stop
            continue
        if span.what != "large":
            yield span.what, [span.index], span.start, span.stop
            continue
        start, stop = max(span.start, rng.start), min(span.stop, rng.stop)
        per_row = span.size / (span.stop - span.start)
        for low, high in itertools.pairwise([start, *(c for c in cuts if start < c < stop), stop]):
            parts = max(1, math.ceil((high - low) * per_row / ROW_GROUP_BYTES))
            edges = [low + (high - low) * i // parts for i in range(parts + 1)]
            for a, b in itertools.pairwise(edges):
                yield "part", [span.index], a, b
    if run:
        yield "assemble", run, first, stop


class _GroupRows:
    """Some columns of one source row group's rows, read in order, taken by consecutive ranges of rows."""

    def __init__(self, parquet: pq.ParquetFile, group: int, names: list[str], batch_rows: int) -> None:
        self.group = group
        self._batches = parquet.iter_batches(
            batch_size=batch_rows, row_groups=[group], columns=names, use_threads=False
        )
        self._held: pa.RecordBatch | None = None
        self._row = 0

    def take(self, start: int, stop: int) -> pa.Table | None:
        """Rows ``start`` to ``stop`` (of the group; after those taken before); None where they cannot be read
        (the decoder says why)."""
        out = []
        try:
            while self._row < stop:
                batch = self._held if self._held is not None else next(self._batches, None)
                self._held = None
                if batch is None:
                    return None
                first, self._row = self._row, self._row + batch.num_rows
                low, high = max(start, first), min(stop, self._row)
                if high > low:
                    out.append(batch.slice(low - first, high - low))
                if self._row > stop:
                    self._held, self._row = batch.slice(stop - first), stop
        except (pa.ArrowException, OSError, ValueError):
            return None
        return pa.Table.from_batches(out) if out else None


def _keeping(
    ctx: RewriteSource, rng: SourceRange, cuts: Sequence[int], handle: IO[bytes]
) -> Iterator[pa.RecordBatch | Kept]:
    """Walk the row groups that hold rows of ``rng`` (the footer read again, from the read that copies
    them): each that may be kept (:func:`_groups_to_keep`) is read as stored, unless
    :meth:`StoredGroup.read` finds it cannot be; each run of small ones, and each part of a large one, is
    assembled into one group (:class:`~dsm.formats._stored_pages.Assembler`), unless it cannot be; the rest
    is decoded, in runs."""
    out_fmt = cast(ParquetFormat, ctx.out_fmt)
    template, codec = template_footer(ctx.written_schema, str(out_fmt.compression))
    try:
        footer: Footer | None = read_footer(handle)
    except (ThriftError, ValueError):
        footer = None  # the decoder says what is wrong with the file
    spans = _groups_to_keep(ctx, rng, cuts, footer) if footer is not None else []
    if footer is None or all(span.what == "decode" for span in spans):
        yield from _decoded_groups(ctx, rng, handle, None)
        return
    parquet = pq.ParquetFile(handle, buffer_size=1 << 20)  # a large group's columns streamed, not read whole
    where = f"shard {rng.shard}"
    assembler = Assembler(handle, footer, template, ctx.written_schema, out_fmt.options(), codec, where=where)
    starts = {span.index: span.start for span in spans}
    rows: _GroupRows | None = None
    columns: list[int] = []
    pending: list[int] = []
    since = until = 0
    for what, groups, start, stop in _segments(spans, rng, cuts):
        group_name = f"{rng.shard} row group {groups[0]}"
        stored: StoredGroup | None = None
        built = None
        if what == "keep":
            stored = StoredGroup.read(
                handle, footer, groups[0], codec, statistics=True, where=f"shard {group_name}"
            )
        elif what == "assemble":
            columns = assembler.columns(groups)
            if columns:
                others = _read_groups(parquet, groups, assembler.others(columns))
                pieces = [(index, 0, int(value_of(footer.row_groups[index], 3))) for index in groups]
                built = assembler.assemble(pieces, columns, others)
        elif what == "part":
            index = groups[0]
            if rows is None or rows.group != index:
                columns = assembler.columns(groups)
                rows = _GroupRows(parquet, index, assembler.others(columns), ctx.plan.batch_rows)
            if columns:
                first = starts[index]
                others = (
                    rows.take(start - first, stop - first) if len(columns) < len(ctx.written_schema) else None
                )
                built = assembler.assemble([(index, start - first, stop - first)], columns, others)
        observed: list[Observed] = []
        if built is not None:
            stored, observed = built
        if stored is None:
            if not pending:
                since = start
            until = stop
            pending.extend(index for index in groups if not pending or index != pending[-1])
            continue
        digest = _stored_digest(ctx, stored, template, group_name, observed)
        yield from _decoded_groups(ctx, rng, handle, pending, starts, since, until)
        pending = []
        yield Kept(with_statistics(stored, observed), digest)
    yield from _decoded_groups(ctx, rng, handle, pending, starts, since, until)


def _read_groups(parquet: pq.ParquetFile, groups: list[int], names: list[str]) -> pa.Table | None:
    """Columns ``names`` of the row ``groups`` (None where there are none, or they cannot be read: the
    decoder says why)."""
    if not names:
        return None
    try:
        return parquet.read_row_groups(groups, columns=names, use_threads=False)
    except (pa.ArrowException, OSError, ValueError):
        return None


def _decoded_groups(
    ctx: RewriteSource,
    rng: SourceRange,
    handle: IO[bytes],
    groups: list[int] | None,
    starts: Mapping[int, int] | None = None,
    since: int = 0,
    until: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``rng`` in the row ``groups`` given (consecutive, each starting at the shard row
    ``starts`` gives) from row ``since`` to ``until``; None: every group, from row 0."""
    if groups == []:
        return
    if groups is None and not rng.whole:  # a part of a file none of whose groups is kept: as usual
        yield from iter_range(ctx.source_loc, ctx.source_fmt, ctx.schema, rng, ctx.plan.batch_rows)
        return
    batches = iter_open_shard(
        handle,
        ctx.source_loc,
        rng.shard,
        ctx.source_fmt,
        schema=ctx.schema,
        batch_rows=ctx.plan.batch_rows,
        fragments=groups,
    )
    row = 0 if groups is None or starts is None else starts[groups[0]]
    since, until = max(since, rng.start), rng.stop if until is None else min(until, rng.stop)
    for batch in batches:
        start, row = row, row + batch.num_rows
        low, high = max(start, since), min(row, until)
        if high > low:
            yield batch if (low, high) == (start, row) else batch.slice(low - start, high - low)
        if row >= until:
            return


def _stored_digest(
    ctx: RewriteSource, stored: StoredGroup, template: Footer, where: str, observed: Sequence[Observed] = ()
) -> RowDigest:
    """The digest of a stored group's rows as a reader of the written file decodes them: its file alone,
    under the footer the writer gives (``template``), decoded into the types the target stores and
    checked as a source shard is; the values of its assembled columns added to what is ``observed``."""
    digest = RowDigest.empty()
    for batch in ctx.source_fmt.iter_batches(
        pa.BufferReader(stored.alone(template)),
        shard=where,
        schema=ctx.written_schema,
        batch_rows=ctx.plan.batch_rows,
    ):
        digest = digest + digest_batch(batch)
        for column in observed:
            column.add(batch)
    if digest.rows != stored.rows:
        raise FormatError(f"shard {where}: {digest.rows} rows decoded, its footer declares {stored.rows}")
    return digest


class SourceChanged(CheckFailed):
    """A source shard's size or checksum, checked by the read that copies it, differs from its contract."""


def _changed_source(path: str, what: str) -> SourceChanged:
    return SourceChanged(
        f"shard {path}: corrupt: {what}: the source changed after registration; nothing was written (the "
        "files this rewrite had written were removed); restore the shard or re-register the source"
    )


def short_rows(what: str, got: int, expected: int, shards: Iterable[str]) -> CheckFailed:
    names = ", ".join(sorted(set(shards)))
    return CheckFailed(
        f"{what}: read {got} rows from source shard(s) {names}, their contract says {expected}: the source "
        "changed after registration; run `dsm verify --deep` on it"
    )
