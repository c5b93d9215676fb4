"""Column-wise JSON encoding of Arrow arrays (private to the text formats).

Every value becomes its JSON text with Arrow compute kernels, never a Python loop per value (except the
base64 of binary values): the texts of a column are joined element-wise into objects, lists and lines.
Encoding rules are those documented in ``docs/formats.md`` (JSONL section).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsm.arrow_types import whole
from dsm.errors import SchemaError
from dsm.formats._common import b64encode_array, check_text_timestamps, is_binary_like, is_string_like
from dsm.formats._flatjson import (
    Escaped,
    escaped_texts,
    float_texts,
    int_texts,
    join_lines,
    kernel_joins,
    value_bytes,
)
from dsm.formats._storage import convert_array

__all__ = [
    "encode_lines",
    "encode_lines_bytes",
    "escape_json_strings",
    "json_stored_type",
    "text_buffer",
    "unsupported_json_type",
]

_TEXT = pa.large_string()
_NULL_TEXT = pa.scalar("null", _TEXT)
_EMPTY = pa.scalar("", _TEXT)
_COMMA = pa.scalar(",", _TEXT)
_QUOTE = pa.scalar('"', _TEXT)
_COMMON_ESCAPES = (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))


def _s(text: str) -> pa.Scalar:
    return pa.scalar(text, _TEXT)


def _is_json_scalar(type_: pa.DataType) -> bool:
    return bool(
        pa.types.is_null(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_integer(type_)
        or pa.types.is_float32(type_)
        or pa.types.is_float64(type_)
        or is_string_like(type_)
        or is_binary_like(type_)
        or pa.types.is_date(type_)
        or pa.types.is_timestamp(type_)
        or pa.types.is_decimal(type_)
    )


def json_stored_type(type_: pa.DataType) -> pa.DataType:
    """The type a JSONL file holds for ``type_`` and reads back as; SchemaError when it has no encoding.

    Text has no dictionaries and no views: a dictionary is held as its values, a string or binary view
    as a string or binary, a list view as a list. Every other supported type is held as it is.
    """
    if _is_json_scalar(type_):
        return type_
    if pa.types.is_dictionary(type_):
        return json_stored_type(type_.value_type)
    if pa.types.is_string_view(type_):
        return pa.string()
    if pa.types.is_binary_view(type_):
        return pa.binary()
    if pa.types.is_list(type_) or pa.types.is_list_view(type_):
        return pa.list_(_stored_field(type_.value_field))
    if pa.types.is_large_list(type_) or pa.types.is_large_list_view(type_):
        return pa.large_list(_stored_field(type_.value_field))
    if pa.types.is_fixed_size_list(type_):
        return pa.list_(_stored_field(type_.value_field), type_.list_size)
    if pa.types.is_struct(type_) and type_.num_fields:
        return pa.struct([_stored_field(type_.field(i)) for i in range(type_.num_fields)])
    if pa.types.is_map(type_):
        return pa.map_(_stored_field(type_.key_field), _stored_field(type_.item_field), type_.keys_sorted)
    if pa.types.is_struct(type_):
        raise SchemaError(f"type {type_} has no fields: pyarrow cannot build it back from JSON objects")
    raise SchemaError(f"type {type_} has no JSON encoding in dsm")


def _stored_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, json_stored_type(field.type), nullable=field.nullable)


def unsupported_json_type(type_: pa.DataType) -> str | None:
    """Why a type has no JSONL encoding, or ``None`` when it has one."""
    try:
        json_stored_type(type_)
    except SchemaError as exc:
        return str(exc)
    return None


def _escapes_in(raw: np.ndarray) -> tuple[bool, bool, set[int]]:
    """Whether ``raw`` holds a backslash, a quote, and which control characters (three NumPy passes)."""
    controls = raw[raw < 0x20]
    present = set(np.unique(controls).tolist()) if len(controls) else set()
    return bool(np.count_nonzero(raw == 0x5C)), bool(np.count_nonzero(raw == 0x22)), present


def escape_json_strings(strings: pa.Array) -> pa.Array:
    """The body of a JSON string literal for each value (``"``, ``\\`` and control characters escaped).

    With the compiled kernel, one scan of the values' bytes finds what escaping adds and, where anything,
    one more pass writes the escaped values. Without it, a NumPy scan finds which escapes occur and only
    their replacement passes run (most text needs none, or one or two).
    """
    text = strings.cast(_TEXT)
    escaped = escaped_texts(text)
    if escaped is not None:
        return escaped
    backslash, quote, present = _escapes_in(value_bytes(text))
    if backslash:
        text = pc.replace_substring(text, "\\", "\\\\")
    if quote:
        text = pc.replace_substring(text, '"', '\\"')
    if not present:
        return text
    for raw_char, escaped in _COMMON_ESCAPES:
        if ord(raw_char) in present:
            text = pc.replace_substring(text, raw_char, escaped)
    for code in sorted(present - {ord(raw_char) for raw_char, _ in _COMMON_ESCAPES}):
        text = pc.replace_substring(text, chr(code), f"\\u{code:04x}")
    return text


def _join(*parts: pa.Array | pa.Scalar) -> pa.Array:
    return pc.binary_join_element_wise(*parts, _EMPTY)


def _quoted(text: pa.Array) -> pa.Array:
    return _join(_QUOTE, text.cast(_TEXT), _QUOTE)


def _null_where_invalid(array: pa.Array, text: pa.Array) -> pa.Array:
    if array.null_count == 0:
        return text
    return pc.if_else(array.is_valid(), text, pa.scalar(None, _TEXT))


def _floats(array: pa.Array) -> pa.Array:
    text = float_texts(array)  # the kernel's, where it writes every value: finite, -0 as -0.0
    if text is not None:
        return text
    text = array.cast(_TEXT)
    negative_zero = pc.equal(text, _s("-0"))
    if pc.any(negative_zero).as_py():
        # Arrow writes -0.0 as "-0", which many JSON readers take for the integer 0.
        text = pc.if_else(negative_zero, _s("-0.0"), text)
    if pc.all(pc.is_finite(array)).as_py() is not False:
        return text
    text = pc.if_else(pc.is_nan(array), _s('"NaN"'), text)
    positive = pc.greater(array, pa.scalar(0, array.type))
    text = pc.if_else(pc.and_(pc.is_inf(array), positive), _s('"Infinity"'), text)
    return pc.if_else(pc.and_(pc.is_inf(array), pc.invert(positive)), _s('"-Infinity"'), text)


def _timestamps(array: pa.Array) -> pa.Array:
    """ISO-8601 with the unit's fixed number of fractional digits; tz-aware values in UTC with ``Z``."""
    check_text_timestamps(array)
    utc = array.view(pa.int64()).view(pa.timestamp(array.type.unit))
    text = pc.replace_substring(utc.cast(_TEXT), " ", "T", max_replacements=1)
    if pc.any(pc.starts_with(text, "<")).as_py():
        raise SchemaError(f"a {array.type} value is outside the range that ISO-8601 text can hold")
    if array.type.tz is not None:
        text = _join(text, _s("Z"))
    return _quoted(text)


def _lists(offsets: pa.Array, values: pa.Array) -> pa.Array:
    items = encode_values(values)
    lists = pa.LargeListArray.from_arrays(offsets.cast(pa.int64()), items)
    return _join(_s("["), pc.binary_join(lists, _COMMA), _s("]"))


def _object(
    names: Sequence[str],
    texts: Sequence[pa.Array],
    length: int,
    *,
    quoted: Sequence[bool] = (),
    end: str = "}",
) -> pa.Array:
    """``{"name":text,...}`` per row, joined in one pass; a ``quoted`` text gets its quotes from the
    separators around it (no copy of the column just to add them), and ``end`` closes each object."""
    if not names:
        return pa.repeat(_s("{}" + end[1:]), length)
    return _join(*_object_parts(names, texts, quoted=quoted, end=end))


def _object_parts(
    names: Sequence[str], texts: Sequence[pa.Array], *, quoted: Sequence[bool] = (), end: str = "}"
) -> list[pa.Array | pa.Scalar]:
    """What ``_object`` joins: the constants (keys, separators) and the texts, in order."""
    if not names:
        return [_s("{}" + end[1:])]
    quotes = list(quoted) or [False] * len(names)
    parts: list[pa.Array | pa.Scalar] = []
    before = "{"
    for name, text, quote in zip(names, texts, quotes, strict=True):
        key = json.dumps(name, ensure_ascii=False)
        parts.append(_s(before + key + ":" + ('"' if quote else "")))
        parts.append(text)
        before = ('"' if quote else "") + ","
    parts.append(_s(before[:-1] + end))
    return parts


def _structs(array: pa.StructArray) -> pa.Array:
    type_ = array.type
    names = [type_.field(i).name for i in range(type_.num_fields)]
    return _object(names, [encode_values(child) for child in array.flatten()], len(array))


def _maps(array: pa.MapArray) -> pa.Array:
    entries = _join(_s("["), encode_values(array.keys), _COMMA, encode_values(array.items), _s("]"))
    lists = pa.LargeListArray.from_arrays(array.offsets.cast(pa.int64()), entries)
    return _join(_s("["), pc.binary_join(lists, _COMMA), _s("]"))


def _texts(array: pa.Array) -> pa.Array:
    """JSON texts of the valid values (null where ``array`` is null, or any text: the caller masks)."""
    type_ = array.type
    if pa.types.is_integer(type_):
        text = int_texts(array)  # the kernel's, the same texts as the cast's
        return array.cast(_TEXT) if text is None else text
    if pa.types.is_boolean(type_):
        return array.cast(_TEXT)
    if pa.types.is_floating(type_):
        return _floats(array)
    if is_string_like(type_):
        return _quoted(escape_json_strings(array))
    if is_binary_like(type_):
        return _quoted(b64encode_array(array))
    if pa.types.is_date64(type_):
        return _quoted(convert_array(array, pa.date32()).cast(_TEXT))  # days floored, as fingerprinted
    if pa.types.is_date(type_) or pa.types.is_decimal(type_):
        return _quoted(array.cast(_TEXT))
    if pa.types.is_timestamp(type_):
        return _timestamps(array)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return _lists(array.offsets, array.values)
    if pa.types.is_fixed_size_list(type_):
        # Not through a cast to list: Arrow refuses one whose non-nullable items hold the placeholders
        # of null lists.
        size = type_.list_size
        offsets = pa.array(np.arange(len(array) + 1, dtype=np.int64) * size)
        return _lists(offsets, array.values.slice(array.offset * size, len(array) * size))
    if pa.types.is_struct(type_):
        return _structs(array)
    if pa.types.is_map(type_):
        return _maps(array)
    raise SchemaError(unsupported_json_type(type_) or f"type {type_} has no JSON encoding in dsm")


def encode_values(array: pa.Array) -> pa.Array:
    """The JSON text of every value of ``array`` as a large_string array without nulls (null -> ``null``)."""
    array = whole(array)
    if pa.types.is_null(array.type) or len(array) == array.null_count:
        return pa.repeat(_NULL_TEXT, len(array))
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    text = _null_where_invalid(array, _texts(array))
    return pc.fill_null(text, _NULL_TEXT)


def encode_lines(batch: pa.RecordBatch) -> pa.Array:
    """One JSON object per row, keys in schema order, each text ending with ``\\n``."""
    texts, quoted = _line_texts(batch)
    return _object(batch.schema.names, texts, batch.num_rows, quoted=quoted, end="}\n")


def encode_lines_bytes(batch: pa.RecordBatch) -> pa.Buffer:
    """The bytes of ``encode_lines(batch)``, joined by the compiled kernel where it is built (which escapes
    the text columns without nulls as it copies them)."""
    joined_by_kernel = kernel_joins()
    texts, quoted = _line_texts(batch, escaped_by_join=joined_by_kernel)
    if joined_by_kernel:
        parts = _object_parts(batch.schema.names, texts, quoted=quoted, end="}\n")
        joined = join_lines(parts, batch.num_rows)
        if joined is not None:
            return joined
        texts, quoted = _line_texts(batch)
    return text_buffer(_object(batch.schema.names, texts, batch.num_rows, quoted=quoted, end="}\n"))


def _line_texts(
    batch: pa.RecordBatch, *, escaped_by_join: bool = False
) -> tuple[list[pa.Array | Escaped], list[bool]]:
    """The texts of each column of a line, and whether the joining adds their quotes; with
    ``escaped_by_join``, a text column without nulls is left for the kernel's join to escape."""
    texts: list[pa.Array | Escaped] = []
    quoted = []
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        try:
            if is_string_like(column.type) and column.null_count == 0:
                # The most common text column: escaped only; _object adds the quotes while joining.
                texts.append(Escaped(column) if escaped_by_join else escape_json_strings(column))
                quoted.append(True)
            else:
                texts.append(encode_values(column))
                quoted.append(False)
        except SchemaError as exc:
            raise SchemaError(f'field "{name}": {exc}') from None
    return texts, quoted


def text_buffer(texts: pa.Array) -> pa.Buffer:
    """The concatenated UTF-8 bytes of a large_string array without nulls (zero-copy)."""
    if len(texts) == 0:
        return pa.py_buffer(b"")
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)
    start = int(offsets[texts.offset])
    end = int(offsets[texts.offset + len(texts)])
    data = texts.buffers()[2]
    return data.slice(start, end - start) if data is not None else pa.py_buffer(b"")
