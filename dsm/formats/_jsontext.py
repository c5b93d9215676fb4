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

from dsm.errors import SchemaError
from dsm.formats._common import b64encode_array, is_binary_like, is_string_like

__all__ = ["encode_lines", "escape_json_strings", "text_buffer", "unsupported_json_type"]

_TEXT = pa.large_string()
_NULL_TEXT = pa.scalar("null", _TEXT)
_EMPTY = pa.scalar("", _TEXT)
_COMMA = pa.scalar(",", _TEXT)
_QUOTE = pa.scalar('"', _TEXT)
_CONTROL = r"[\x00-\x1f]"
_RARE_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f]"
_COMMON_ESCAPES = (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))


def _s(text: str) -> pa.Scalar:
    return pa.scalar(text, _TEXT)


def unsupported_json_type(type_: pa.DataType) -> str | None:
    """Why a type has no JSONL encoding, or ``None`` when it has one."""
    if (
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
    ):
        return None
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        return unsupported_json_type(type_.value_type)
    if pa.types.is_struct(type_):
        for index in range(type_.num_fields):
            reason = unsupported_json_type(type_.field(index).type)
            if reason:
                return reason
        return None
    if pa.types.is_map(type_):
        return unsupported_json_type(type_.key_type) or unsupported_json_type(type_.item_type)
    if pa.types.is_dictionary(type_):
        return unsupported_json_type(type_.value_type)
    return f"type {type_} has no JSON encoding in dsm"


def escape_json_strings(strings: pa.Array) -> pa.Array:
    """The body of a JSON string literal for each value (``"``, ``\\`` and control characters escaped)."""
    text = pc.replace_substring(strings.cast(_TEXT), "\\", "\\\\")
    text = pc.replace_substring(text, '"', '\\"')
    if not pc.any(pc.match_substring_regex(text, _CONTROL)).as_py():
        return text
    for raw, escaped in _COMMON_ESCAPES:
        text = pc.replace_substring(text, raw, escaped)
    if pc.any(pc.match_substring_regex(text, _RARE_CONTROL)).as_py():
        for code in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)]:
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


def _object(names: Sequence[str], texts: Sequence[pa.Array], length: int) -> pa.Array:
    if not names:
        return pa.repeat(_s("{}"), length)
    parts: list[pa.Array | pa.Scalar] = []
    for index, (name, text) in enumerate(zip(names, texts, strict=True)):
        key = json.dumps(name, ensure_ascii=False)
        parts.append(_s(("{" if index == 0 else ",") + key + ":"))
        parts.append(text)
    parts.append(_s("}"))
    return _join(*parts)


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
    if pa.types.is_boolean(type_) or pa.types.is_integer(type_):
        return array.cast(_TEXT)
    if pa.types.is_floating(type_):
        return _floats(array)
    if is_string_like(type_):
        return _quoted(escape_json_strings(array))
    if is_binary_like(type_):
        return _quoted(b64encode_array(array))
    if pa.types.is_date(type_) or pa.types.is_decimal(type_):
        return _quoted(array.cast(_TEXT))
    if pa.types.is_timestamp(type_):
        return _timestamps(array)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return _lists(array.offsets, array.values)
    if pa.types.is_fixed_size_list(type_):
        return _texts(array.cast(pa.list_(type_.value_field)))
    if pa.types.is_struct(type_):
        return _structs(array)
    if pa.types.is_map(type_):
        return _maps(array)
    raise SchemaError(unsupported_json_type(type_) or f"type {type_} has no JSON encoding in dsm")


def encode_values(array: pa.Array) -> pa.Array:
    """The JSON text of every value of ``array`` as a large_string array without nulls (null -> ``null``)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_null(array.type) or len(array) == array.null_count:
        return pa.repeat(_NULL_TEXT, len(array))
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    text = _null_where_invalid(array, _texts(array))
    return pc.fill_null(text, _NULL_TEXT)


def encode_lines(batch: pa.RecordBatch) -> pa.Array:
    """One JSON object per row, keys in schema order, each text ending with ``\\n``."""
    texts = []
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        try:
            texts.append(encode_values(column))
        except SchemaError as exc:
            raise SchemaError(f'field "{name}": {exc}') from None
    objects = _object(batch.schema.names, texts, batch.num_rows)
    return _join(objects, _s("\n"))


def text_buffer(texts: pa.Array) -> pa.Buffer:
    """The concatenated UTF-8 bytes of a large_string array without nulls (zero-copy)."""
    if len(texts) == 0:
        return pa.py_buffer(b"")
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)
    start = int(offsets[texts.offset])
    end = int(offsets[texts.offset + len(texts)])
    data = texts.buffers()[2]
    return data.slice(start, end - start) if data is not None else pa.py_buffer(b"")
