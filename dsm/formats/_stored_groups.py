"""Parquet row groups copied as stored: a group's column chunks taken from a source file byte for byte (each
page given a CRC where it has none), placed in a file that dsm's writer is writing, and listed in that file's
footer.

A rewrite that keeps a group this way neither decodes it for the writer nor encodes and compresses it again
(compression was most of a reshard's CPU). A group is kept only where nothing about it can differ from what
the writer would make of the same rows, as far as a reader sees: the file's schema, as Parquet stores it,
is the one dsm's writer stores for the target schema, element for element; every chunk is whole in the file
(no other file, no encryption) with the codec asked for; its pages account for every value the footer
declares. The rows of a kept group are digested by decoding the very bytes that are written (a file of
that group alone, under the footer the written file gets), so the proof is of the written bytes.

Structures, fields by their Parquet thrift ids: FileMetaData (2 schema, 3 num_rows, 4 row_groups), RowGroup
(1 columns, 2 total_byte_size, 3 num_rows, 5 file_offset, 6 total_compressed_size, 7 ordinal), ColumnChunk
(1 file_path, 2 file_offset, 3 meta_data, 4-7 page index, 8-9 encryption), ColumnMetaData (4 codec,
5 num_values, 6 total_uncompressed_size, 7 total_compressed_size, 9 data_page_offset, 10 index_page_offset,
11 dictionary_page_offset, 12 statistics, 14-15 bloom filter), PageHeader (1 type, 3 compressed_page_size,
4 crc, 5 data page, 8 data page v2; the values of either at 1).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dsm.errors import FormatError
from dsm.formats._thrift import (
    I32,
    I64,
    LIST,
    STRUCT,
    Field,
    Items,
    ThriftError,
    decode_struct,
    encode_struct,
    field,
    value_of,
    without,
)

__all__ = [
    "Footer",
    "StoredGroup",
    "chunk_bytes",
    "chunk_pages",
    "chunk_span",
    "column_path",
    "footer_with_groups",
    "joined",
    "read_at",
    "read_footer",
    "read_schema",
    "signed_crc",
    "template_footer",
    "with_crc",
]

_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_MAGIC = b"PAR1"


@dataclass(frozen=True)
class Footer:
    """A Parquet file's footer, decoded: the FileMetaData tree and its row groups."""

    tree: list[Field]

    @property
    def schema(self) -> list[Any]:
        return list(value_of(self.tree, 2).values)

    @property
    def row_groups(self) -> list[list[Field]]:
        groups = value_of(self.tree, 4)
        return [] if groups is None else list(groups.values)

    @property
    def encrypted(self) -> bool:
        return field(self.tree, 8) is not None or field(self.tree, 9) is not None


def _footer_of(data: bytes) -> Footer:
    """The footer of a whole file in memory (``data``)."""
    length = int.from_bytes(data[-8:-4], "little")
    tree, end = decode_struct(data, len(data) - 8 - length)
    if end != len(data) - 8:
        raise ThriftError("the footer's length does not match its struct")
    return _checked(tree)


def _checked(tree: list[Field]) -> Footer:
    """``tree`` as a Footer, if it has the shape of a FileMetaData: a schema (a list of structs), a row
    count, and row groups (a list of structs) each with its columns (a list of structs) and row count;
    ThriftError if not."""

    def structs(value: Any) -> bool:
        return isinstance(value, Items) and value.kind == LIST and value.type == STRUCT

    groups = value_of(tree, 4)
    if not structs(value_of(tree, 2)) or not isinstance(value_of(tree, 3), int):
        raise ThriftError("not a Parquet footer (no schema or row count)")
    if groups is not None and not (
        structs(groups)
        and all(structs(value_of(g, 1)) and isinstance(value_of(g, 3), int) for g in groups.values)
    ):
        raise ThriftError("not a Parquet footer (a row group without columns or rows)")
    return Footer(tree)


def read_footer(file: IO[bytes]) -> Footer:
    """The footer of an open Parquet file (ThriftError or ValueError if there is none to decode)."""
    return _decoded_footer(_footer_bytes(file))


def _footer_bytes(file: IO[bytes]) -> bytes:
    """The bytes of an open Parquet file's footer struct."""
    file.seek(0, 2)
    size = file.tell()
    file.seek(max(0, size - 8))
    tail = file.read(8)
    length = int.from_bytes(tail[:4], "little")
    if len(tail) < 8 or tail[4:] != _MAGIC or length + 12 > size:
        raise ThriftError("no Parquet footer")
    file.seek(size - 8 - length)
    return file.read(length)


