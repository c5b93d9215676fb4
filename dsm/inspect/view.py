"""The view model of rows: plain, JSON-able data that the CLI, the terminal viewer and the web viewer render.

A :class:`RowPage` holds :class:`RowView` objects (where the row lives, and one :class:`CellView` per field).
A cell says what kind of value it is (``text``, ``messages``, ``image``, ``json``, ``reward``, ``masked``,
``scalar``...), carries the value itself where it is text, a scalar, parsed JSON or a chat's turns, a one-line
plain-text ``summary``, the ``details`` a renderer needs (lengths, media facts, shapes) and the ``anomalies``
found in it. Nothing here is rich text, and masked values never reach it: a masked cell holds ``***`` and the
value's length only.

>>> field = FieldView(name="text", type="string", role="text")
>>> cell_view(field, "two\\nlines").summary
'9 chars, 2 lines'
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dsm.contract import Field
from dsm.inspect.masking import MASK, MaskPolicy, masked_length
from dsm.inspect.media import kind_of, media_type_of_path, sniff
from dsm.inspect.roles import RL_ROLES, fold_json, json_shape, parse_messages

__all__ = [
    "CellView",
    "FieldView",
    "RowLocation",
    "RowPage",
    "RowView",
    "as_number",
    "cell_view",
    "column_values",
    "field_views",
    "plain",
    "row_views",
]

_PREVIEW_BYTES = 32


def as_number(value: Any) -> float | None:
    """A number cell of the view model back as a float (``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` are
    :func:`plain`'s non-finite floats); None for a null, a flag or anything that is not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    return None


def plain(value: Any) -> Any:
    """``value`` as JSON-able data: non-finite floats as ``"NaN"``/``"Infinity"``/``"-Infinity"``, times as
    ISO 8601 text, decimals as text, bytes as ``{"bytes": N, "hex": first bytes}``, maps as pairs."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds()}s"
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"bytes": len(data), "hex": data[:_PREVIEW_BYTES].hex()}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value)


def column_values(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values of a column; types Python cannot hold exactly (nanosecond times) become their text."""
    try:
        return list(column.to_pylist())
    except (ValueError, OverflowError, pa.ArrowException):
        pass
    out: list[Any] = []
    for value in column:
        try:
            out.append(value.as_py())
        except (ValueError, OverflowError, pa.ArrowException):
            out.append(str(value))
    return out


# --------------------------------------------------------------------------------------------- models


@dataclass(frozen=True, kw_only=True)
class FieldView:
    """A field as a viewer shows it: its type and annotations, and whether its values are masked."""

    name: str
    type: str
    nullable: bool = True
    role: str | None = None
    media_type: str | None = None
    classification: str | None = None
    masked: bool = False
    key: bool = False
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "nullable": self.nullable,
            "role": self.role,
            "media_type": self.media_type,
            "classification": self.classification,
            "masked": self.masked,
            "key": self.key,
            "description": self.description,
        }


def field_views(
    fields: Sequence[Field], policy: MaskPolicy, key: Sequence[str] = ()
) -> tuple[FieldView, ...]:
    return tuple(
        FieldView(
            name=f.name,
            type=f.type,
            nullable=f.nullable,
            role=f.role,
            media_type=f.media_type,
            classification=f.classification,
            masked=policy.is_masked(f.name),
            key=f.name in key,
            description=f.description,
        )
        for f in fields
    )


@dataclass(frozen=True, kw_only=True)
class RowLocation:
    """Where one row lives, precisely enough for a bug report to name it.

    ``position`` is the row's 0-based place in the dataset (shards in contract order); ``row`` its place in
    its shard; ``piece`` the row group (Parquet), record batch (Arrow), block of lines (JSONL, CSV) or sample
    (WebDataset) that holds it, and ``piece_row`` its place there. Line formats also give the row's 1-based
    ``line`` and the ``byte_offset`` where it starts (of the decompressed stream when the shard is
    compressed); other formats give the byte offset of the piece.
    """

    position: int
    shard: str
    shard_index: int
    row: int
    piece_kind: str
    piece: int
    piece_row: int
    line: int | None = None
    byte_offset: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "shard": self.shard,
            "shard_index": self.shard_index,
            "row": self.row,
            "piece_kind": self.piece_kind,
            "piece": self.piece,
            "piece_row": self.piece_row,
            "line": self.line,
            "byte_offset": self.byte_offset,
        }

    def describe(self) -> str:
        """``shard part-00003.parquet, row group 2 (row 17 of it), row 33,041 of the shard``."""
        kind = {
            "row_group": "row group",
            "record_batch": "record batch",
            "lines": "block",
            "sample": "sample",
        }
        where = f"shard {self.shard}"
        if self.line is not None:
            where += f", line {self.line:,}"
        if self.piece_kind in kind:
            where += f", {kind[self.piece_kind]} {self.piece:,} (row {self.piece_row:,} of it)"
        return where + f", row {self.row:,} of the shard"


@dataclass(frozen=True, kw_only=True)
class CellView:
    """One value of one row, ready to render. ``value`` is JSON-able (see :func:`plain`) or None."""

    field: str
    kind: str
    value: Any = None
    summary: str = ""
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    anomalies: tuple[str, ...] = ()
    role: str | None = None
    masked: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "role": self.role,
            "value": self.value,
            "summary": self.summary,
            "details": dict(self.details),
            "anomalies": list(self.anomalies),
            "masked": self.masked,
        }


@dataclass(frozen=True, kw_only=True)
class RowView:
    """One row: where it lives and its cells, in field order."""

    position: int
    location: RowLocation
    cells: tuple[CellView, ...]

    def cell(self, name: str) -> CellView:
        for cell in self.cells:
            if cell.field == name:
                return cell
        raise KeyError(name)

    @property
    def anomalies(self) -> list[str]:
        return [f"{c.field}: {a}" for c in self.cells for a in c.anomalies]

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "location": self.location.to_dict(),
            "cells": {c.field: c.to_dict() for c in self.cells},
        }


@dataclass(frozen=True, kw_only=True)
class RowPage:
    """Rows of one dataset as a viewer shows them, with the fields, the episodes they belong to (RL data)
    and which fields are masked. ``selection`` says how the rows were chosen (``head``, ``sample``...)."""

    dataset: str
    total_rows: int
    selection: Mapping[str, Any]
    fields: tuple[FieldView, ...]
    rows: tuple[RowView, ...]
    episodes: tuple[Any, ...] = ()
    masked: tuple[str, ...] = ()
    unmasked: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "total_rows": self.total_rows,
            "selection": dict(self.selection),
            "fields": [f.to_dict() for f in self.fields],
            "rows": [r.to_dict() for r in self.rows],
            "episodes": [e.to_dict() for e in self.episodes],
            "masked": list(self.masked),
            "unmasked": list(self.unmasked),
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------------- cells


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _masked(field: FieldView, value: Any) -> CellView:
    length = masked_length(value)
    unit = (
        "bytes"
        if isinstance(value, (bytes, bytearray))
        else ("items" if isinstance(value, list) else "chars")
    )
    summary = MASK if length is None else f"{MASK} ({length:,} {unit})"
    return CellView(
        field=field.name,
        kind="masked",
        value=MASK,
        summary=summary,
        details={
            "length": length,
            "unit": unit if length is not None else None,
            "classification": field.classification,
        },
        role=field.role,
        masked=True,
    )


def _text(field: FieldView, value: Any) -> CellView:
    anomalies: list[str] = []
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            value = bytes(value).decode("utf-8", errors="replace")
            anomalies.append(f"not valid UTF-8 ({exc.reason} at byte {exc.start})")
    text = str(value)
    lines = text.count("\n") + 1 if text else 0
    if not text.strip():
        anomalies.append("empty text" if not text else "only whitespace")
    details = {"chars": len(text), "lines": lines, "bytes": len(text.encode("utf-8", errors="replace"))}
    return CellView(
        field=field.name,
        kind="text",
        value=text,
        summary=f"{_plural(len(text), 'char')}, {_plural(lines, 'line')}",
        details=details,
        anomalies=tuple(anomalies),
        role=field.role,
    )


def _messages(field: FieldView, value: Any) -> CellView:
    turns, anomalies = parse_messages(value)
    roles = [t["role"] or "?" for t in turns]
    shown = ", ".join(roles[:6]) + (f", ... ({len(roles) - 6} more)" if len(roles) > 6 else "")
    return CellView(
        field=field.name,
        kind="messages",
        value=turns,
        summary=f"{_plural(len(turns), 'turn')}" + (f": {shown}" if turns else ""),
        details={"turns": len(turns), "roles": roles},
        anomalies=tuple(anomalies),
        role=field.role,
    )


def _media(field: FieldView, value: Any, kind: str | None) -> CellView:
    if isinstance(value, str):
        media_type = field.media_type or media_type_of_path(value)
        return CellView(
            field=field.name,
            kind=kind_of(media_type) or kind or "media",
            value=value,
            summary=f"path {value}" + (f" ({media_type})" if media_type else ""),
            details={"path": value, "media_type": media_type},
            role=field.role,
        )
    data = bytes(value)
    info = sniff(data, declared=field.media_type)
    anomalies = list(info.anomalies)
    found = info.kind
    if kind is not None and found is not None and found != kind:
        anomalies.append(f"the field's role is {kind}, but the bytes are {info.media_type}")
    return CellView(
        field=field.name,
        kind=kind or found or "binary",
        summary=info.describe(),
        details=info.to_dict(),
        anomalies=tuple(anomalies),
        role=field.role,
    )


def _json(field: FieldView, value: Any) -> CellView:
    anomalies: list[str] = []
    parsed = value
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            return CellView(
                field=field.name,
                kind="json",
                value=value,
                summary=f"not valid JSON ({_plural(len(value), 'char')})",
                details={"valid": False},
                anomalies=(f"not valid JSON ({exc.msg} at position {exc.pos})",),
                role=field.role,
            )
    kind, depth = json_shape(parsed)
    return CellView(
        field=field.name,
        kind="json",
        value=plain(parsed),
        summary=f"{kind}, depth {depth}",
        details={"valid": True, "depth": depth, "folded": plain(fold_json(parsed))},
        anomalies=tuple(anomalies),
        role=field.role,
    )


def _numbers(values: list[Any]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, (int, float)):
            out.append(float(v))
    return out


def _leaves(value: Any, limit: int = 100_000) -> Iterator[Any]:
    """The non-list values of a nested list, depth first (at most ``limit``)."""
    stack = [iter(value)]
    count = 0
    while stack and count < limit:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, list):
            stack.append(iter(item))
        else:
            count += 1
            yield item


_END = object()


def _shape(value: Any) -> list[int]:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def _rl(field: FieldView, value: Any) -> CellView:
    role = field.role or ""
    anomalies: list[str] = []
    details: dict[str, Any] = {}
    if isinstance(value, list) and role in ("reward", "done", "terminated", "truncated", "step"):
        # One row per episode: the column holds the episode's steps.
        if role == "reward":
            numbers = _numbers(value)
            nans = [i for i, v in enumerate(value) if isinstance(v, float) and math.isnan(v)]
            total = sum(numbers)
            details = {"steps": len(value), "return": plain(total), "nan_steps": nans[:20]}
            summary = f"{_plural(len(value), 'reward')}, return {plain(total)}"
            if nans:
                anomalies.append(
                    f"reward is NaN at step {nans[0]}"
                    + (f" and {len(nans) - 1} more" if len(nans) > 1 else "")
                )
        elif role == "step":
            details = {"steps": len(value)}
            summary = f"{_plural(len(value), 'step')}"
        else:
            fired = [i for i, v in enumerate(value) if v]
            details = {"steps": len(value), "fires_at": fired[:20]}
            summary = (
                f"{role} at step {fired[0]} of {len(value)}"
                if fired
                else f"{role} never true in {len(value)} steps"
            )
        return CellView(
            field=field.name,
            kind=role,
            value=plain(value),
            summary=summary,
            details=details,
            anomalies=tuple(anomalies),
            role=role,
        )
    if role == "reward" and isinstance(value, float) and math.isnan(value):
        anomalies.append("reward is NaN")
    if isinstance(value, (bytes, bytearray)):
        # An observation (or action) stored as bytes is usually a frame: its media facts, as for images.
        info = sniff(bytes(value), declared=field.media_type)
        return CellView(
            field=field.name,
            kind=role or "binary",
            summary=info.describe(),
            details=info.to_dict(),
            anomalies=tuple(info.anomalies),
            role=role or None,
        )
    if isinstance(value, list):
        shape = _shape(value)
        numbers = [n for n in _numbers(list(_leaves(value))) if not math.isnan(n)]
        details = {"shape": shape}
        summary = "array[" + "x".join(str(s) for s in shape) + "]"
        if numbers:
            details |= {"min": plain(min(numbers)), "max": plain(max(numbers))}
            summary += f" min {plain(min(numbers))} max {plain(max(numbers))}"
    else:
        summary = str(plain(value))
    return CellView(
        field=field.name,
        kind=role or "scalar",
        value=plain(value),
        summary=summary,
        details=details,
        anomalies=tuple(anomalies),
        role=role or None,
    )


def _by_type(field: FieldView, value: Any) -> CellView:
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
        info = sniff(data)
        details = info.to_dict() | {"hex": data[:_PREVIEW_BYTES].hex()}
        return CellView(
            field=field.name,
            kind=info.kind or "binary",
            summary=info.describe() if info.media_type else f"{_plural(len(data), 'byte')}",
            details=details,
            role=field.role,
        )
    if isinstance(value, str):
        if len(value) > 80 or "\n" in value:
            return _text(field, value)
        return CellView(field=field.name, kind="scalar", value=value, summary=value, role=field.role)
    if isinstance(value, list):
        return CellView(
            field=field.name,
            kind="list",
            value=plain(value),
            summary=f"list of {_plural(len(value), 'item')}",
            details={"items": len(value)},
            role=field.role,
        )
    if isinstance(value, Mapping):
        return CellView(
            field=field.name,
            kind="struct",
            value=plain(value),
            summary=f"{_plural(len(value), 'field')}",
            role=field.role,
        )
    shown = plain(value)
    return CellView(field=field.name, kind="scalar", value=shown, summary=str(shown), role=field.role)


_ROLE_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str, bytes, bytearray),
    "messages": (list, str, dict),
    "image": (bytes, bytearray, str),
    "audio": (bytes, bytearray, str),
    "video": (bytes, bytearray, str),
}
"""What values a role can render; others are shown by their type, with an anomaly naming the mismatch."""


def cell_view(field: FieldView, value: Any) -> CellView:
    """The cell of ``value`` in ``field``, by the field's role (masked first, whatever the role)."""
    if field.masked:
        return _masked(field, value)
    if value is None:
        return CellView(field=field.name, kind="null", summary="null", role=field.role)
    role = field.role
    fits = _ROLE_TYPES.get(role or "")
    if fits is not None and not isinstance(value, fits):
        cell = _by_type(field, value)
        expected = " or ".join(t.__name__ for t in fits)
        problem = f"role {role} expects {expected} values, got {type(value).__name__}"
        return dataclasses.replace(cell, anomalies=(*cell.anomalies, problem))
    if role == "text":
        return _text(field, value)
    if role == "messages":
        return _messages(field, value)
    if role in ("image", "audio", "video"):
        return _media(field, value, role)
    if role == "json":
        return _json(field, value)
    if role in RL_ROLES:
        return _rl(field, value)
    if isinstance(value, (bytes, bytearray)) and field.media_type:
        return _media(field, value, kind_of(field.media_type))
    return _by_type(field, value)


def row_views(
    table: pa.Table, locations: Sequence[RowLocation], fields: Sequence[FieldView]
) -> tuple[RowView, ...]:
    """One :class:`RowView` per row of ``table`` (whose columns are some of ``fields``)."""
    by_name = {f.name: f for f in fields}
    columns = [(by_name[name], column_values(table.column(name))) for name in table.column_names]
    rows = []
    for index, location in enumerate(locations):
        cells = tuple(cell_view(f, values[index]) for f, values in columns)
        rows.append(RowView(position=location.position, location=location, cells=cells))
    return tuple(rows)
