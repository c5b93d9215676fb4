"""Arrow type names, both ways: ``str(pa.timestamp("us", "UTC"))`` <-> ``"timestamp[us, tz=UTC]"``.

Contracts name types as pyarrow prints them; :func:`parse_type` reads such a name back, nested types
included, so that a contract fixes exactly what text formats mean.

>>> parse_type("list<item: struct<a: int64, b: string>>")
ListType(list<item: struct<a: int64, b: string>>)
"""

from __future__ import annotations

import re

import pyarrow as pa

from dsm.errors import SchemaError

__all__ = ["parse_type", "type_name"]

_PARAMETRIC = re.compile(r"^(timestamp|time32|time64|duration)\[(s|ms|us|ns)(?:, tz=(.+))?\]$")
_DECIMAL = re.compile(r"^decimal(32|64|128|256)?\((\d+), ?(-?\d+)\)$")
_FIXED_BINARY = re.compile(r"^fixed_size_binary\[(\d+)\]$")
_ALIASES = {
    "date32[day]": pa.date32(),
    "date64[ms]": pa.date64(),
    "large_string": pa.large_string(),
    "large_binary": pa.large_binary(),
    "string_view": pa.string_view(),
    "binary_view": pa.binary_view(),
}


def type_name(kind: pa.DataType) -> str:
    """The name a contract stores for ``kind`` (pyarrow's own spelling)."""
    return str(kind)


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside of <...>, (...) and [...]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _field(text: str) -> pa.Field:
    name, _, rest = text.partition(":")
    rest = rest.strip()
    nullable = True
    if rest.endswith(" not null"):
        rest, nullable = rest[: -len(" not null")], False
    return pa.field(name.strip(), parse_type(rest), nullable=nullable)


def _inner(text: str, prefix: str) -> str:
    return text[len(prefix) + 1 : text.rindex(">")]


def parse_type(text: str) -> pa.DataType:
    """The Arrow type named ``text``; raise :class:`SchemaError` naming it when it is not a type."""
    text = text.strip()
    try:
        return _parse(text)
    except SchemaError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise SchemaError(f"{text!r} is not an Arrow type name ({exc})") from None


def _parse(text: str) -> pa.DataType:
    if text in _ALIASES:
        return _ALIASES[text]
    if match := _PARAMETRIC.match(text):
        kind, unit, tz = match.groups()
        if kind == "timestamp":
            return pa.timestamp(unit, tz=tz)
        return {"time32": pa.time32, "time64": pa.time64, "duration": pa.duration}[kind](unit)
    if match := _DECIMAL.match(text):
        width, precision, scale = match.groups()
        maker = {None: pa.decimal128, "128": pa.decimal128, "256": pa.decimal256}.get(width)
        if maker is None:
            maker = getattr(pa, f"decimal{width}")
        return maker(int(precision), int(scale))
    if match := _FIXED_BINARY.match(text):
        return pa.binary(int(match.group(1)))
    if text.startswith("fixed_size_list<"):
        size = int(text[text.rindex("[") + 1 : -1])
        return pa.list_(_field(_inner(text[: text.rindex("[")], "fixed_size_list")), size)
    if text.startswith("large_list<"):
        return pa.large_list(_field(_inner(text, "large_list")))
    if text.startswith("list<"):
        return pa.list_(_field(_inner(text, "list")))
    if text.startswith("struct<"):
        return pa.struct([_field(part) for part in _split_top(_inner(text, "struct"))])
    if text.startswith("map<"):
        inner = _inner(text, "map")
        keys_sorted = inner.endswith(", keys_sorted")
        if keys_sorted:
            inner = inner[: -len(", keys_sorted")]
        key, item = _split_top(inner)
        item_field = _field(item) if ":" in item.split("<")[0] else pa.field("value", parse_type(item))
        return pa.map_(parse_type(key), item_field, keys_sorted=keys_sorted)
    if text.startswith("dictionary<"):
        parts = dict(part.split("=", 1) for part in _split_top(_inner(text, "dictionary")))
        return pa.dictionary(
            parse_type(parts["indices"]), parse_type(parts["values"]), ordered=parts.get("ordered") == "1"
        )
    try:
        return pa.type_for_alias(text)
    except ValueError:
        raise SchemaError(f"{text!r} is not an Arrow type name") from None