def read_schema(file: IO[bytes]) -> list[Any]:
    """The Parquet schema (its SchemaElements) of an open Parquet file, decoded without the row groups
    (ThriftError or ValueError if there is none to decode)."""
    tree, _ = decode_struct(_footer_bytes(file), until=3)
    schema = value_of(tree, 2)
    if not isinstance(schema, Items) or schema.kind != LIST or schema.type != STRUCT:
        raise ThriftError("not a Parquet footer (no schema)")
    return list(schema.values)


@lru_cache(maxsize=4)
def _decoded_footer(data: bytes) -> Footer:
    """The footer encoded in ``data`` (its struct alone). The same bytes give the same tree, which no
    caller changes: a rewrite reads a source's footer to plan and again to copy its groups, and decoding
    one of thousands of groups takes a while."""
    tree, end = decode_struct(data)
    if end != len(data):
        raise ThriftError("the footer's length does not match its struct")
    return _checked(tree)


@lru_cache(maxsize=32)
def _template(schema: pa.Schema, compression: str) -> tuple[Footer, int]:
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema, compression=compression, write_page_checksum=True):
        pass
    empty = _footer_of(sink.getvalue().to_pybytes())
    probe = pa.BufferOutputStream()
    pq.write_table(pa.table({"x": [1]}), probe, compression=compression)
    group = _footer_of(probe.getvalue().to_pybytes()).row_groups[0]
    codec = value_of(value_of(value_of(group, 1).values[0], 3), 4)
    return empty, int(codec)


def template_footer(schema: pa.Schema, compression: str) -> tuple[Footer, int]:
    """The footer dsm's writer gives a file of ``schema`` (no row groups), and the thrift code of the codec
    it writes for ``compression``: what a kept group's file must match."""
    return _template(schema, compression)


@dataclass(frozen=True)
class StoredGroup:
    """One row group's column chunks as they will be written (pages with CRCs), with what its footer entry
    needs; :meth:`placed` gives that entry for where the chunks land."""

    rows: int
    chunks: tuple[bytes | pa.Buffer, ...]
    columns: tuple[tuple[list[Field], list[Field], int | None, int, int], ...]
    """Per chunk: its ColumnChunk and ColumnMetaData trees, and its dictionary page's and first data
    page's offsets in the chunk, and the bytes its page headers grew by."""
    group: list[Field]

    @property
    def nbytes(self) -> int:
        return sum(len(chunk) for chunk in self.chunks)

    @classmethod
    def read(
        cls, file: IO[bytes], footer: Footer, index: int, codec: int, *, statistics: bool, where: str
    ) -> StoredGroup | None:
        """Row group ``index`` of ``file`` ready to be written as stored, or None where it cannot be kept
        (it is then decoded and written again). A page whose CRC does not match is FormatError."""
        group = footer.row_groups[index]
        chunks, columns = [], []
        for chunk_tree in value_of(group, 1).values:
            meta = value_of(chunk_tree, 3)
            if not isinstance(meta, list) or value_of(meta, 4) != codec:
                return None
            if statistics and field(meta, 12) is None:
                return None
            if not isinstance(value_of(meta, 6), int):
                return None  # no uncompressed size to carry over
            data = chunk_bytes(file, chunk_tree)
            if data is None:
                return None
            paged = _with_crcs(data, where=f"{where} column {column_path(meta)}")
            if paged is None or paged[3] != value_of(meta, 5):
                return None
            body, dictionary, first_data, _values, grew = paged
            chunks.append(body)
            columns.append((chunk_tree, meta, dictionary, first_data, grew))
        return cls(rows=int(value_of(group, 3)), chunks=tuple(chunks), columns=tuple(columns), group=group)

    @classmethod
    def encoded(cls, data: pa.Buffer) -> list[StoredGroup]:
        """The row groups of ``data``, a whole file that pyarrow's writer has just encoded in memory with
        page CRCs (:mod:`dsm.formats._parquet_writer`), in order: their chunks are slices of ``data`` taken
        as they are, their offsets from the footer (nothing to check in bytes made a moment ago)."""
        length = int.from_bytes(data[-8:-4], "little")
        footer = _footer_of(_MAGIC + data.slice(data.size - 8 - length).to_pybytes())
        groups = []
        for group in footer.row_groups:
            chunks, columns = [], []
            for chunk_tree in value_of(group, 1).values:
                meta = value_of(chunk_tree, 3)
                data_start = int(value_of(meta, 9))
                dictionary = value_of(meta, 11)
                start = data_start if dictionary is None else min(int(dictionary), data_start)
                chunks.append(data.slice(start, int(value_of(meta, 7))))
                at = None if dictionary is None else int(dictionary) - start
                columns.append((chunk_tree, meta, at, data_start - start, 0))
            rows = int(value_of(group, 3))
            groups.append(cls(rows=rows, chunks=tuple(chunks), columns=tuple(columns), group=group))
        return groups

    def placed(self, at: int) -> list[Field]:
        """This group's RowGroup entry with its chunks written from offset ``at`` on, one after another."""
        entries = []
        position = at
        grown = 0
        for body, (chunk_tree, meta, dictionary, first_data, grew) in zip(
            self.chunks, self.columns, strict=True
        ):
            edited = without(meta, 6, 7, 9, 10, 11, 14, 15)
            edited += [
                Field(6, I64, int(value_of(meta, 6)) + grew),
                Field(7, I64, len(body)),
                Field(9, I64, position + first_data),
            ]
            if dictionary is not None:
                edited.append(Field(11, I64, position + dictionary))
            edited.sort(key=lambda item: item.id)
            kept = without(chunk_tree, 2, 3, 4, 5, 6, 7)
            entries.append(sorted([*kept, Field(2, I64, 0), Field(3, STRUCT, edited)], key=lambda x: x.id))
            position += len(body)
            grown += grew
        group = without(self.group, 1, 2, 5, 6, 7)
        group += [
            Field(1, LIST, Items(LIST, STRUCT, entries)),
            Field(2, I64, int(value_of(self.group, 2) or 0) + grown),
            Field(5, I64, at),
            Field(6, I64, position - at),
        ]
        return sorted(group, key=lambda item: item.id)

    def alone(self, template: Footer) -> pa.Buffer:
        """A whole Parquet file of this group alone under ``template``'s schema and metadata: what a reader
        of the written file decodes this group as."""
        head = len(_MAGIC)
        tree = without(template.tree, 3, 4)
        tree += [
            Field(3, I64, self.rows),
            Field(4, LIST, Items(LIST, STRUCT, [_unnumbered(self.placed(head))])),
        ]
        footer = encode_struct(sorted(tree, key=lambda item: item.id))
        return joined([_MAGIC, *self.chunks, footer, len(footer).to_bytes(4, "little"), _MAGIC])


