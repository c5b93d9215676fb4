"""Parquet row groups assembled from the pages of several small source row groups: the column chunks of text
and bytes taken from the source pages as stored, one output group of consecutive source groups, so that
their values are neither decoded for the writer nor compressed again.

pyarrow's writer dictionary-encodes text until the dictionary outgrows 1 MiB, checked after every 1,024
rows; a group of mostly distinct texts of up to 1,024 rows (Hugging Face ``datasets`` writes groups of
1,000 rows, 100 for images) is stored as one dictionary page holding every value in row order and a page
of the indices 0, 1, 2, ... That dictionary page is, byte for byte, the compressed PLAIN values of the
rows: it becomes a data page of version 2 (whose levels are stored apart from the compressed values) under
a new header. A page of values that refers to no dictionary (PLAIN or a delta encoding, as a dictionary's
fallback writes) holds all it needs and is copied as it is. A chunk whose dictionary is used any other way
(a value repeated, another order) is not assembled: that column, like every column of other types, is
decoded and encoded by pyarrow's writer for the group (:func:`~dsm.formats._parquet_writer.encoded_group`).

Each page keeps or gets a CRC (a CRC a source page has is checked). The chunk's statistics are the source
chunks' combined (the least minimum, the greatest maximum, null counts and size statistics added), and
:class:`Bounds` checks them against the values decoded from the written bytes, which the caller decodes to
digest the group's rows (a group whose bounds do not hold is decoded and written again instead).

Structures, by their Parquet thrift ids besides those of :mod:`dsm.formats._stored_groups`: SchemaElement
(1 type, 3 repetition, 5 children), ColumnMetaData (1 type, 2 encodings, 3 path, 13 encoding statistics,
16 size statistics), Statistics (3 null count, 5 maximum, 6 minimum, 7-8 exactness), PageHeader (2
uncompressed size, 7 dictionary page), DataPageHeader (1 values, 2 encoding, 3 level encoding) and its
version 2 (1 values, 2 nulls, 3 rows, 4 encoding, 5-6 level lengths, 7 compressed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsm.formats._parquet_writer import encoded_group, writer_options
from dsm.formats._stored_groups import (
    Footer,
    StoredGroup,
    chunk_bytes,
    chunk_pages,
    column_path,
    joined,
    signed_crc,
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
    field,
    value_of,
    varint_at,
    varint_bytes,
)

__all__ = ["Bounds", "assemble_group"]

_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE, _DELTA_LENGTH, _DELTA_BYTES, _RLE_DICTIONARY = 0, 2, 3, 6, 7, 8
_SELF_CONTAINED = {_PLAIN, _DELTA_LENGTH, _DELTA_BYTES}
_INDICES = {_PLAIN_DICTIONARY, _RLE_DICTIONARY}
_BYTE_ARRAY = 6
_REQUIRED, _OPTIONAL = 0, 1
_CODECS = {0: None, 1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}  # thrift code: pyarrow's


class _Cannot(Exception):
    """A chunk that cannot be assembled from its pages (it is decoded and encoded instead)."""


@dataclass
class Bounds:
    """A column's combined chunk statistics, and what the decoded values of the written group show:
    :meth:`add` each decoded batch, then :meth:`holds`."""

    name: str
    minimum: bytes | None
    maximum: bytes | None
    exact: bool
    nulls: int
    _low: bytes | None = None
    _high: bytes | None = None
    _nulls: int = 0

    def add(self, batch: pa.RecordBatch) -> None:
        column = batch.column(self.name)
        if pa.types.is_dictionary(column.type):  # a dictionary type is stored as its values
            column = column.dictionary_decode()
        self._nulls += column.null_count
        if column.null_count == len(column):
            return
        low, high = (_as_bytes(value.as_py()) for value in pc.min_max(column).values())
        self._low = low if self._low is None else min(self._low, low)
        self._high = high if self._high is None else max(self._high, high)

    def holds(self) -> bool:
        if self._nulls != self.nulls:
            return False
        if self.minimum is None or self.maximum is None:
            return self._low is None
        if self._low is None or self._high is None:
            return False
        if self.exact:
            return (self.minimum, self.maximum) == (self._low, self._high)
        return self.minimum <= self._low and self._high <= self.maximum


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def assemble_group(
    file: IO[bytes],
    parquet: pq.ParquetFile,
    footer: Footer,
    groups: Sequence[int],
    template: Footer,
    schema: pa.Schema,
    options: Mapping[str, Any],
    *,
    where: str,
) -> tuple[StoredGroup, list[Bounds]] | None:
    """Source row ``groups`` (consecutive, of ``file``, whose ``footer`` has ``template``'s schema) as one
    row group to be written as stored: each top-level text or bytes column assembled from its pages where
    every chunk allows it, every other column read by ``parquet`` (the same file) and encoded by pyarrow's
    writer with the file's ``options``; None where no column can be assembled. ``schema``: the written one."""
    codec = _codec_of(footer, groups)
    fields = _top_fields(template.schema)
    if codec is None or len(fields) != len(schema):
        return None
    rows = sum(int(value_of(footer.row_groups[index], 3)) for index in groups)
    assembled: dict[int, tuple[pa.Buffer, list[Field], list[Field], Bounds]] = {}
    for position, (leaf, _, optional) in enumerate(fields):
        if optional is not None:
            built = _assembled_column(
                file, footer, groups, leaf, optional, codec, schema.field(position).name, where
            )
            if built is not None and value_of(built[1], 5) == rows:
                assembled[position] = built
    if not assembled:
        return None
    encoded: Iterator[tuple[pa.Buffer | bytes, tuple[list[Field], list[Field], int | None, int, int]]] = iter(
        ()
    )
    others = pa.schema([schema.field(i) for i in range(len(schema)) if i not in assembled])
    if len(others):
        try:
            table = parquet.read_row_groups(list(groups), columns=others.names, use_threads=False)
        except (pa.ArrowException, OSError, ValueError):
            return None  # decoded as rows, the decoder says what is wrong
        if [f.type for f in table.schema] != [f.type for f in others] or table.num_rows != rows:
            return None
        table = pa.Table.from_arrays(table.columns, schema=others)
        pieces = encoded_group(table, others, writer_options(table, options))
        if len(pieces) != 1 or pieces[0].rows != rows:
            return None
        encoded = zip(pieces[0].chunks, pieces[0].columns, strict=True)
    chunks: list[pa.Buffer | bytes] = []
    columns: list[tuple[list[Field], list[Field], int | None, int, int]] = []
    for position, (_, leaves, _) in enumerate(fields):
        if position in assembled:
            body, meta, tree, _ = assembled[position]
            chunks.append(body)
            columns.append((tree, meta, None, 0, 0))
            continue
        for _ in range(leaves):
            chunk, column = next(encoded)
            chunks.append(chunk)
            columns.append(column)
    total = sum(int(value_of(meta, 6)) + grew for _, meta, _, _, grew in columns)
    group = [Field(2, I64, total), Field(3, I64, rows)]
    stored = StoredGroup(rows=rows, chunks=tuple(chunks), columns=tuple(columns), group=group)
    return stored, [bounds for *_, bounds in assembled.values()]


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


def _assembled_column(
    file: IO[bytes],
    footer: Footer,
    groups: Sequence[int],
    leaf: int,
    optional: bool,
    codec: int,
    name: str,
    where: str,
) -> tuple[pa.Buffer, list[Field], list[Field], Bounds] | None:
    """Column ``leaf``'s chunks of ``groups`` as one chunk of pages (:func:`_pages_of`), with its
    ColumnMetaData and ColumnChunk trees and its combined statistics; None where a chunk cannot be."""
    out: list[bytes | memoryview] = []
    metas: list[list[Field]] = []
    kinds: Counter[tuple[int, int]] = Counter()
    uncompressed = values = 0
    try:
        for index in groups:
            tree = value_of(footer.row_groups[index], 1).values[leaf]
            meta = value_of(tree, 3)
            data = chunk_bytes(file, tree)
            if data is None or value_of(meta, 1) != _BYTE_ARRAY:
                return None
            where_chunk = f"{where} row group {index} column {column_path(meta)}"
            count, size = _pages_of(data, optional, _CODECS[codec], out, kinds, where=where_chunk)
            if count != value_of(meta, 5):
                return None
            values += count
            uncompressed += size
            metas.append(meta)
    except (_Cannot, ThriftError, TypeError, ValueError, AttributeError):
        return None
    combined = _statistics(metas, name)
    if combined is None:
        return None
    statistics, bounds = combined
    first = metas[0]
    meta = [item for item in first if item.id in (1, 3, 4)]
    encodings = sorted({_RLE} | {encoding for _, encoding in kinds})
    meta += [
        Field(2, LIST, Items(LIST, I32, encodings)),
        Field(5, I64, values),
        Field(6, I64, uncompressed),
        Field(7, I64, sum(len(piece) for piece in out)),
        Field(9, I64, 0),
        Field(12, STRUCT, statistics),
        Field(13, LIST, Items(LIST, STRUCT, [_encoding_stat(kind, n) for kind, n in sorted(kinds.items())])),
    ]
    sizes = _size_statistics(metas)
    if sizes is not None:
        meta.append(Field(16, STRUCT, sizes))
    meta.sort(key=lambda item: item.id)
    tree = value_of(footer.row_groups[groups[0]], 1).values[leaf]
    return joined(out), meta, tree, bounds


def _encoding_stat(kind: tuple[int, int], pages: int) -> list[Field]:
    return [Field(1, I32, kind[0]), Field(2, I32, kind[1]), Field(3, I32, pages)]


def _pages_of(
    chunk: bytes,
    optional: bool,
    codec: str | None,
    out: list[bytes | memoryview],
    kinds: Counter[tuple[int, int]],
    *,
    where: str,
) -> tuple[int, int]:
    """Append ``chunk``'s pages to ``out`` as pages that refer to no dictionary: its dictionary page with
    the data pages of indices 0, 1, 2, ... as one data page of version 2, every other data page as it is;
    each with a CRC. Counts the pages by (type, encoding) into ``kinds``; the values and the uncompressed
    bytes (headers included) appended. _Cannot where the chunk is laid out any other way."""
    dictionary: tuple[list[Field], memoryview] | None = None
    levels: list[np.ndarray | None] = []
    counts: list[int] = []
    indexed = values = uncompressed = 0
    done = False

    def emit(header: list[Field], *body: bytes | memoryview, crc: int | None = None) -> None:
        nonlocal uncompressed
        encoded = with_crc(header, signed_crc(*body) if crc is None else crc)
        out.append(encoded)
        out.extend(body)
        uncompressed += len(encoded) + int(value_of(header, 2))

    def flush() -> None:
        nonlocal done, values
        if dictionary is None or done:
            return
        header, body = dictionary
        if not counts or indexed != int(value_of(value_of(header, 7), 1)):
            raise _Cannot  # a dictionary value that no row takes
        count = sum(counts)
        defs = None if not optional else np.concatenate([d for d in levels if d is not None])
        level_bytes = b"" if defs is None else _level_bytes(defs)
        nulls = 0 if defs is None else count - int(np.count_nonzero(defs))
        page = [
            Field(1, I32, count),
            Field(2, I32, nulls),
            Field(3, I32, count),
            Field(4, I32, _PLAIN),
            Field(5, I32, len(level_bytes)),
            Field(6, I32, 0),
            Field(7, BOOL, codec is not None),
        ]
        emit(
            [
                Field(1, I32, _DATA_PAGE_V2),
                Field(2, I32, len(level_bytes) + int(value_of(header, 2))),
                Field(3, I32, len(level_bytes) + len(body)),
                Field(8, STRUCT, page),
            ],
            level_bytes,
            body,
        )
        kinds[(_DATA_PAGE_V2, _PLAIN)] += 1
        values += count
        done = True

    for header, body, crc in chunk_pages(chunk, where=where):
        kind = value_of(header, 1)
        if kind == _DICTIONARY_PAGE:
            if (
                dictionary is not None
                or values
                or value_of(value_of(header, 7), 2) not in (_PLAIN, _PLAIN_DICTIONARY)
            ):
                raise _Cannot
            dictionary = (header, body)
            continue
        if kind not in (_DATA_PAGE, _DATA_PAGE_V2):
            raise _Cannot
        page = value_of(header, 5 if kind == _DATA_PAGE else 8)
        encoding = value_of(page, 2 if kind == _DATA_PAGE else 4)
        if encoding in _INDICES:
            if dictionary is None or done:
                raise _Cannot
            defs, count, indices = _indices(kind, header, page, body, optional, codec)
            if not np.array_equal(indices, np.arange(indexed, indexed + len(indices))):
                raise _Cannot
            indexed += len(indices)
            levels.append(defs)
            counts.append(count)
            continue
        if encoding not in _SELF_CONTAINED:
            raise _Cannot
        flush()
        emit(header, body, crc=crc)
        kinds[(kind, encoding)] += 1
        values += int(value_of(page, 1))
    flush()
    return values, uncompressed


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


def _statistics(metas: list[list[Field]], name: str) -> tuple[list[Field], Bounds] | None:
    """The chunks' statistics combined, and the Bounds to check them by; None where a chunk has none (or
    only the deprecated signed ones)."""
    nulls = 0
    low: bytes | None = None
    high: bytes | None = None
    exact: bool | None = True
    for meta in metas:
        stats = value_of(meta, 12)
        if not isinstance(stats, list) or field(stats, 1) is not None or field(stats, 2) is not None:
            return None
        chunk_nulls = value_of(stats, 3)
        if not isinstance(chunk_nulls, int):
            return None
        nulls += chunk_nulls
        if chunk_nulls == int(value_of(meta, 5)):
            continue  # every value null: no minimum or maximum
        minimum, maximum = value_of(stats, 6), value_of(stats, 5)
        if not isinstance(minimum, bytes) or not isinstance(maximum, bytes):
            return None
        low = minimum if low is None else min(low, minimum)
        high = maximum if high is None else max(high, maximum)
        flags = (value_of(stats, 7), value_of(stats, 8))
        exact = None if exact is None or None in flags else exact and all(flags)
    fields = [Field(3, I64, nulls)]
    if low is not None and high is not None:
        fields += [Field(5, BINARY, high), Field(6, BINARY, low)]
        if exact is not None:
            fields += [Field(7, BOOL, exact), Field(8, BOOL, exact)]
    return fields, Bounds(name, low, high, bool(exact), nulls)


def _size_statistics(metas: list[list[Field]]) -> list[Field] | None:
    """The chunks' size statistics added up (bytes of values, level histograms), if every chunk has them."""
    sizes = [value_of(meta, 16) for meta in metas]
    if not all(isinstance(size, list) for size in sizes):
        return None
    out: list[Field] = []
    for id_ in (1, 2, 3):
        found = [value_of(size, id_) for size in sizes]
        if all(item is None for item in found):
            continue
        if id_ == 1:
            if not all(isinstance(item, int) for item in found):
                return None
            out.append(Field(1, I64, sum(found)))
            continue
        if (
            not all(isinstance(item, Items) for item in found)
            or len({len(item.values) for item in found}) != 1
        ):
            return None
        added = [sum(column) for column in zip(*(item.values for item in found), strict=True)]
        out.append(Field(id_, LIST, Items(LIST, I64, added)))
    return out
