"""Readers of dsm's shard formats that share no code with ``dsm.formats``, written from docs/formats.md.

Parquet and Arrow IPC files are read by pyarrow's own readers; JSONL by Python's ``json``, CSV by a small
RFC 4180 parser of its own (Python's ``csv`` cannot tell a quoted empty string from an empty field) and
WebDataset tars by ``tarfile`` as the ``webdataset`` library reads them (``r|*``, any compression). Rows
come back in the exact, hashable form of ``tests.formats.conformance.comparable_rows``, so they compare
with the rows of the table a dataset was made from.
"""

from __future__ import annotations

import base64
import calendar
import datetime
import io
import json
import re
import struct
import sys
import tarfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent / "formats"))
from conformance import _exact, comparable_rows

__all__ = ["comparable", "read_rows"]

_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
_ISO = re.compile(r"(-?\d{4,})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)?$")
_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def comparable(table: pa.Table) -> list[Any]:
    """The rows of ``table`` in the form :func:`read_rows` returns."""
    return comparable_rows(table)


def _decompressed(data: bytes, compression: str | None) -> bytes:
    if not compression:
        return data
    return bytes(pa.CompressedInputStream(pa.BufferReader(data), compression).read())


def read_rows(path: Path, fmt: str, schema: pa.Schema, options: dict[str, Any]) -> list[Any]:
    """The rows of one shard, decoded without dsm."""
    data = path.read_bytes()
    if fmt == "parquet":
        return comparable(pq.read_table(io.BytesIO(data)))
    if fmt == "arrow":
        return comparable(pa.ipc.open_file(pa.BufferReader(data)).read_all())
    if fmt == "jsonl":
        text = _decompressed(data, options.get("compression")).decode("utf-8")
        return [_json_row(line, schema) for line in text.split("\n") if line.strip()]
    if fmt == "csv":
        text = _decompressed(data, options.get("compression")).decode("utf-8-sig")
        return _csv_rows(text, schema, options)
    if fmt == "webdataset":
        return _tar_rows(data, schema)
    raise AssertionError(fmt)


# ------------------------------------------------------------------------------------------------ values


def _instant(text: str, unit: str) -> int:
    match = _ISO.match(text)
    assert match, text
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    moment = datetime.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    seconds = calendar.timegm(moment.timetuple())
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    per = _PER_SECOND[unit]
    sub = int((fraction or "0").ljust(9, "0")[:9]) * per // 10**9
    return seconds * per + sub


def _float(value: Any, kind: pa.DataType) -> float:
    number = _NON_FINITE.get(value, 0.0) if value in _NON_FINITE else float(value)
    if pa.types.is_float32(kind):
        number = struct.unpack("<f", struct.pack("<f", number))[0]
    return number


def _plain(kind: pa.DataType) -> pa.DataType:
    return kind.value_type if pa.types.is_dictionary(kind) else kind


def _json_value(value: Any, kind: pa.DataType) -> Any:
    kind = _plain(kind)
    if value is None:
        return None
    if pa.types.is_floating(kind):
        return _float(value, kind)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return base64.b64decode(value, validate=True)
    if pa.types.is_date(kind):
        return datetime.date.fromisoformat(value)
    if pa.types.is_timestamp(kind):
        return _instant(value, kind.unit)
    if pa.types.is_decimal(kind):
        return Decimal(str(value))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [_json_value(v, kind.value_type) for v in value]
    if pa.types.is_struct(kind):
        return {f.name: _json_value(value.get(f.name), f.type) for f in kind}
    if pa.types.is_map(kind):
        return [(_json_value(k, kind.key_type), _json_value(v, kind.item_type)) for k, v in value]
    return value


def _json_row(line: str, schema: pa.Schema) -> Any:
    record = json.loads(line)
    assert set(record) <= set(schema.names), line
    return _exact({f.name: _json_value(record.get(f.name), f.type) for f in schema})


def _csv_records(text: str, delimiter: str) -> list[list[tuple[str, bool]]]:
    """Records of ``(text, quoted)`` fields, by RFC 4180 (quotes doubled, newlines inside quotes)."""
    records: list[list[tuple[str, bool]]] = []
    fields: list[tuple[str, bool]] = []
    value, quoted, in_quotes, i = "", False, False, 0
    while i < len(text):
        ch = text[i]
        if in_quotes:
            if ch == '"' and text[i + 1 : i + 2] == '"':
                value, i = value + '"', i + 2
                continue
            if ch == '"':
                in_quotes = False
            else:
                value += ch
        elif ch == '"':
            in_quotes = quoted = True
        elif ch == delimiter:
            fields.append((value, quoted))
            value, quoted = "", False
        elif ch in "\r\n":
            if ch == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
            fields.append((value, quoted))
            records.append(fields)
            fields, value, quoted = [], "", False
        else:
            value += ch
        i += 1
    if value or quoted or fields:
        fields.append((value, quoted))
        records.append(fields)
    return records


def _csv_value(text: str, quoted: bool, kind: pa.DataType) -> Any:
    kind = _plain(kind)
    if not text and not quoted:
        return None
    if pa.types.is_boolean(kind):
        return {"true": True, "false": False}[text]
    if pa.types.is_integer(kind):
        return int(text)
    if pa.types.is_floating(kind):
        return _float({"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text), kind)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return base64.b64decode(text, validate=True)
    if pa.types.is_date(kind):
        return datetime.date.fromisoformat(text)
    if pa.types.is_timestamp(kind):
        return _instant(text, kind.unit)
    if pa.types.is_decimal(kind):
        return Decimal(text)
    return text


def _csv_rows(text: str, schema: pa.Schema, options: dict[str, Any]) -> list[Any]:
    records = _csv_records(text, options.get("delimiter", ","))
    if len(schema) > 1:
        records = [r for r in records if r != [("", False)]]  # blank lines are skipped, before a header too
    header = options.get("header", True)
    names = [name for name, _ in records[0]] if header and records else schema.names
    rows = []
    for record in records[1:] if header else records:
        fields = dict(zip(names, record, strict=True))
        rows.append(_exact({f.name: _csv_value(*fields[f.name], f.type) for f in schema}))
    return rows


def _tar_rows(data: bytes, schema: pa.Schema) -> list[Any]:
    """Samples as the ``webdataset`` library groups them: by the member name up to the first dot of its
    base name, consecutive members only."""
    rows: list[dict[str, Any]] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as archive:
        for member in archive:
            if not member.isreg():
                continue
            directory, _, base = member.name.rpartition("/")
            stem, _, extension = base.partition(".")
            key = f"{directory}/{stem}" if directory else stem
            if not rows or rows[-1]["__key__"] != key:
                rows.append({"__key__": key})
            handle = archive.extractfile(member)
            assert handle is not None
            rows[-1][extension.lower()] = handle.read()
    out = []
    for row in rows:
        values = {}
        for field in schema:
            value = row.get(field.name)
            if isinstance(value, bytes) and (
                pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
            ):
                value = value.decode("utf-8")
            values[field.name] = value
        out.append(_exact(values))
    return out