def joined(pieces: Sequence[bytes | memoryview | pa.Buffer]) -> pa.Buffer:
    """``pieces`` one after another in one buffer of their size, copied without holding the interpreter's
    lock (a group's chunks are tens of MiB, and the threads reading other files wait for it). The buffer is
    the system allocator's, which returns it to the system when dropped, where Arrow's pool in a dsm
    process keeps freed pages for its next buffers (``dsm.cli``, "Freed pages kept"): kept by each thread
    that read a group, they made a reshard's peak RSS 60-130 MiB higher."""
    size = sum(piece.nbytes if isinstance(piece, memoryview) else len(piece) for piece in pieces)
    out = pa.allocate_buffer(size, memory_pool=pa.system_memory_pool())  # handed back once dropped
    sink = pa.FixedSizeBufferWriter(out)
    for piece in pieces:
        sink.write(piece)
    return out


def chunk_span(chunk: list[Field]) -> tuple[int, int] | None:
    """Where a column chunk (a ColumnChunk tree of a file's footer) lies in its file: the offset of its
    dictionary page, or its first data page, and its length; None where it is not all in that file
    (another file's, encrypted, offsets missing)."""
    meta = value_of(chunk, 3)
    if not isinstance(meta, list) or any(field(chunk, i) is not None for i in (1, 8, 9)):
        return None  # in another file, or encrypted
    start, data_start, length = value_of(meta, 11) or value_of(meta, 9), value_of(meta, 9), value_of(meta, 7)
    if not all(isinstance(n, int) and n > 0 for n in (start, data_start, length)):
        return None
    return min(start, data_start), length


def chunk_bytes(file: IO[bytes], chunk: list[Field]) -> bytes | None:
    """The bytes of a column chunk (a ColumnChunk tree of ``file``'s footer) where :func:`chunk_span`
    finds them all in ``file``; None otherwise, or where the file ends before them."""
    span = chunk_span(chunk)
    if span is None:
        return None
    data = read_at(file, *span)
    return data if len(data) == span[1] else None


