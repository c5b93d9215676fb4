"""WebDataset: tar files whose members are grouped into samples by key.

A member ``dir/abc.seg.json`` belongs to the sample with key ``dir/abc`` (the path up to the first ``.``
of the base name) and fills the column ``seg.json`` (the rest, lowercased). A row is ``__key__`` plus one
column per extension; an extension a sample lacks is null.

>>> from dsm.formats.webdataset import WebDatasetFormat
>>> WebDatasetFormat().name
'webdataset'
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import IO, Any, ClassVar

import numpy as np
import pyarrow as pa

from dsm.errors import FormatError, SchemaError
from dsm.formats._common import (
    PositionTrackingSink,
    check_batch_schema,
    check_stream_codec,
    is_string_like,
    open_input_stream,
    open_output_stream,
    project_schema,
)
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter, Storage
from dsm.formats.index import ShardIndex
from dsm.paths import path_problem

__all__ = ["KEY_FIELD", "TEXT_EXTENSIONS", "WebDatasetFormat", "split_member"]

KEY_FIELD = "__key__"
TEXT_EXTENSIONS = frozenset(
    {"txt", "text", "json", "cls", "cls2", "id", "caption", "html", "xml", "md", "csv", "tsv"}
)
"""Extensions read as strings when no schema is given; every other extension is binary."""

_INFER_SAMPLES = 1000
_BATCH_BYTES = 64 * 1024 * 1024
_BLOCK = tarfile.BLOCKSIZE
_WINDOW = 4 * tarfile.RECORDSIZE  # bytes kept behind the read position: tarfile reads one record ahead

_Sample = tuple[str, dict[str, bytes]]


def split_member(path: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member path by the WebDataset convention, or None without an extension."""
    directory, base = posixpath.split(path)
    dot = base.find(".")
    if dot <= 0 or dot == len(base) - 1:
        return None
    key = posixpath.join(directory, base[:dot]) if directory else base[:dot]
    return key, base[dot + 1 :].lower()


def _is_binary(type_: pa.DataType) -> bool:
    return bool(pa.types.is_binary(type_) or pa.types.is_large_binary(type_))


class _TarInput:
    """The (decompressed) bytes of a tar, read forward, with the last ones kept so that the blocks where
    tarfile stopped can be looked at again: the end-of-archive marker, or a damaged header."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.position = 0
        self._kept = b""

    def read(self, size: int = -1) -> bytes:
        data = bytes(self._raw.read(size))
        self.position += len(data)
        self._kept = (self._kept + data)[-_WINDOW:]
        return data

    def blocks_at(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes from ``offset`` of the stream (fewer at its end); None if no longer kept."""
        start = self.position - len(self._kept)
        if offset < start:
            return None
        while offset + size > self.position:
            if not self.read(offset + size - self.position):
                break
        start = self.position - len(self._kept)
        return self._kept[offset - start : offset - start + size]


