"""Parquet row groups assembled from the pages of their source: the column chunks of text and bytes taken
from the source's pages as stored, so that their values are neither decoded for the writer nor compressed
again. A group is assembled from a run of consecutive small source groups, or from a part of one large
source group (the rows of one output file, cut into groups of the size the writer makes).

pyarrow's writer dictionary-encodes text until the dictionary outgrows 1 MiB, checked after every 1,024
rows; a group of mostly distinct texts of up to 1,024 rows (Hugging Face ``datasets`` writes groups of
1,000 rows, 100 for images) is stored as one dictionary page holding every value in row order and a page
of the indices 0, 1, 2, ...; a larger group goes on with pages of plain values. That dictionary page is,
byte for byte, the compressed PLAIN values of its rows: it becomes a data page of version 2 (whose levels
are stored apart from the compressed values) under a new header. A page of values that refers to no
dictionary (PLAIN or a delta encoding, as a dictionary's fallback writes) holds all it needs and is
copied as it is. A chunk is read as such units (:class:`_Unit`); the rows of a unit that the group takes
only in part (at the edges of a part), or whose dictionary is used otherwise (a value repeated, another
order), are decoded from their pages and encoded again as plain pages. A column whose units to copy cover
less than half its rows, and every column of other types, is decoded and encoded by pyarrow's writer for
the group (:func:`~dsm.formats._parquet_writer.encoded_group`).

Each page keeps or gets a CRC (a CRC a source page has is checked). An assembled chunk's statistics are
those of its values, as pyarrow's writer gives them (:class:`Observed`): the caller decodes the written
bytes to digest the group's rows and sets them from the values so decoded (:func:`with_statistics`).

The module is longer than 600 lines: reading a chunk as units, making a chunk of them and the few page
codecs that needs (levels, indices) share their private structures, and apart they would export them.

Structures, by their Parquet thrift ids besides those of :mod:`dsm.formats._stored_groups`: SchemaElement
(1 type, 3 repetition, 5 children), ColumnMetaData (1 type, 2 encodings, 3 path, 13 encoding statistics,
16 size statistics: 1 bytes of values, 2-3 level histograms), Statistics (3 null count, 5 maximum,
6 minimum, 7-8 exactness), PageHeader (2 uncompressed size, 7 dictionary page), DataPageHeader (1 values,
2 encoding, 3 level encoding) and its version 2 (1 values, 2 nulls, 3 rows, 4 encoding, 5-6 level lengths,
7 compressed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsm.formats._parquet_writer import encoded_group, writer_options
from dsm.formats._stored_groups import (
    Footer,
    StoredGroup,
    chunk_pages,
    chunk_span,
    column_path,
    joined,
    read_at,
    signed_crc,
    template_footer,
    with_crc,
)
from dsm.formats._thrift import (
    BINARY,
    BOOL,
    I32,
    I64,
    LIST,
    STRUCT,
    Field,
    Items,
    ThriftError,
    decode_struct,
    value_of,
    varint_at,
    varint_bytes,
    without,
)

__all__ = ["Assembler", "Observed", "with_statistics"]

_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE, _DELTA_LENGTH, _DELTA_BYTES, _RLE_DICTIONARY = 0, 2, 3, 6, 7, 8
_SELF_CONTAINED = {_PLAIN, _DELTA_LENGTH, _DELTA_BYTES}
_INDICES = {_PLAIN_DICTIONARY, _RLE_DICTIONARY}
_BYTE_ARRAY = 6
_REQUIRED, _OPTIONAL = 0, 1
_CODECS = {0: None, 1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}  # thrift code: pyarrow's
_MAX_STATISTIC_BYTES = 4096
"""pyarrow's writer leaves out a chunk's minimum or maximum of more bytes than this."""


class _Cannot(Exception):
    """A chunk that cannot be read as units (it is decoded and encoded instead)."""


@dataclass
class Observed:
    """A text or bytes column of an assembled group (chunk ``chunk``): its statistics as the values decoded
    from the written bytes show them (:meth:`add` each decoded batch), as pyarrow's writer writes them for
    the same values (:meth:`statistics`, :meth:`sizes`)."""

    name: str
    chunk: int
    optional: bool
    low: bytes | None = None
    high: bytes | None = None
    nulls: int = 0
    values: int = 0
    value_bytes: int = 0

    def add(self, batch: pa.RecordBatch) -> None:
        column = batch.column(self.name)
        if pa.types.is_dictionary(column.type):  # a dictionary type is stored as its values
            column = column.dictionary_decode()
        self.values += len(column)
        self.nulls += column.null_count
        if column.null_count == len(column):
            return
        self.value_bytes += int(pc.sum(pc.binary_length(column)).as_py() or 0)
        low, high = (_as_bytes(value.as_py()) for value in pc.min_max(column).values())
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)

    def statistics(self) -> list[Field]:
        fields = [Field(3, I64, self.nulls)]
        if self.high is not None and len(self.high) <= _MAX_STATISTIC_BYTES:
            fields += [Field(5, BINARY, self.high), Field(7, BOOL, True)]
        if self.low is not None and len(self.low) <= _MAX_STATISTIC_BYTES:
            fields += [Field(6, BINARY, self.low), Field(8, BOOL, True)]
        return sorted(fields, key=lambda item: item.id)

    def sizes(self) -> list[Field]:
        levels = [self.nulls, self.values - self.nulls] if self.optional else []
        return [
            Field(1, I64, self.value_bytes),
            Field(2, LIST, Items(LIST, I64, [])),
            Field(3, LIST, Items(LIST, I64, levels)),
        ]


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def with_statistics(stored: StoredGroup, observed: Sequence[Observed]) -> StoredGroup:
    """``stored`` with the statistics of its assembled chunks set to those ``observed`` in its values."""
    columns = list(stored.columns)
    for column in observed:
        tree, meta, *rest = columns[column.chunk]
        meta = without(meta, 12, 16)
        meta += [Field(12, STRUCT, column.statistics()), Field(16, STRUCT, column.sizes())]
        columns[column.chunk] = (tree, sorted(meta, key=lambda item: item.id), *rest)  # type: ignore[assignment]
    return replace(stored, columns=tuple(columns))


@dataclass(frozen=True)
class _Page:
    """A page of a source chunk: where its header starts in the file, the header and its length, and the
    length of its body."""

    at: int
    header: list[Field]
    header_bytes: int
    size: int

    @property
    def end(self) -> int:
        return self.at + self.header_bytes + self.size


@dataclass(frozen=True)
class _Unit:
    """Rows ``first`` to ``first + rows`` of a source chunk (counted from its group's first row) and the
    pages that hold them: ``how`` they are written where the group takes them whole: copied as they are
    ("page"), as one data page of version 2 made of the ``dictionary`` page, whose indices (in ``pages``)
    are 0, 1, 2, ... ("dictionary"; ``levels``: the rows' definition levels, of an optional column), or
    decoded and encoded again ("decode", index pages of a dictionary used any other way)."""

    first: int
    rows: int
    how: str
    pages: tuple[_Page, ...]
    dictionary: _Page | None = None
    levels: np.ndarray | None = None

    @property
    def stop(self) -> int:
        return self.first + self.rows


class Assembler:
    """Row groups of one source ``file`` (whose ``footer`` has ``template``'s schema) assembled from the pages
    of their text and bytes columns, for a file of ``schema`` written with the format's ``options``:
    :meth:`columns` says which columns of some source groups can be, :meth:`assemble` makes a group of
    rows of them. ``codec``: the thrift code of the codec the written file uses."""

    def __init__(
        self,
        file: IO[bytes],
        footer: Footer,
        template: Footer,
        schema: pa.Schema,
        options: Mapping[str, Any],
        codec: int,
        *,
        where: str,
    ) -> None:
        self._file, self._footer, self._schema = file, footer, schema
        self._options, self._codec, self._where = options, codec, where
        self._compression = str(options["compression"])
        self._fields = _top_fields(template.schema)
        self._units: dict[tuple[int, int], list[_Unit] | None] = {}

    def columns(self, groups: Sequence[int]) -> list[int]:
        """The positions of the top-level columns that :meth:`assemble` takes from the pages of ``groups``:
        each one flat text or bytes column, with the written codec, whose chunks read as units of which
        those to copy cover at least half its rows."""
        if len(self._fields) != len(self._schema) or _codec_of(self._footer, groups) != self._codec:
            return []
        self._units = {key: units for key, units in self._units.items() if key[0] in groups}
        rows = sum(int(value_of(self._footer.row_groups[index], 3)) for index in groups)
        out = []
        for position, (leaf, _, optional) in enumerate(self._fields):
            if optional is None:
                continue
            chunks = [self._units_of(index, leaf, optional) for index in groups]
            if any(units is None for units in chunks):
                continue
            copied = sum(unit.rows for units in chunks for unit in units or () if unit.how != "decode")
            if copied and 2 * copied >= rows:
                out.append(position)
        return out

    def others(self, columns: Sequence[int]) -> list[str]:
        """The names of the written columns not among ``columns`` (positions): those to read and encode."""
        return [field.name for i, field in enumerate(self._schema) if i not in columns]

    def assemble(
        self, pieces: Sequence[tuple[int, int, int]], columns: Sequence[int], others: pa.Table | None
    ) -> tuple[StoredGroup, list[Observed]] | None:
        """One row group of the rows of ``pieces`` (source group, first row, stop row: rows counted from
        the group's first, consecutive in the file): ``columns`` (of :meth:`columns` for their groups) from
        their pages, the other columns' values (``others``: the same rows, read by the caller) encoded by
        pyarrow's writer. None where a column's pages cannot be read so, or pyarrow cannot write ``others``
        (the caller decodes the rows, and the decoder says what is wrong)."""
        rows = sum(stop - start for _, start, stop in pieces)
        assembled: dict[int, tuple[pa.Buffer, list[Field], list[Field]]] = {}
        try:
            for position in columns:
                assembled[position] = self._column(position, pieces)
        except (_Cannot, ThriftError, TypeError, ValueError, AttributeError, pa.ArrowException, OSError):
            return None
        encoded: Iterator[tuple[pa.Buffer | bytes, tuple[list[Field], list[Field], int | None, int, int]]]
        encoded = iter(())
        if len(columns) < len(self._schema):
            written = pa.schema([f for i, f in enumerate(self._schema) if i not in assembled])
            if others is None or others.schema.names != written.names or others.num_rows != rows:
                return None
            try:
                table = pa.Table.from_arrays(others.columns, schema=written)
                parts = encoded_group(table, written, writer_options(table, self._options))
            except (pa.ArrowException, ValueError):
                return None
            if len(parts) != 1 or parts[0].rows != rows:
                return None
            encoded = zip(parts[0].chunks, parts[0].columns, strict=True)
        chunks: list[pa.Buffer | bytes] = []
        entries: list[tuple[list[Field], list[Field], int | None, int, int]] = []
        observed = []
        for position, (_, leaves, optional) in enumerate(self._fields):
            if position in assembled:
                body, meta, tree = assembled[position]
                observed.append(Observed(self._schema.field(position).name, len(chunks), bool(optional)))
                chunks.append(body)
                entries.append((tree, meta, None, 0, 0))
                continue
            for _ in range(leaves):
                chunk, entry = next(encoded)
                chunks.append(chunk)
                entries.append(entry)
        total = sum(int(value_of(meta, 6)) + grew for _, meta, _, _, grew in entries)
        group = [Field(2, I64, total), Field(3, I64, rows)]
        return StoredGroup(rows=rows, chunks=tuple(chunks), columns=tuple(entries), group=group), observed

    def _units_of(self, group: int, leaf: int, optional: bool) -> list[_Unit] | None:
        key = (group, leaf)
        if key not in self._units:
            tree = value_of(self._footer.row_groups[group], 1).values[leaf]
            where = f"{self._where} row group {group} column {column_path(value_of(tree, 3) or [])}"
            try:
                self._units[key] = _units(self._file, tree, optional, _CODECS[self._codec], where=where)
            except (_Cannot, ThriftError, TypeError, ValueError, AttributeError):
                self._units[key] = None
        return self._units[key]

    def _column(
        self, position: int, pieces: Sequence[tuple[int, int, int]]
    ) -> tuple[pa.Buffer, list[Field], list[Field]]:
        """Column ``position``'s rows of ``pieces`` as one chunk: the units taken whole copied or made one
        page, the rows of the others decoded from their pages and encoded as plain pages; with its
        ColumnMetaData (statistics to be set, :func:`with_statistics`) and ColumnChunk trees."""
        leaf, _, optional = self._fields[position]
        codec = _CODECS[self._codec]
        out: list[bytes | memoryview | pa.Buffer] = []
        kinds: Counter[tuple[int, int]] = Counter()
        decoded: list[pa.Array] = []
        totals = [0, 0]  # values, uncompressed bytes (headers included)

        def encode() -> None:
            if decoded:
                self._encoded(position, decoded, out, kinds, totals)
                decoded.clear()

        for group, start, stop in pieces:
            units = self._units_of(group, leaf, bool(optional))
            if units is None:
                raise _Cannot
            where = f"{self._where} row group {group}"
            run: list[_Unit] = []
            for unit in units:
                if unit.stop <= start or unit.first >= stop:
                    continue
                if unit.how == "decode" or unit.first < start or unit.stop > stop:
                    run.append(unit)
                    continue
                if run:
                    decoded.append(self._decoded(position, group, run, start, stop, where))
                    run = []
                encode()
                _copied(self._file, unit, bool(optional), codec, out, kinds, totals, where=where)
            if run:
                decoded.append(self._decoded(position, group, run, start, stop, where))
        encode()
        rows = sum(stop - start for _, start, stop in pieces)
        if totals[0] != rows:
            raise _Cannot
        tree = value_of(self._footer.row_groups[pieces[0][0]], 1).values[leaf]
        source = value_of(tree, 3)
        meta = [item for item in source if item.id in (1, 3, 4)]
        encodings = sorted({_RLE} | {encoding for _, encoding in kinds})
        meta += [
            Field(2, LIST, Items(LIST, I32, encodings)),
            Field(5, I64, totals[0]),
            Field(6, I64, totals[1]),
            Field(7, I64, sum(_length(piece) for piece in out)),
            Field(9, I64, 0),
            Field(12, STRUCT, [Field(3, I64, 0)]),
            Field(
                13, LIST, Items(LIST, STRUCT, [_encoding_stat(kind, n) for kind, n in sorted(kinds.items())])
            ),
        ]
        meta.sort(key=lambda item: item.id)
        return joined(out), meta, tree

    def _decoded(
        self, position: int, group: int, run: Sequence[_Unit], start: int, stop: int, where: str
    ) -> pa.Array:
        """The values of rows ``start`` to ``stop`` (of their group) that ``run`` (consecutive units) holds,
        decoded by pyarrow from a file of their pages alone (with their dictionary page, if they use one),
        each page's CRC checked."""
        first, last = run[0].pages[0], run[-1].pages[-1]
        dictionary = next((unit.dictionary for unit in run if unit.dictionary is not None), None)
        pages = [read_at(self._file, first.at, last.end - first.at)]
        if dictionary is not None:
            pages.insert(0, read_at(self._file, dictionary.at, dictionary.end - dictionary.at))
        chunk = b"".join(pages)
        uncompressed = 0
        for header, _, _ in chunk_pages(chunk, where=where):
            uncompressed += int(value_of(header, 2))
        rows = run[-1].stop - run[0].first
        leaf = self._fields[position][0]
        source = value_of(value_of(self._footer.row_groups[group], 1).values[leaf], 3)
        meta = [item for item in source if item.id in (1, 2, 3, 4)]
        meta += [
            Field(5, I64, rows),
            Field(6, I64, uncompressed),
            Field(7, I64, len(chunk)),
            Field(9, I64, 0),
        ]
        if dictionary is not None:
            meta.append(Field(11, I64, 0))
        meta.sort(key=lambda item: item.id)
        at = None if dictionary is None else 0
        skip = 0 if dictionary is None else len(pages[0])
        alone = StoredGroup(
            rows=rows,
            chunks=(chunk,),
            columns=(([Field(2, I64, 0), Field(3, STRUCT, meta)], meta, at, skip, 0),),
            group=[Field(2, I64, uncompressed), Field(3, I64, rows)],
        )
        field_ = self._schema.field(position)
        template, _ = template_footer(pa.schema([field_]), self._compression)
        values = pq.read_table(pa.BufferReader(alone.alone(template)), use_threads=False).column(0)
        if len(values) != rows or values.type != field_.type:
            raise _Cannot
        low, high = max(start, run[0].first), min(stop, run[-1].stop)
        return values.slice(low - run[0].first, high - low).combine_chunks()

    def _encoded(
        self,
        position: int,
        values: Sequence[pa.Array],
        out: list[bytes | memoryview | pa.Buffer],
        kinds: Counter[tuple[int, int]],
        totals: list[int],
    ) -> None:
        """``values`` encoded as plain pages (no dictionary, which a chunk holds only at its start) by
        pyarrow's writer with the file's options, appended to ``out``."""
        field_ = self._schema.field(position)
        schema = pa.schema([field_])
        table = pa.Table.from_arrays([pa.chunked_array(values, field_.type)], schema=schema)
        options = {**writer_options(table, self._options), "use_dictionary": False}
        parts = encoded_group(table, schema, options)
        if len(parts) != 1 or len(parts[0].chunks) != 1:
            raise _Cannot
        chunk, (_, meta, dictionary, _, _) = parts[0].chunks[0], parts[0].columns[0]
        if dictionary is not None:
            raise _Cannot
        out.append(chunk)
        totals[0] += int(value_of(meta, 5))
        totals[1] += int(value_of(meta, 6))
        for stat in value_of(meta, 13).values:
            kinds[(int(value_of(stat, 1)), int(value_of(stat, 2)))] += int(value_of(stat, 3))


def _codec_of(footer: Footer, groups: Sequence[int]) -> int | None:
    """The codec every chunk of ``groups`` uses (None where they differ, or it is one not handled here)."""
    codecs = {
        value_of(value_of(chunk, 3) or [], 4)
        for index in groups
        for chunk in value_of(footer.row_groups[index], 1).values
    }
    codec = codecs.pop() if len(codecs) == 1 else None
    return codec if codec in _CODECS else None


def _top_fields(schema: list[list[Field]]) -> list[tuple[int, int, bool | None]]:
    """Per top-level field of a Parquet schema (SchemaElements, root first): its first leaf's column
    index, its leaves, and whether it is optional where it is one flat text or bytes column (required:
    False; None where it is anything else)."""
    fields: list[tuple[int, int, bool | None]] = []
    position, leaf = 1, 0

    def subtree(at: int) -> tuple[int, int]:
        """The position after the subtree at ``at``, and its leaves."""
        children = value_of(schema[at], 5) or 0
        if not children:
            return at + 1, 1
        at, leaves = at + 1, 0
        for _ in range(children):
            at, more = subtree(at)
            leaves += more
        return at, leaves

    while position < len(schema):
        element = schema[position]
        after, leaves = subtree(position)
        flat = not value_of(element, 5) and value_of(element, 1) == _BYTE_ARRAY
        repetition = value_of(element, 3)
        fields.append((leaf, leaves, repetition == _OPTIONAL if flat and repetition in (0, 1) else None))
        position, leaf = after, leaf + leaves
    return fields


def _walk(file: IO[bytes], position: int, end: int) -> Iterator[_Page]:
    """The pages of the chunk at ``position`` to ``end`` of ``file``, their headers read alone (a chunk of a
    large group is hundreds of MiB)."""
    while position < end:
        window = 1024
        while True:
            data = read_at(file, position, min(window, end - position))
            try:
                header, length = decode_struct(data)
                break
            except ThriftError:
                if window >= end - position:
                    raise
                window *= 16
        size = value_of(header, 3)
        if not isinstance(size, int) or size < 0 or position + length + size > end:
            raise ThriftError("a page runs past its column chunk")
        yield _Page(position, header, length, size)
        position += length + size


def _read(file: IO[bytes], page: _Page, *, where: str) -> tuple[list[Field], memoryview, int]:
    """A page's header, body and signed CRC (a CRC the header has is checked)."""
    return next(chunk_pages(read_at(file, page.at, page.end - page.at), where=where))


def _units(
    file: IO[bytes], tree: list[Field], optional: bool, codec: str | None, *, where: str
) -> list[_Unit]:
    """The chunk ``tree`` (a ColumnChunk of ``file``'s footer, a flat text or bytes column) as units of
    rows; _Cannot where it is laid out otherwise than a dictionary page (first, if any), pages of its
    indices and pages that refer to no dictionary, or not in ``file``."""
    span = chunk_span(tree)
    meta = value_of(tree, 3)
    if span is None or value_of(meta, 1) != _BYTE_ARRAY:
        raise _Cannot  # in another file, encrypted, or not a text or bytes column
    units: list[_Unit] = []
    dictionary: _Page | None = None
    pending: list[tuple[_Page, int, int, np.ndarray | None, np.ndarray | None]] = []
    identity = True  # the indices so far are 0, 1, 2, ...
    row = indexed = 0

    def flush() -> None:
        nonlocal identity
        if not pending:
            return
        values = int(value_of(value_of(dictionary.header, 7), 1)) if dictionary is not None else -1
        if identity and not units and indexed == values:
            levels = [defs for *_, defs in pending]
            defs = None if not optional else np.concatenate([d for d in levels if d is not None])
            rows = sum(count for _, _, count, _, _ in pending)
            units.append(_Unit(0, rows, "dictionary", tuple(p for p, *_ in pending), dictionary, defs))
        else:
            units.extend(_Unit(first, count, "decode", (p,), dictionary) for p, first, count, _, _ in pending)
        identity = False
        pending.clear()

    for page in _walk(file, span[0], span[0] + span[1]):
        kind = value_of(page.header, 1)
        if kind == _DICTIONARY_PAGE:
            encoding = value_of(value_of(page.header, 7), 2)
            if dictionary is not None or row or encoding not in (_PLAIN, _PLAIN_DICTIONARY):
                raise _Cannot
            dictionary = page
            continue
        if kind not in (_DATA_PAGE, _DATA_PAGE_V2):
            raise _Cannot
        info = value_of(page.header, 5 if kind == _DATA_PAGE else 8)
        encoding = value_of(info, 2 if kind == _DATA_PAGE else 4)
        count = int(value_of(info, 1))
        if kind == _DATA_PAGE_V2 and value_of(info, 3) != count:
            raise _Cannot  # rows other than values: not a flat column
        if encoding in _INDICES:
            if dictionary is None:
                raise _Cannot
            defs = indices = None
            if identity and not units:
                header, body, _ = _read(file, page, where=where)
                defs, _, indices = _indices(kind, header, info, body, optional, codec)
                identity = bool(np.array_equal(indices, np.arange(indexed, indexed + len(indices))))
                indexed += len(indices)
            pending.append((page, row, count, indices, defs))
        elif encoding in _SELF_CONTAINED:
            flush()
            units.append(_Unit(row, count, "page", (page,)))
        else:
            raise _Cannot
        row += count
    flush()
    if row != value_of(meta, 5):
        raise _Cannot
    return units


def _copied(
    file: IO[bytes],
    unit: _Unit,
    optional: bool,
    codec: str | None,
    out: list[bytes | memoryview | pa.Buffer],
    kinds: Counter[tuple[int, int]],
    totals: list[int],
    *,
    where: str,
) -> None:
    """Append a unit taken whole to ``out``: its page with a CRC, or its dictionary page as one data page
    of version 2; counts its pages by (type, encoding) into ``kinds``, its values and uncompressed bytes
    (headers included) into ``totals``."""
    if unit.how == "page":
        header, page_body, crc = _read(file, unit.pages[0], where=where)
        body: bytes | memoryview = page_body
        kind = value_of(header, 1)
        encoding = value_of(value_of(header, 5 if kind == _DATA_PAGE else 8), 2 if kind == _DATA_PAGE else 4)
        kinds[(kind, encoding)] += 1
    else:
        assert unit.dictionary is not None
        source, values, _ = _read(file, unit.dictionary, where=where)
        level_bytes = b"" if unit.levels is None else _level_bytes(unit.levels)
        nulls = 0 if unit.levels is None else unit.rows - int(np.count_nonzero(unit.levels))
        page = [
            Field(1, I32, unit.rows),
            Field(2, I32, nulls),
            Field(3, I32, unit.rows),
            Field(4, I32, _PLAIN),
            Field(5, I32, len(level_bytes)),
            Field(6, I32, 0),
            Field(7, BOOL, codec is not None),
        ]
        header = [
            Field(1, I32, _DATA_PAGE_V2),
            Field(2, I32, len(level_bytes) + int(value_of(source, 2))),
            Field(3, I32, len(level_bytes) + len(values)),
            Field(8, STRUCT, page),
        ]
        body = level_bytes + values
        crc = signed_crc(body)
        kinds[(_DATA_PAGE_V2, _PLAIN)] += 1
    encoded = with_crc(header, crc)
    out += [encoded, body]
    totals[0] += unit.rows
    totals[1] += len(encoded) + int(value_of(header, 2))


def _length(piece: bytes | memoryview | pa.Buffer) -> int:
    return piece.nbytes if isinstance(piece, memoryview) else len(piece)


def _encoding_stat(kind: tuple[int, int], pages: int) -> list[Field]:
    return [Field(1, I32, kind[0]), Field(2, I32, kind[1]), Field(3, I32, pages)]


def _indices(
    kind: int, header: list[Field], page: list[Field], body: memoryview, optional: bool, codec: str | None
) -> tuple[np.ndarray | None, int, np.ndarray]:
    """A data page of dictionary indices: its definition levels (None for a required column), its values
    (rows, nulls included) and its indices."""
    count = int(value_of(page, 1))
    defs = None
    if kind == _DATA_PAGE:
        raw = _decompressed(body, int(value_of(header, 2)), codec)
        position = 0
        if optional:
            if value_of(page, 3) != _RLE or len(raw) < 4:
                raise _Cannot
            length = int.from_bytes(raw[:4], "little")
            defs = _hybrid(raw, 4, 4 + length, 1, count)
            position = 4 + length
        values = raw[position:]
    else:
        level_bytes, repeated = int(value_of(page, 5)), int(value_of(page, 6))
        if repeated or (level_bytes and not optional):
            raise _Cannot
        if optional:
            defs = _hybrid(body, 0, level_bytes, 1, count)
        values = body[level_bytes:]
        if value_of(page, 7, True) and codec is not None:
            values = _decompressed(values, int(value_of(header, 2)) - level_bytes, codec)
    if defs is not None and int(defs.max(initial=0)) > 1:
        raise _Cannot
    present = count if defs is None else int(np.count_nonzero(defs))
    if not values:
        raise _Cannot
    return defs, count, _hybrid(values, 1, len(values), values[0], present)


def _decompressed(body: memoryview, size: int, codec: str | None) -> bytes | memoryview:
    if codec is None:
        return body
    try:
        return bytes(pa.Codec(codec).decompress(body, decompressed_size=size, asbytes=True))
    except (pa.ArrowException, OSError, ValueError):
        raise _Cannot from None


def _hybrid(data: bytes | memoryview, position: int, end: int, width: int, count: int) -> np.ndarray:
    """``count`` values of ``width`` bits, RLE / bit-packed hybrid encoded at ``data[position:end]``."""
    if width > 32 or end > len(data):
        raise _Cannot
    out = np.zeros(count, np.int64)
    weights = np.left_shift(np.int64(1), np.arange(width, dtype=np.int64))
    filled = 0
    value_bytes = (width + 7) // 8
    while filled < count:
        run, position = varint_at(data, position)
        if position > end:
            raise _Cannot
        if run & 1:
            groups = run >> 1
            size = groups * width
            if not groups or position + size > end:
                raise _Cannot
            take = min(groups * 8, count - filled)
            if width:
                bits = np.unpackbits(np.frombuffer(data, np.uint8, size, position), bitorder="little")
                out[filled : filled + take] = (bits.reshape(-1, width).astype(np.int64) @ weights)[:take]
            position += size
        else:
            if not run >> 1 or position + value_bytes > end:
                raise _Cannot
            take = min(run >> 1, count - filled)
            out[filled : filled + take] = int.from_bytes(data[position : position + value_bytes], "little")
            position += value_bytes
        filled += take
    return out


def _level_bytes(defs: np.ndarray) -> bytes:
    """Definition levels (0 or 1) in the hybrid encoding, one run: of one value repeated, else bit-packed."""
    count = len(defs)
    if not count:
        return b""
    if defs.all() or not defs.any():
        return varint_bytes(count << 1) + (b"\x01" if defs[0] else b"\x00")
    groups = (count + 7) // 8
    padded = np.zeros(groups * 8, np.uint8)
    padded[:count] = defs
    return varint_bytes(groups << 1 | 1) + np.packbits(padded, bitorder="little").tobytes()