def read_at(file: IO[bytes], offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset``: by a positional read where the file has one (pyarrow's own file, which
    the decoder may be reading at the same time), else by seeking."""
    positional = getattr(file, "read_at", None)
    if positional is not None:
        return bytes(positional(length, offset))
    file.seek(offset)
    return file.read(length)


def column_path(meta: list[Field]) -> str:
    names = value_of(meta, 3)
    return ".".join(n.decode("utf-8", "replace") for n in names.values) if names is not None else "?"


def with_crc(header: list[Field], crc: int) -> bytes:
    """A page header's bytes, with ``crc`` (signed, as Parquet stores it) for the page's CRC."""
    return encode_struct(sorted([*without(header, 4), Field(4, I32, crc)], key=lambda item: item.id))


def signed_crc(*pieces: bytes | memoryview) -> int:
    """The CRC-32 of ``pieces`` one after another, as a page header stores it (a signed 32-bit integer)."""
    crc = 0
    for piece in pieces:
        crc = zlib.crc32(piece, crc)
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def chunk_pages(chunk: bytes, *, where: str) -> Iterator[tuple[list[Field], memoryview, int]]:
    """Each page of a column chunk: its header, its body and the body's signed CRC-32, checked against the
    header's where it has one (FormatError, naming ``where``); ThriftError where a page runs past the
    chunk or a header is no struct."""
    view = memoryview(chunk)
    position = 0
    while position < len(chunk):
        header, start = decode_struct(chunk, position)
        size = value_of(header, 3)
        if not isinstance(size, int) or size < 0 or start + size > len(chunk):
            raise ThriftError("a page runs past its column chunk")
        body = view[start : start + size]
        crc = signed_crc(body)
        stored = value_of(header, 4)
        if stored is not None and stored != crc:
            raise FormatError(f"{where}: a page's CRC does not match its bytes: the file is damaged")
        yield header, body, crc
        position = start + size


def _with_crcs(chunk: bytes, *, where: str) -> tuple[bytes, int | None, int, int, int] | None:
    """The chunk's pages, each header given its page's CRC-32 (a CRC already there is checked), with the
    offsets of its dictionary page and first data page, its values, and how many bytes the headers grew;
    None if the pages do not fill the chunk exactly."""
    out = bytearray()
    values = 0
    dictionary: int | None = None
    first_data: int | None = None
    try:
        for header, body, crc in chunk_pages(chunk, where=where):
            kind = value_of(header, 1)
            if kind == _DICTIONARY_PAGE and dictionary is None and first_data is None:
                dictionary = len(out)
            elif kind in (_DATA_PAGE, _DATA_PAGE_V2):
                if first_data is None:
                    first_data = len(out)
                values += int(value_of(value_of(header, 5 if kind == _DATA_PAGE else 8), 1))
            out += with_crc(header, crc)
            out += body
    except (ThriftError, TypeError, AttributeError):
        return None
    if first_data is None:
        return None
    return bytes(out), dictionary, first_data, values, len(out) - len(chunk)


def _unnumbered(group: list[Field]) -> list[Field]:
    """``group`` without an ordinal: pyarrow numbers the groups of an encrypted file only, and a group
    copied from another file may bring the number it had there."""
    return without(group, 7)


def _start(group: list[Field]) -> int:
    """Where a row group's first chunk starts (its ``file_offset``, else its first chunk's first page)."""
    offset = value_of(group, 5)
    if isinstance(offset, int) and offset > 0:
        return offset
    meta = value_of(value_of(group, 1).values[0], 3)
    return int(value_of(meta, 11) or value_of(meta, 9))


def footer_with_groups(written: bytes, stored: list[list[Field]]) -> bytes:
    """The footer bytes (FileMetaData, length, magic) that pyarrow's writer ended a file with, listing also
    the ``stored`` row groups (RowGroup entries already placed): every group in file order, none numbered.
    A file whose groups pyarrow encoded, some by the file's writer and some in files of their own placed
    as stored, gets the footer bytes the file's writer gives it when it encodes them all."""
    footer = _footer_of(_MAGIC + written)
    groups = footer.row_groups + stored
    groups.sort(key=_start)
    rows = sum(int(value_of(group, 3)) for group in groups)
    tree = without(footer.tree, 3, 4)
    tree += [
        Field(3, I64, rows),
        Field(4, LIST, Items(LIST, STRUCT, [_unnumbered(g) for g in groups])),
    ]
    encoded = encode_struct(sorted(tree, key=lambda item: item.id))
    return encoded + len(encoded).to_bytes(4, "little") + _MAGIC