class WebDatasetFormat(Format):
    """WebDataset tar shards (read streaming; written deterministically, GNU tar format), optionally
    compressed as a whole (``.tar.gz`` / ``.tgz`` with ``compression="gzip"``, as the ``webdataset`` library
    reads them).

    Columns: ``__key__`` (string, not null) and one string or binary column per extension. Written
    members have mtime 0, uid/gid 0, empty owner names and mode 0o644, in schema field order per sample;
    nulls are omitted. A read ends at the tar's end-of-archive marker: a damaged header or a file cut
    short is a FormatError, never fewer samples.
    """

    name: ClassVar[str] = "webdataset"
    extensions: ClassVar[tuple[str, ...]] = (".tar", ".tar.gz", ".tgz")
    self_describing: ClassVar[bool] = False
    index_by_scan: ClassVar[bool] = True
    plain_values: ClassVar[bool] = True

    def __init__(self, *, compression: str | None = None) -> None:
        self.compression = check_stream_codec(compression)

    def options(self) -> dict[str, Any]:
        return {"compression": self.compression}

    def stored_type(self, type_: pa.DataType) -> pa.DataType:
        if is_string_like(type_) or _is_binary(type_):
            return type_
        raise SchemaError(f"type {type_} cannot be stored (webdataset: string or binary)")

    def storage(self, schema: pa.Schema) -> Storage:
        storage = super().storage(schema)
        problems = list(storage.problems)
        if schema.get_field_index(KEY_FIELD) < 0 or not is_string_like(schema.field(KEY_FIELD).type):
            problems.insert(0, f'field "{KEY_FIELD}": a string field "{KEY_FIELD}" is required (webdataset)')
        for field in schema:
            if field.name != KEY_FIELD and (
                not field.name
                or field.name != field.name.lower()
                or "/" in field.name
                or field.name.startswith(".")
            ):
                problems.append(f'field "{field.name}": not usable as a file extension (lowercase, no "/")')
        return replace(storage, problems=tuple(problems))

    # ------------------------------------------------------------------------------------------ reading

    def _members(self, file: IO[bytes], shard: str) -> Iterator[tuple[str, str, tarfile.TarInfo, Any]]:
        """``(key, extension, member, archive)`` of every file member in file order; the members of one
        sample must be consecutive, with distinct extensions; the tar must end at its end-of-archive
        marker."""
        seen: set[str] = set()
        key: str | None = None
        extensions: set[str] = set()
        stream = _TarInput(open_input_stream(file, self.compression))
        total = _file_size(file) if self.compression is None else None
        last = "the start"
        try:
            with tarfile.open(fileobj=stream, mode="r|") as archive:  # type: ignore[call-overload]
                for member in archive:
                    if total is not None and member.offset_data + member.size > total:
                        raise FormatError(
                            f'shard {shard}: member "{member.name}" declares {member.size} bytes but the '
                            f"file ends {total - member.offset_data} bytes after its header: it is truncated"
                        )
                    last = f'member "{member.name}"'
                    if not member.isfile():
                        continue
                    unsafe = path_problem(member.name)
                    if unsafe is not None:
                        raise FormatError(
                            f'shard {shard}: member "{member.name}" {unsafe}: a member name stays inside '
                            "its archive"
                        )
                    parts = split_member(member.name)
                    if parts is None:
                        raise FormatError(f'shard {shard}: member "{member.name}" has no key.extension name')
                    if parts[0] != key:
                        key, extensions = parts[0], set()
                        if key in seen:
                            raise FormatError(
                                f'shard {shard}: sample "{key}" is split: its members are not consecutive '
                                f'(again at member "{member.name}")'
                            )
                        seen.add(key)
                    if parts[1] in extensions:
                        raise FormatError(f'shard {shard}: sample "{key}" has two "{parts[1]}" members')
                    extensions.add(parts[1])
                    yield parts[0], parts[1], member, archive
                _check_end(stream, archive.offset, last, shard)
        except (tarfile.TarError, EOFError) as exc:
            raise FormatError(f"shard {shard}: not a readable tar file ({exc}) after {last}") from None

    def _samples(self, file: IO[bytes], shard: str) -> Iterator[_Sample]:
        """Samples in file order, with the bytes of their members."""
        key: str | None = None
        members: dict[str, bytes] = {}
        for name, extension, member, archive in self._members(file, shard):
            if name != key:
                if key is not None:
                    yield key, members
                key, members = name, {}
            handle = archive.extractfile(member)  # before the stream moves on to the next member
            members[extension] = handle.read() if handle is not None else b""
        if key is not None:
            yield key, members

    def read_schema(self, file: IO[bytes], *, shard: str) -> pa.Schema:
        """``__key__`` plus the extensions of the first samples (sorted), typed by ``TEXT_EXTENSIONS``."""
        extensions: set[str] = set()
        for index, (_, members) in enumerate(self._samples(file, shard)):
            extensions.update(members)
            if index + 1 >= _INFER_SAMPLES:
                break
        fields = [pa.field(KEY_FIELD, pa.string(), nullable=False)]
        fields += [
            pa.field(ext, pa.string() if ext.rsplit(".", 1)[-1] in TEXT_EXTENSIONS else pa.binary())
            for ext in sorted(extensions)
        ]
        return pa.schema(fields)

    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """One row per sample; a member whose extension is not in ``schema`` is a FormatError."""
        if schema is None:
            schema = self.read_schema(file, shard=shard)
            file.seek(0)
        reasons = self.unsupported(schema)
        if reasons:
            raise SchemaError(f"shard {shard}: " + "; ".join(reasons))
        target = project_schema(schema, columns, shard=shard)
        rows: list[_Sample] = []
        size = 0
        for key, members in self._samples(file, shard):
            unknown = sorted(set(members) - set(schema.names))
            if unknown:
                raise FormatError(
                    f'shard {shard}: sample "{key}" has member "{key}.{unknown[0]}", '
                    "which is not a field of the schema"
                )
            rows.append((key, members))
            size += sum(len(value) for value in members.values())
            if len(rows) >= batch_rows or size >= _BATCH_BYTES:
                yield self._batch(rows, target, shard)
                rows, size = [], 0
        if rows:
            yield self._batch(rows, target, shard)

    def _batch(self, rows: list[_Sample], target: pa.Schema, shard: str) -> pa.RecordBatch:
        arrays = []
        for field in target:
            if field.name == KEY_FIELD:
                arrays.append(pa.array([key for key, _ in rows], type=field.type))
                continue
            values: list[Any] = [members.get(field.name) for _, members in rows]
            if is_string_like(field.type):
                values = [
                    self._text(v, key, field.name, shard) for v, (key, _) in zip(values, rows, strict=True)
                ]
            if not field.nullable and any(v is None for v in values):
                key = next(k for v, (k, _) in zip(values, rows, strict=True) if v is None)
                raise FormatError(
                    f'shard {shard}: sample "{key}" has no "{field.name}" member (field not nullable)'
                )
            arrays.append(pa.array(values, type=field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=target)

    @staticmethod
    def _text(value: bytes | None, key: str, extension: str, shard: str) -> str | None:
        if value is None:
            return None
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(
                f'shard {shard}: member "{key}.{extension}" is not valid UTF-8 ({exc.reason})'
            ) from None

    def count_rows(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> int:
        """Samples in the file (members are read, not decoded)."""
        return sum(1 for _ in self._samples(file, shard))

    # ------------------------------------------------------------------------------------ random access

    def index_shard(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> ShardIndex:
        """One piece per sample, from one pass over the tar headers: where each sample's first header
        starts, and where the bytes of each member are (for :meth:`value_range`). A compressed tar has no
        such offsets in the file: it is one piece, read from its start."""
        if self.compression is not None:
            file.seek(0)
            return ShardIndex.of(format=self.name, kind="file", rows=[self.count_rows(file, shard=shard)])
        file.seek(0)
        offsets: list[int] = []
        columns: dict[str, int] = {}
        member_piece: list[int] = []
        member_column: list[int] = []
        member_offset: list[int] = []
        member_size: list[int] = []
        key: str | None = None
        end = 0
        for name, extension, member, _ in self._members(file, shard):
            if name != key:
                key = name
                offsets.append(member.offset)
            member_piece.append(len(offsets) - 1)
            member_column.append(columns.setdefault(extension, len(columns)))
            member_offset.append(member.offset_data)
            member_size.append(member.size)
            end = member.offset_data + -(-member.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
        return ShardIndex.of(
            format=self.name,
            kind="sample",
            rows=[1] * len(offsets),
            offsets=[*offsets, end],
            members={
                "piece": member_piece,
                "column": member_column,
                "offset": member_offset,
                "size": member_size,
            },
            info={"columns": list(columns)},
        )

    def read_rows(
        self,
        file: IO[bytes],
        index: ShardIndex,
        *,
        shard: str,
        start: int,
        stop: int,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Only the tar members of samples ``start`` up to ``stop`` are read: one range of the file (of a
        compressed tar, everything up to them)."""
        if self.compression is not None:
            yield from super().read_rows(
                file,
                index,
                shard=shard,
                start=start,
                stop=stop,
                schema=schema,
                columns=columns,
                batch_rows=batch_rows,
            )
            return
        index.check_range(start, stop, shard=shard)
        if start == stop:
            return
        span = index.span(start, stop - 1)
        if span is None:
            raise FormatError(f"shard {shard}: the row index has no byte offsets; rebuild it")
        if schema is None:
            file.seek(0)
            schema = self.read_schema(file, shard=shard)
        file.seek(span[0])
        data = file.read(span[1] - span[0])
        if len(data) != span[1] - span[0]:
            raise FormatError(
                f"shard {shard}: ends before byte {span[1]}; the file changed after it was indexed"
            )
        # The members of these samples, then an end-of-archive marker: a tar stream of its own.
        stream = io.BytesIO(bytes(data) + b"\0" * (2 * tarfile.BLOCKSIZE))
        yield from self.iter_batches(
            stream, shard=shard, schema=schema, columns=columns, batch_rows=batch_rows
        )

    def value_range(self, index: ShardIndex, row: int, column: str) -> tuple[int, int] | None:
        """Where the member ``KEY.COLUMN`` of sample ``row`` is in the file: its bytes as stored."""
        known = list(index.info.get("columns") or [])
        if column not in known or "piece" not in index.members:
            return None
        pieces = index.members["piece"]
        lo, hi = np.searchsorted(pieces, row, side="left"), np.searchsorted(pieces, row, side="right")
        hits = np.flatnonzero(index.members["column"][lo:hi] == known.index(column))
        if not len(hits):
            return None
        at = int(lo + hits[0])
        return int(index.members["offset"][at]), int(index.members["size"][at])

    # ------------------------------------------------------------------------------------------ writing

    def _open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        return _TarWriter(file, schema, self.compression)


def _file_size(file: Any) -> int | None:
    """The size of an uncompressed shard's file, when its handle can say without reading it."""
    size = getattr(file, "size", None)
    try:
        value = size() if callable(size) else size
    except (OSError, ValueError, TypeError):
        return None
    return int(value) if isinstance(value, int) else None


def _check_end(stream: _TarInput, offset: int, last: str, shard: str) -> None:
    """tarfile ends a streamed archive silently at the first block that is not a valid header; the tar
    really ends only at a zero block (the end-of-archive marker), so anything else is damage."""
    block = stream.blocks_at(offset, _BLOCK)
    if block is None:
        raise FormatError(f"shard {shard}: cannot check the end of the tar after {last}")
    if not block:
        raise FormatError(
            f"shard {shard}: the tar ends after {last} without its end-of-archive marker: it is truncated"
        )
    if block != bytes(len(block)):
        raise FormatError(
            f"shard {shard}: damaged tar header at byte {offset} (after {last}): the samples from there on "
            "cannot be read; restore the shard"
        )
    if len(block) < _BLOCK:
        raise FormatError(f"shard {shard}: the tar's end-of-archive marker is cut short: it is truncated")


class _TarWriter(FormatWriter):
    def __init__(self, file: IO[bytes], schema: pa.Schema, compression: str | None) -> None:
        self._schema = schema
        self._sink = PositionTrackingSink(file)
        self._out = open_output_stream(self._sink, compression)
        self._archive = tarfile.open(  # noqa: SIM115 (closed by close())
            fileobj=self._out,
            mode="w|",
            format=tarfile.GNU_FORMAT,
            encoding="utf-8",
        )
        self._closed = False

    def write_batch(self, batch: pa.RecordBatch) -> None:
        check_batch_schema(batch, self._schema, what="webdataset writer")
        names = [name for name in batch.schema.names if name != KEY_FIELD]
        keys = batch.column(KEY_FIELD).to_pylist()
        columns = [batch.column(name).to_pylist() for name in names]
        for row, key in enumerate(keys):
            self._check_key(key)
            present = [
                (name, column[row])
                for name, column in zip(names, columns, strict=True)
                if column[row] is not None
            ]
            if not present:
                raise FormatError(
                    f'webdataset sample "{key}" has no non-null field: '
                    "a sample without members cannot be stored"
                )
            for name, value in present:
                self._add(f"{key}.{name}", value.encode("utf-8") if isinstance(value, str) else value)

    @staticmethod
    def _check_key(key: str | None) -> None:
        if key and path_problem(key) is not None:
            raise FormatError(
                f"webdataset key {key!r} cannot be written: it {path_problem(key)} (member names stay "
                "inside their archive)"
            )
        if not key or split_member(f"{key}.x") != (key, "x"):
            raise FormatError(
                f"webdataset key {key!r} cannot be written: "
                "keys are non-empty and their last path part has no '.'"
            )

    def _add(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = 0
        info.mode = 0o644
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.type = tarfile.REGTYPE
        self._archive.addfile(info, io.BytesIO(data))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._archive.close()
            self._out.close()
