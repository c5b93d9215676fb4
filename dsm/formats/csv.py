"""CSV: flat rows of text, parsed with the contract's schema through pyarrow's streaming CSV reader.

Null is an empty unquoted field; the empty string is ``""`` (strings are always quoted when written), so
both round-trip. Binary values are base64 text. Nested types cannot be stored.

>>> from dsm.formats.csv import CsvFormat
>>> CsvFormat(delimiter="\\t").options()["delimiter"]
'\\t'
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from dsm.errors import FormatError, InputError, SchemaError
from dsm.formats._common import (
    PositionTrackingSink,
    RowProblem,
    b64decode_array,
    b64encode_array,
    check_batch_schema,
    check_stream_codec,
    check_text_timestamps,
    checked_ahead,
    describe_exception,
    encode_dictionary,
    is_binary_like,
    is_codec_error,
    is_string_like,
    open_input_stream,
    open_output_stream,
    project_schema,
    read_span,
    slice_batches,
)
from dsm.formats._lines import (
    LineIndexBuilder,
    csv_records,
    record_starts,
    whole_records,
)
from dsm.formats._quotes import (
    CheckedText,
    MisplacedQuote,
    QuoteCheck,
    TextBytes,
    first_invalid_utf8,
    line_of,
)
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter
from dsm.formats.index import ShardIndex

__all__ = ["CsvFormat"]

_BLOCK_BYTES = 4 * 1024 * 1024
_INFER_BYTES = 1024 * 1024
_MAX_RECORD_BYTES = 1024 * 1024 * 1024
_COLUMN_COUNT = re.compile(r"Expected (\d+) columns, got (\d+)")
_CONVERSION = re.compile(r"In CSV column #(\d+): .*conversion error to ([^:]+): invalid value '(.*)'", re.S)
_INVALID_UTF8 = re.compile(r"In CSV column #(\d+): .*invalid UTF8 data")


def _allow_large_fields() -> None:
    """Values may be as large as the file: raise the csv module's field limit (process-wide, only ever
    raised) before any record is read with it, the first record of a file without a header included."""
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))


def _is_flat(type_: pa.DataType) -> bool:
    return bool(
        pa.types.is_null(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_integer(type_)
        or pa.types.is_float32(type_)
        or pa.types.is_float64(type_)
        or is_string_like(type_)
        or is_binary_like(type_)
        or pa.types.is_date32(type_)
        or pa.types.is_timestamp(type_)
        or pa.types.is_decimal(type_)
    )


def _text_type(type_: pa.DataType) -> pa.DataType:
    """The column type of the CSV text: binary values are base64 strings."""
    if pa.types.is_dictionary(type_):
        return _text_type(type_.value_type)  # parsed as values, encoded after
    if pa.types.is_string_view(type_):
        return pa.string()
    if pa.types.is_binary_view(type_):
        return pa.binary()
    if is_binary_like(type_):
        return pa.large_string() if pa.types.is_large_binary(type_) else pa.string()
    if pa.types.is_decimal256(type_):
        return pa.string()  # Arrow's CSV reader has no decimal256 converter: parsed by a cast
    if pa.types.is_decimal32(type_) or pa.types.is_decimal64(type_):
        return pa.decimal128(type_.precision, type_.scale)  # nor decimal32/64 ones: read wide, cast exactly
    return type_


def _write_type(type_: pa.DataType) -> pa.DataType:
    """The type handed to Arrow's CSV writer: tz-aware timestamps in UTC (written with ``Z``).

    Arrow writes other zones as local time with a ``+hhmm`` offset, which loses historical offsets that
    have seconds (Asia/Kolkata before 1906 is +05:53:20).
    """
    if pa.types.is_timestamp(type_) and type_.tz is not None:
        return pa.timestamp(type_.unit, "UTC")
    return _text_type(type_)


class CsvFormat(Format):
    """CSV with a header row (or ``header=False``: columns in schema order), optionally compressed. It
    holds null, bool, integers, float32/float64 (``nan``, ``inf``, ``-inf``), string and large_string,
    binary (base64), date32, timestamps (any unit and time zone), decimals.
    """

    name: ClassVar[str] = "csv"
    extensions: ClassVar[tuple[str, ...]] = (".csv", ".csv.gz")
    self_describing: ClassVar[bool] = False
    index_by_scan: ClassVar[bool] = True
    plain_values: ClassVar[bool] = True

    def __init__(self, *, delimiter: str = ",", header: bool = True, compression: str | None = None) -> None:
        if len(delimiter) != 1 or delimiter in ('"', "\n", "\r"):
            raise InputError(
                f"csv delimiter must be one character other than a quote or newline, got {delimiter!r}"
            )
        self.delimiter = delimiter
        self.header = bool(header)
        self.compression = check_stream_codec(compression)

    def options(self) -> dict[str, Any]:
        return {"delimiter": self.delimiter, "header": self.header, "compression": self.compression}

    def stored_type(self, type_: pa.DataType) -> pa.DataType:
        """Flat scalar types as they are; a dictionary as its values, a string or binary view as a string
        or binary (text has neither). Nested types cannot be stored."""
        if pa.types.is_dictionary(type_):
            return self.stored_type(type_.value_type)
        if pa.types.is_string_view(type_):
            return pa.string()
        if pa.types.is_binary_view(type_):
            return pa.binary()
        if not _is_flat(type_):
            raise SchemaError(f"type {type_} cannot be stored in CSV (only flat scalar types)")
        return type_

    # ------------------------------------------------------------------------------------------ reading

    def _read_options(self, names: Sequence[str] | None, block: int) -> pcsv.ReadOptions:
        return pcsv.ReadOptions(
            use_threads=True, block_size=block, column_names=None if self.header else list(names or [])
        )

    def _parse_options(self, columns: int = 0) -> pcsv.ParseOptions:
        # With one column an empty line is a row holding null, not a blank line to skip.
        return pcsv.ParseOptions(
            delimiter=self.delimiter, newlines_in_values=True, ignore_empty_lines=columns != 1
        )

    def _convert_options(
        self, types: dict[str, pa.DataType] | None, include: Sequence[str] | None
    ) -> pcsv.ConvertOptions:
        return pcsv.ConvertOptions(
            column_types=types or {},
            include_columns=list(include or []),
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            null_values=[""],
            true_values=["true", "True", "TRUE"],  # pandas writes True and False
            false_values=["false", "False", "FALSE"],
        )

    def _first_record(self, file: IO[bytes], shard: str) -> list[str] | None:
        """The first CSV record of the file (the header when there is one); None for an empty file."""
        return (self._first_record_at(file, shard) or (0, None))[1]

    def _first_record_at(self, file: IO[bytes], shard: str) -> tuple[int, list[str]] | None:
        """The line the first record starts on (after any blank lines) and the record, None for an empty
        file. The quotes of the text read for it are checked first: Python's csv reads them its own way."""
        file.seek(0)
        try:
            head = bytes(open_input_stream(file, self.compression).read(_INFER_BYTES))
        except (pa.ArrowException, OSError) as exc:
            if not is_codec_error(exc, self.compression):
                raise
            raise FormatError(
                f"shard {shard}: not readable as {self.compression}-compressed data ({exc})"
            ) from None
        if not head:
            return None
        try:
            QuoteCheck(delimiter=ord(self.delimiter)).feed(head)
        except MisplacedQuote as exc:
            raise self._misplaced(file, shard, exc) from None
        file.seek(0)
        text = head.decode("utf-8-sig", errors="replace")  # a byte-order mark is not a name
        _allow_large_fields()
        # a blank line is an empty record to csv: the first record's line is one past them
        for blank, record in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter=self.delimiter)):
            if record:
                return blank + 1, record
        return None

    def read_schema(self, file: IO[bytes], *, shard: str) -> pa.Schema:
        """Column names from the header (or ``f0``, ``f1``...), types inferred by pyarrow from ~1 MiB."""
        first = self._first_record(file, shard)
        if first is None:
            return pa.schema([])
        names = first if self.header else [f"f{i}" for i in range(len(first))]
        try:
            reader = pcsv.open_csv(
                self._checked_text(file),
                read_options=self._read_options(names, _INFER_BYTES),
                parse_options=self._parse_options(),
                convert_options=self._convert_options(None, None),
            )
            return reader.schema
        except MisplacedQuote as exc:
            raise self._misplaced(file, shard, exc) from None
        except pa.ArrowException as exc:
            raise self._locate(file, pa.schema([(n, pa.string()) for n in names]), shard, exc) from None

    def _check_header(self, file: IO[bytes], schema: pa.Schema, shard: str) -> bool:
        """False for an empty file; raises SchemaError when the header and the schema differ."""
        found = self._first_record_at(file, shard)
        if found is None or not self.header:
            return found is not None
        line, first = found
        missing = [name for name in schema.names if name not in first]
        extra = [name for name in first if name not in schema.names]
        if missing or extra or len(set(first)) != len(first):
            parts = [f'no column "{name}"' for name in missing] + [
                f'column "{name}" is not in the schema' for name in extra
            ]
            parts += ["duplicate column names"] if len(set(first)) != len(first) else []
            raise SchemaError(f"shard {shard} line {line}: header {first}: {'; '.join(parts)}")
        return True

    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Rows parsed with ``schema`` (or the inferred one); errors name the 1-based line and field."""
        if schema is None:
            schema = self.read_schema(file, shard=shard)
        reasons = self.unsupported(schema)
        if reasons:
            raise SchemaError(f"shard {shard}: " + "; ".join(reasons))
        target = project_schema(schema, columns, shard=shard)
        if not self._check_header(file, schema, shard):
            return
        try:
            for batch in self._read_records(file, schema, target, shard):
                yield from slice_batches(batch, batch_rows)
        except MisplacedQuote as exc:
            raise self._misplaced(file, shard, exc) from None
        except (pa.ArrowException, OSError) as exc:
            raise self._error(file, schema, shard, exc) from None

    def _read_records(
        self, file: IO[bytes], schema: pa.Schema, target: pa.Schema, shard: str
    ) -> Iterator[pa.RecordBatch]:
        """Converted batches of the file's rows, parsed a chunk of whole records at a time.

        pyarrow's parser is handed one block holding whole records, never a record a block boundary cuts:
        its streaming reader has read a value longer than a block short (a 20 MiB value as its first
        16 MiB, at random) and drops the ``\\n`` of a quoted ``\\r\\n`` split by a block boundary. The
        record scan that cuts the chunks counts the same records pyarrow does: the quotes were checked.
        """
        types = {field.name: _text_type(field.type) for field in schema}
        names = (self._first_record(file, shard) or []) if self.header else list(schema.names)
        parse, convert = self._parse_options(len(schema)), self._convert_options(types, target.names)

        def parsed(chunk: bytes) -> pa.Table:
            # One block: every record of the chunk is whole in it.
            read = pcsv.ReadOptions(use_threads=True, column_names=names, block_size=len(chunk) + 1)
            return pcsv.read_csv(pa.py_buffer(chunk), read, parse, convert)

        rows_before = 0
        for table in checked_ahead(self._rows_text(file, shard, keep_blank=len(schema) == 1), parsed):
            for batch in table.to_batches():
                yield self._finish(batch, target, shard, file, rows_before, len(schema))
                rows_before += batch.num_rows

    def _rows_text(self, file: IO[bytes], shard: str, *, keep_blank: bool) -> Iterator[bytes]:
        """:meth:`_record_chunks` without the header record. Each is parsed while the next is read
        (:func:`checked_ahead`)."""
        header = self.header
        for chunk in self._record_chunks(file, shard):
            if header:  # the first records: the header, after any blank lines
                starts, _ = record_starts(chunk, keep_blank=keep_blank)
                if not len(starts):
                    continue
                chunk, header = chunk[int(starts[1]) :] if len(starts) > 1 else b"", False
            if chunk:
                yield chunk

    def _record_chunks(self, file: IO[bytes], shard: str) -> Iterator[bytes]:
        """The file's (decompressed) text in chunks of whole records, about :data:`_BLOCK_BYTES` each, its
        quotes checked as it is read: what the parser and the row index both take."""
        stream = self._checked_text(file)
        pending, consumed = b"", 0
        while True:
            data = stream.read(_BLOCK_BYTES)
            buffer = pending + data if pending else data
            cut = whole_records(buffer) if data else len(buffer)
            if data and not cut:  # no record ends in it yet: a record longer than what was read so far
                if len(buffer) > _MAX_RECORD_BYTES:
                    raise FormatError(
                        f"shard {shard} line {self._line_at(file, consumed)}: a record longer than "
                        f"{_MAX_RECORD_BYTES >> 20} MiB"
                    )
                pending = buffer
                continue
            chunk, pending = buffer[:cut], buffer[cut:]
            consumed += cut
            if chunk:
                yield chunk
            if not data:
                return

    def _checked_text(self, file: IO[bytes]) -> CheckedText:
        """The file's (decompressed) text from its start, its quotes checked as pyarrow reads it."""
        file.seek(0)
        return CheckedText(
            open_input_stream(file, self.compression), QuoteCheck(delimiter=ord(self.delimiter))
        )

    def _misplaced(self, file: IO[bytes], shard: str, exc: MisplacedQuote) -> FormatError:
        """The error for a misplaced quote, naming its line (found by reading the text up to it) and the line
        where the quoted value it closes was opened, when that is another."""
        line = self._line_at(file, exc.offset)
        opened = self._line_at(file, exc.opened) if exc.opened is not None else line
        where = f"line {line}" if opened == line else f"line {line} (a quoted value opened on line {opened})"
        return FormatError(f"shard {shard} {where}: {exc.reason}")

    def _first_invalid_utf8(self, file: IO[bytes]) -> int | None:
        file.seek(0)
        return first_invalid_utf8(open_input_stream(file, self.compression))

    def _line_at(self, file: IO[bytes], offset: int) -> int:
        file.seek(0)
        return line_of(open_input_stream(file, self.compression), offset)

    def _error(self, file: IO[bytes], schema: pa.Schema, shard: str, exc: Exception) -> Exception:
        """The dsm error for a failure while reading (a storage error is returned unchanged)."""
        if isinstance(exc, pa.ArrowException):
            return self._locate(file, schema, shard, exc)
        if is_codec_error(exc, self.compression):
            return FormatError(f"shard {shard}: not readable as {self.compression}-compressed data ({exc})")
        return exc

    def _finish(
        self,
        batch: pa.RecordBatch,
        target: pa.Schema,
        shard: str,
        file: IO[bytes],
        rows_before: int,
        file_columns: int,
    ) -> pa.RecordBatch:
        """The batch with binary decoded, casts done and nullability checked; errors name the line."""
        arrays = []
        for field in target:
            array = batch.column(field.name)
            if is_binary_like(field.type):
                try:
                    array = b64decode_array(array, field.type)
                except RowProblem as problem:
                    line = self._line_of_row(file, rows_before + problem.row, file_columns)
                    raise FormatError(
                        f'shard {shard} line {line} field "{field.name}": {problem.message}'
                    ) from None
            elif not array.type.equals(field.type):
                array = self._cast(array, field, shard, file, rows_before, file_columns)
            if not field.nullable and array.null_count:
                first_null = next(i for i, valid in enumerate(array.is_valid().to_pylist()) if not valid)
                line = self._line_of_row(file, rows_before + first_null, file_columns)
                raise FormatError(
                    f'shard {shard} line {line} field "{field.name}": null, but the field is not nullable'
                )
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=target)

    def _cast(
        self,
        array: pa.Array,
        field: pa.Field,
        shard: str,
        file: IO[bytes],
        rows_before: int,
        file_columns: int,
    ) -> pa.Array:
        target = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        try:
            values = array.cast(target, safe=True)
            return encode_dictionary(values, field.type) if pa.types.is_dictionary(field.type) else values
        except (pa.ArrowException, ValueError):
            pass
        for row, value in enumerate(array.to_pylist()):
            try:
                pa.array([value], type=array.type).cast(target, safe=True)
            except (pa.ArrowException, ValueError):
                line = self._line_of_row(file, rows_before + row, file_columns)
                raise FormatError(
                    f'shard {shard} line {line} field "{field.name}": expected {field.type}, got "{value}"'
                ) from None
        raise FormatError(f'shard {shard} field "{field.name}": cannot be read as {field.type}')

    # ------------------------------------------------------------------------------------ error path

    def _records(self, file: IO[bytes], columns: int = 0) -> Iterator[tuple[int, list[str]]]:
        """``(line where it starts, fields)`` of each data record, by Python's csv module (error path)."""
        file.seek(0)
        raw = open_input_stream(file, self.compression)
        buffered = io.BufferedReader(TextBytes(raw))
        text = io.TextIOWrapper(buffered, encoding="utf-8-sig", errors="replace", newline="")
        _allow_large_fields()
        reader = csv.reader(text, delimiter=self.delimiter)
        skip_header = self.header
        while True:
            start = reader.line_num + 1
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error:
                return
            if not record and columns != 1:
                continue
            if skip_header:
                skip_header = False
                continue
            yield start, record

    def _line_of_row(self, file: IO[bytes], row: int, columns: int) -> int | str:
        for index, (line, _) in enumerate(self._records(file, columns)):
            if index == row:
                return line
        return f"? (row {row + 1})"

    def _locate(self, file: IO[bytes], schema: pa.Schema, shard: str, exc: BaseException) -> FormatError:
        message = str(exc)
        utf8 = _INVALID_UTF8.search(message)
        if utf8:
            column = int(utf8.group(1))
            names = (self._first_record(file, shard) or []) if self.header else list(schema.names)
            field = names[column] if column < len(names) else f"#{column}"
            offset = self._first_invalid_utf8(file)
            where = f" line {self._line_at(file, offset)}" if offset is not None else ""
            return FormatError(f'shard {shard}{where} field "{field}": the text is not valid UTF-8')
        count = _COLUMN_COUNT.search(message)
        if count:
            expected = int(count.group(1))
            for line, record in self._records(file):
                if len(record) != expected:
                    return FormatError(
                        f"shard {shard} line {line}: expected {expected} columns, got {len(record)}"
                    )
        conversion = _CONVERSION.search(message)
        if conversion:
            column, type_name, value = int(conversion.group(1)), conversion.group(2), conversion.group(3)
            names = list(schema.names)
            for line, record in self._records(file):
                if column < len(record) and record[column] == value:
                    field = names[column] if column < len(names) else f"#{column}"
                    return FormatError(
                        f'shard {shard} line {line} field "{field}": expected {type_name}, got "{value}"'
                    )
        return FormatError(f"shard {shard}: not readable as CSV ({describe_exception(exc)})")

    # ------------------------------------------------------------------------------------ random access

    def index_shard(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> ShardIndex:
        """Blocks of whole records found by one pass over the file: a newline ends a record outside quotes
        (nothing is parsed). The header's column names are kept, in the file's order."""
        first = self._first_record(file, shard)
        keep_blank = first is not None and len(first) == 1
        builder = LineIndexBuilder()
        line, header = 1, self.header
        try:
            for chunk in self._record_chunks(file, shard):
                starts, lines, breaks = csv_records(chunk, keep_blank=keep_blank)
                if header and len(starts):
                    starts, lines, header = starts[1:], lines[1:], False
                builder.add(len(chunk), starts, lines, line)
                line += breaks
        except MisplacedQuote as exc:
            raise self._misplaced(file, shard, exc) from None
        except (pa.ArrowException, OSError) as exc:
            if not is_codec_error(exc, self.compression):
                raise
            raise FormatError(f"shard {shard}: not readable as {self.compression}-compressed data") from None
        columns = first if self.header else None
        return builder.finish(
            format=self.name, info={"compressed": self.compression is not None, "columns": columns}
        )

    def _span(
        self, file: IO[bytes], index: ShardIndex, start: int, stop: int, shard: str
    ) -> tuple[bytes, np.ndarray, np.ndarray, int, int]:
        first, last = index.piece_of(start), index.piece_of(stop - 1)
        span = index.span(first, last)
        if span is None or index.lines is None:
            raise FormatError(f"shard {shard}: the row index has no byte offsets; rebuild it")
        try:
            data = read_span(file, span[0], span[1], self.compression)
        except FormatError as exc:
            raise FormatError(f"shard {shard}: {exc}") from None
        columns = index.info.get("columns")
        keep_blank = columns is not None and len(columns) == 1
        starts, lines = record_starts(data, keep_blank=keep_blank)
        if stop - int(index.starts[first]) > len(starts):
            raise FormatError(f"shard {shard}: the row index does not match the file; it changed, rebuild it")
        return data, starts, lines, int(index.starts[first]), int(index.lines[first])

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
        """Only the records of rows ``start`` up to ``stop`` are parsed."""
        index.check_range(start, stop, shard=shard)
        if start == stop:
            return
        if schema is None:
            file.seek(0)
            schema = self.read_schema(file, shard=shard)
        target = project_schema(schema, columns, shard=shard)
        data, starts, _, first_row, _ = self._span(file, index, start, stop, shard)
        lo, hi = start - first_row, stop - first_row
        end = int(starts[hi]) if hi < len(starts) else len(data)
        in_file = index.info.get("columns") or schema.names
        missing = [name for name in in_file if schema.get_field_index(name) < 0]
        if missing:
            raise SchemaError(f'shard {shard}: column "{missing[0]}" of the header is not in the schema')
        file_schema = pa.schema([schema.field(name) for name in in_file])
        records = CsvFormat(delimiter=self.delimiter, header=False)
        yield from records.iter_batches(
            io.BytesIO(data[int(starts[lo]) : end]),
            shard=shard,
            schema=file_schema,
            columns=target.names,
            batch_rows=batch_rows,
        )

    def row_lines(
        self, file: IO[bytes], index: ShardIndex, *, shard: str, start: int, stop: int
    ) -> list[tuple[int, int]] | None:
        index.check_range(start, stop, shard=shard)
        if start == stop:
            return []
        _, starts, lines, first_row, first_line = self._span(file, index, start, stop, shard)
        base = int(index.offsets[index.piece_of(start)])
        return [
            (first_line + int(lines[i]), base + int(starts[i]))
            for i in range(start - first_row, stop - first_row)
        ]

    # ------------------------------------------------------------------------------------------ writing

    def _open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        return _CsvWriter(file, schema, self)


class _CsvWriter(FormatWriter):
    def __init__(self, file: IO[bytes], schema: pa.Schema, fmt: CsvFormat) -> None:
        self._schema = schema
        self._text_schema = pa.schema([pa.field(f.name, _write_type(f.type), f.nullable) for f in schema])
        self._sink = PositionTrackingSink(file)
        self._out = open_output_stream(self._sink, fmt.compression)
        native = isinstance(self._out, pa.NativeFile)
        self._stream = self._out if native else pa.PythonFile(self._out, mode="w")
        options = pcsv.WriteOptions(
            include_header=fmt.header, delimiter=fmt.delimiter, quoting_style="needed"
        )
        self._writer = pcsv.CSVWriter(self._stream, self._text_schema, write_options=options)
        self._closed = False

    def write_batch(self, batch: pa.RecordBatch) -> None:
        check_batch_schema(batch, self._schema, what="csv writer")
        for field, column in zip(batch.schema, batch.columns, strict=True):
            if pa.types.is_timestamp(field.type):
                try:
                    check_text_timestamps(column)
                except SchemaError as exc:
                    raise SchemaError(f'field "{field.name}": {exc}') from None
        arrays = [
            b64encode_array(column) if is_binary_like(column.type) else column.cast(field.type)
            for column, field in zip(batch.columns, self._text_schema, strict=True)
        ]
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._text_schema))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()
            self._stream.close()
