"""Arrow type names, both ways: ``type_name(pa.timestamp("us", "UTC"))`` <-> ``"timestamp[us, tz=UTC]"``.

Contracts name types as pyarrow prints them, with two additions where pyarrow's text loses something:

- a field name that is empty, has surrounding spaces, or holds one of ``: , " ' < > ( ) [ ]`` (or a control
  character) is written as a JSON string: ``struct<"a: b": int64>``;
- a map whose values are not nullable says so: ``map<string, int64 not null>``.

pyarrow's own spellings read back too, including the names of a map's key and value fields
(``map<string ('k'), int64 ('v')>``). A map read from Parquet prints as ``map<string, int64 ('mp')>``:
pyarrow names its entries struct after the column, and without ``keys_sorted`` that text cannot tell the
entries' name from the value field's; it is read as the value field's name. Arrow's type equality ignores
the names inside a map (and so does the row fingerprint), so either reading is the same type; an entries
name printed after ``keys_sorted`` is read and not kept. :func:`type_name` checks that its text reads back
as the same type, so a contract never records a name that a later command cannot read.

>>> parse_type("list<item: struct<a: int64, b: string>>")
ListType(list<item: struct<a: int64, b: string>>)
>>> type_name(pa.struct([pa.field("a: b", pa.int64())]))
'struct<"a: b": int64>'
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from dsm.errors import SchemaError
from dsm.schema_memo import SchemaMemo

__all__ = [
    "MAX_TYPE_DEPTH",
    "declares_non_nullable",
    "list_view_as_list",
    "masked_nulls_filled",
    "parse_type",
    "placeholders_nulled",
    "take",
    "type_name",
    "whole",
]

MAX_TYPE_DEPTH = 64
"""Types nest at most this deep (a list of a struct of a list... counts one level each)."""

_UNITS = ("s", "ms", "us", "ns")
_NAME_CHAR = r"[^\"':,<>()\[\]\x00-\x1f\x7f]"
_PLAIN_NAME = re.compile(rf"(?!\s){_NAME_CHAR}(?:{_NAME_CHAR}*(?<!\s))?")
_ANNOTATION_NAME = re.compile(r"[^'()\x00-\x1f\x7f]*")
_SIMPLE = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "halffloat": pa.float16(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "string_view": pa.string_view(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "binary_view": pa.binary_view(),
    "date32[day]": pa.date32(),
    "date64[ms]": pa.date64(),
    "month_day_nano_interval": pa.month_day_nano_interval(),
}
_SIMPLE_NAMES = {str(t): name for name, t in _SIMPLE.items()}
_LIST_KINDS = {
    "list": pa.list_,
    "large_list": pa.large_list,
    "list_view": pa.list_view,
    "large_list_view": pa.large_list_view,
}
_LIST_TESTS = {
    "list": pa.types.is_list,
    "large_list": pa.types.is_large_list,
    "list_view": pa.types.is_list_view,
    "large_list_view": pa.types.is_large_list_view,
}
_WORD = re.compile(r"[a-z_0-9]+")
_INTEGER = re.compile(r"-?\d{1,6}")
_DECIMALS = {
    "decimal32": pa.decimal32,
    "decimal64": pa.decimal64,
    "decimal128": pa.decimal128,
    "decimal256": pa.decimal256,
}


# ------------------------------------------------------------------------------------------------ naming


def type_name(kind: pa.DataType) -> str:
    """The name a contract stores for ``kind``: pyarrow's spelling, extended where it would lose something.

    Raises :class:`SchemaError` for a type that has no name dsm reads back (extension and union types).
    """
    text = _name(kind, 0)
    back = parse_type(text)
    if not back.equals(kind) or _name(back, 0) != text:
        raise SchemaError(f"type {kind} has no name that dsm reads back as the same type")
    return text


def _field_name(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def _annotation(name: str, standard: str) -> str:
    if name == standard:
        return ""
    if _ANNOTATION_NAME.fullmatch(name):
        return f" ('{name}')"
    return f" ({json.dumps(name, ensure_ascii=False)})"


def _field(field: pa.Field, depth: int) -> str:
    text = f"{_field_name(field.name)}: {_name(field.type, depth + 1)}"
    return text if field.nullable else text + " not null"


def _name(kind: pa.DataType, depth: int) -> str:
    if depth > MAX_TYPE_DEPTH:
        raise SchemaError(f"a type nests deeper than {MAX_TYPE_DEPTH} levels")
    text = str(kind)
    if text in _SIMPLE_NAMES and _SIMPLE[_SIMPLE_NAMES[text]].equals(kind):
        return text
    if pa.types.is_timestamp(kind):
        return f"timestamp[{kind.unit}]" if kind.tz is None else f"timestamp[{kind.unit}, tz={kind.tz}]"
    if pa.types.is_time32(kind) or pa.types.is_time64(kind) or pa.types.is_duration(kind):
        return text
    if pa.types.is_decimal(kind) or pa.types.is_fixed_size_binary(kind):
        return text
    for prefix, test in _LIST_TESTS.items():
        if test(kind):
            return f"{prefix}<{_field(kind.value_field, depth)}>"
    if pa.types.is_fixed_size_list(kind):
        return f"fixed_size_list<{_field(kind.value_field, depth)}>[{kind.list_size}]"
    if pa.types.is_struct(kind):
        return "struct<" + ", ".join(_field(kind.field(i), depth) for i in range(kind.num_fields)) + ">"
    if pa.types.is_map(kind):
        key, item = kind.key_field, kind.item_field
        text = f"map<{_name(key.type, depth + 1)}{_annotation(key.name, 'key')}, "
        text += _name(item.type, depth + 1) + ("" if item.nullable else " not null")
        text += _annotation(item.name, "value")
        return text + (", keys_sorted>" if kind.keys_sorted else ">")
    if pa.types.is_dictionary(kind):
        values, indices = _name(kind.value_type, depth + 1), _name(kind.index_type, depth + 1)
        return f"dictionary<values={values}, indices={indices}, ordered={int(kind.ordered)}>"
    raise SchemaError(f"type {kind} has no name that dsm reads back (extension and union types have none)")


# ------------------------------------------------------------------------------------------------ parsing


def parse_type(text: str) -> pa.DataType:
    """The Arrow type named ``text``; raise :class:`SchemaError` naming it when it is not a type."""
    parser = _Parser(text.strip())
    try:
        kind = parser.type(0)
        if parser.pos != len(parser.text):
            raise parser.error("unexpected text")
        return kind
    except SchemaError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, pa.ArrowException) as exc:
        raise SchemaError(f"{text.strip()!r} is not an Arrow type name ({exc})") from None


class _Parser:
    """Recursive descent over one type name; ``pos`` is the next character to read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> SchemaError:
        return SchemaError(f"{self.text!r} is not an Arrow type name ({what} at character {self.pos + 1})")

    def peek(self, literal: str) -> bool:
        return self.text.startswith(literal, self.pos)

    def accept(self, literal: str) -> bool:
        if self.peek(literal):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.accept(literal):
            raise self.error(f"expected {literal!r}")

    def spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def word(self) -> str:
        match = _WORD.match(self.text, self.pos)
        if match is None:
            raise self.error("expected a type")
        self.pos = match.end()
        return match.group()

    def until(self, stop: str) -> str:
        end = self.text.find(stop, self.pos)
        if end < 0:
            raise self.error(f"expected {stop!r}")
        value, self.pos = self.text[self.pos : end], end
        return value

    def integer(self) -> int:
        match = _INTEGER.match(self.text, self.pos)
        if match is None:
            raise self.error("expected an integer")
        self.pos = match.end()
        return int(match.group())

    def type(self, depth: int) -> pa.DataType:
        if depth > MAX_TYPE_DEPTH:
            raise self.error(f"types nest deeper than {MAX_TYPE_DEPTH} levels")
        head = self.word()
        if head in ("date32", "date64") and self.peek("["):
            head += self.until("]") + "]"
            self.pos += 1
        if head in _SIMPLE:
            return _SIMPLE[head]
        if head == "timestamp":
            self.expect("[")
            unit = self.unit()
            tz = None
            if self.accept(", tz="):
                tz = self.until("]")
            self.expect("]")
            return pa.timestamp(unit, tz=tz)
        if head in ("time32", "time64", "duration"):
            self.expect("[")
            unit = self.unit()
            self.expect("]")
            return {"time32": pa.time32, "time64": pa.time64, "duration": pa.duration}[head](unit)
        if head in _DECIMALS or head == "decimal":
            self.expect("(")
            precision = self.integer()
            self.expect(",")
            self.spaces()
            scale = self.integer()
            self.expect(")")
            return _DECIMALS.get(head, pa.decimal128)(precision, scale)
        if head == "fixed_size_binary":
            self.expect("[")
            width = self.integer()
            self.expect("]")
            return pa.binary(width)
        if head in _LIST_KINDS:
            self.expect("<")
            item = self.field(depth)
            self.expect(">")
            return _LIST_KINDS[head](item)
        if head == "fixed_size_list":
            self.expect("<")
            item = self.field(depth)
            self.expect(">[")
            size = self.integer()
            self.expect("]")
            return pa.list_(item, size)
        if head == "struct":
            return self.struct(depth)
        if head == "map":
            return self.map(depth)
        if head == "dictionary":
            self.expect("<values=")
            values = self.type(depth + 1)
            self.expect(", indices=")
            indices = self.type(depth + 1)
            self.expect(", ordered=")
            ordered = self.integer()
            self.expect(">")
            return pa.dictionary(indices, values, ordered=ordered == 1)
        try:
            return pa.type_for_alias(head)
        except ValueError:
            raise SchemaError(f"{self.text!r} is not an Arrow type name (unknown type {head!r})") from None

    def unit(self) -> str:
        for unit in ("ms", "us", "ns", "s"):
            if self.accept(unit):
                return unit
        raise self.error(f"expected a unit ({', '.join(_UNITS)})")

    def name(self) -> str:
        if self.peek('"'):
            try:
                value, end = json.JSONDecoder().raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                raise self.error("unterminated quoted name") from None
            if not isinstance(value, str):
                raise self.error("expected a name")
            self.pos = end
            return value
        return self.until(":").strip()

    def nullable(self) -> bool:
        return not self.accept(" not null")

    def field(self, depth: int) -> pa.Field:
        name = self.name()
        self.expect(":")
        self.spaces()
        kind = self.type(depth + 1)
        return pa.field(name, kind, nullable=self.nullable())

    def struct(self, depth: int) -> pa.DataType:
        self.expect("<")
        fields: list[pa.Field] = []
        if not self.accept(">"):
            while True:
                fields.append(self.field(depth))
                if self.accept(">"):
                    break
                self.expect(",")
                self.spaces()
        return pa.struct(fields)

    def annotation(self, default: str) -> str:
        """A map field's name, ``('name')`` or ``("json")`` after its type; ``default`` when absent."""
        if self.accept(" ('"):
            name = self.until("')")
            self.pos += 2
            return name
        if self.accept(" ("):
            name = self.name()
            self.expect(")")
            return name
        return default

    def map(self, depth: int) -> pa.DataType:
        self.expect("<")
        key_type = self.type(depth + 1)
        key = pa.field(self.annotation("key"), key_type, nullable=False)
        self.expect(",")
        self.spaces()
        item_type = self.type(depth + 1)
        nullable = self.nullable()
        item = pa.field(self.annotation("value"), item_type, nullable=nullable)
        keys_sorted = self.accept(", keys_sorted")
        self.annotation("entries")  # the entries struct's name is not part of the type (see module doc)
        self.expect(">")
        return pa.map_(key, item, keys_sorted=keys_sorted)


def list_view_as_list(array: pa.Array) -> pa.Array:
    """A list view array as the list array of the same values (pyarrow's own cast can build invalid
    offsets when a view's ranges are out of order or empty at the end)."""
    import numpy as np

    large = pa.types.is_large_list_view(array.type)
    starts = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    sizes = np.asarray(array.sizes.to_numpy(zero_copy_only=False), dtype=np.int64)
    if array.null_count:
        sizes = np.where(np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool), sizes, 0)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    positions = np.repeat(starts - offsets[:-1], sizes) + np.arange(int(offsets[-1]), dtype=np.int64)
    try:
        values = array.values.take(pa.array(positions, type=pa.int64()))
    except pa.ArrowNotImplementedError:  # no take kernel for some value types (string_view): by slices
        pieces = [array.values.slice(int(s), int(n)) for s, n in zip(starts, sizes, strict=True) if n]
        values = pa.concat_arrays(pieces) if pieces else array.values.slice(0, 0)
    kind = pa.large_list(array.type.value_field) if large else pa.list_(array.type.value_field)
    cls = pa.LargeListArray if large else pa.ListArray
    mask = array.is_null() if array.null_count else None
    return cls.from_arrays(
        pa.array(offsets, pa.int64() if large else pa.int32()), values, type=kind, mask=mask
    )


def _without_views(kind: pa.DataType) -> pa.DataType:
    """``kind`` with string and binary views replaced by their large counterparts (same values)."""
    if pa.types.is_string_view(kind):
        return pa.large_string()
    if pa.types.is_binary_view(kind):
        return pa.large_binary()
    if pa.types.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        return pa.struct([f.with_type(_without_views(f.type)) for f in fields])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        field = kind.value_field.with_type(_without_views(kind.value_type))
        if pa.types.is_fixed_size_list(kind):
            return pa.list_(field, kind.list_size)
        return pa.large_list(field) if pa.types.is_large_list(kind) else pa.list_(field)
    if pa.types.is_map(kind):
        key = kind.key_field.with_type(_without_views(kind.key_type))
        return pa.map_(key, kind.item_field.with_type(_without_views(kind.item_type)), kind.keys_sorted)
    return kind


def whole(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``column`` as one array: a chunked array's only chunk as it is, its chunks concatenated where there
    are several (pyarrow's ``ChunkedArray.combine_chunks`` copies even a single chunk: a copy of every
    column of every JSONL chunk read, 3% of a JSONL -> Parquet job, with the fresh pages it touched)."""
    if isinstance(column, pa.Array):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()


def take(data: pa.Array | pa.RecordBatch | pa.Table, indices: pa.Array) -> Any:
    """``data.take(indices)`` for every type: Arrow has no take kernel for view types (string_view,
    list_view...), which are taken through their non-view counterparts and cast back."""
    try:
        return data.take(indices)
    except pa.ArrowNotImplementedError:
        pass
    if isinstance(data, pa.Array):
        if pa.types.is_list_view(data.type) or pa.types.is_large_list_view(data.type):
            return take(list_view_as_list(data), indices).cast(data.type)
        return data.cast(_without_views(data.type)).take(indices).cast(data.type)
    columns = [take(whole(c), indices) for c in data.columns]
    return type(data).from_arrays(columns, schema=data.schema)


def placeholders_nulled(array: pa.DictionaryArray) -> pa.DictionaryArray:
    """``array`` with indices past its dictionary made null.

    Only a placeholder under a null parent points there (pyarrow's builders write index 0 into an empty
    dictionary for the dictionary field of a null struct); its value is masked by the parent, but decoding
    it would fail.
    """
    import pyarrow.compute as pc

    indices = array.indices
    if not len(indices) or (pc.max(indices).as_py() or 0) < len(array.dictionary):
        return array
    inside = pc.less(indices, pa.scalar(len(array.dictionary), indices.type))
    indices = pc.if_else(inside, indices, pa.scalar(None, indices.type))
    return pa.DictionaryArray.from_arrays(indices, array.dictionary, ordered=array.type.ordered)


def declares_non_nullable(schema: pa.Schema) -> bool:
    """Whether a field of ``schema``, at any depth, is declared non-nullable (a map's keys are)."""
    return any(_has_required(f.type) or not f.nullable for f in schema)


def masked_nulls_filled(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with the nulls that a null parent hides in fields declared non-nullable replaced by a
    placeholder (zero, empty); every value a reader can see stays as it was.

    Arrow leaves a child's slot under a null parent undefined, and producers differ: pyarrow's builders
    put a value there, dsm's JSONL reader a null (any producer may). pyarrow's Parquet writer refuses any null
    in a leaf declared non-nullable, hidden or not (and does not look at the nulls of a struct). A null
    that no parent hides breaks its declaration: it is a SchemaError naming the field (the writer would
    refuse it only in a leaf, and store a placeholder as data under a null struct).
    """
    schema = batch.schema
    columns = None
    for i in _columns_to_fill(schema):
        given = batch.column(i)
        field = schema.field(i)
        filled = _child(given, field, None, field.name)
        if filled is not given:
            if columns is None:
                columns = list(batch.columns)
            columns[i] = filled
    return batch if columns is None else pa.RecordBatch.from_arrays(columns, schema=schema)


def _fill_plan(schema: pa.Schema) -> tuple[int, ...]:
    """The columns of ``schema`` that :func:`masked_nulls_filled` must look at: those declared
    non-nullable (a null there is refused) and the nested ones with a non-nullable field below (hidden
    slots are filled). The rest are left as they are, unread."""
    return tuple(
        i
        for i, f in enumerate(schema)
        if not pa.types.is_null(f.type) and (not f.nullable or _nested_required(f.type))
    )


_columns_to_fill = SchemaMemo(_fill_plan)


def _nested_required(kind: pa.DataType) -> bool:
    """Whether ``kind`` is nested with a non-nullable field below it: where :func:`_filled` has work."""
    nested = (
        pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
        or pa.types.is_map(kind)
        or pa.types.is_struct(kind)
        or pa.types.is_fixed_size_list(kind)
    )
    return nested and _has_required(kind)


def _filled(array: pa.Array, hidden: Any, path: str) -> pa.Array:
    """``array`` with hidden nulls filled below it; ``hidden`` is a numpy bool per slot (under a null
    ancestor) or None for none."""
    import numpy as np

    kind = array.type
    if not _nested_required(kind):
        return array
    nulls = array.is_null().to_numpy(zero_copy_only=False)
    below = nulls if hidden is None else (hidden | nulls)
    mask = pa.array(nulls) if array.null_count else None
    if pa.types.is_struct(kind):
        given = [array.field(i) for i in range(kind.num_fields)]
        children = [
            _child(c, kind.field(i), below, f"{path}.{kind.field(i).name}") for i, c in enumerate(given)
        ]
        if all(a is b for a, b in zip(children, given, strict=True)):
            return array
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    if pa.types.is_fixed_size_list(kind):
        size = kind.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        filled = _child(values, kind.value_field, np.repeat(below, size), f"{path}[]")
        if filled is values:
            return array
        return pa.FixedSizeListArray.from_arrays(filled, type=kind, mask=mask)
    # a list's children are rebuilt from the slice its offsets cover (pyarrow takes no validity with
    # offsets into a longer child)
    offsets = array.offsets.to_numpy(zero_copy_only=False)
    start = int(offsets[0])
    given = array.values.slice(start, int(offsets[-1]) - start)
    under = np.repeat(below, np.diff(offsets))
    starts = pa.array(offsets - start, pa.int64() if pa.types.is_large_list(kind) else pa.int32())
    if pa.types.is_map(kind):  # a list of (key, item) entries
        entries = _child(given, pa.field("entries", given.type, nullable=False), under, f"{path}{{}}")
        if entries is given:
            return array
        return pa.MapArray.from_arrays(starts, entries.field(0), entries.field(1), type=kind, mask=mask)
    values = _child(given, kind.value_field, under, f"{path}[]")
    if values is given:
        return array
    return type(array).from_arrays(starts, values, type=kind, mask=mask)


def _child(array: pa.Array, field: pa.Field, hidden: Any, path: str) -> pa.Array:
    """One child of a nested array (or a column: ``hidden`` None), filled below, and in itself where it
    is declared non-nullable and each of its nulls is hidden."""
    import numpy as np

    if pa.types.is_null(field.type):
        return array  # null is the only value of this type, declared nullable or not
    if not field.nullable and array.null_count:
        shown = array.is_null().to_numpy(zero_copy_only=False)
        if hidden is not None:
            shown &= ~hidden
        if shown.any():
            raise SchemaError(
                f'field "{path}" is declared non-nullable but holds a null (value {int(shown.argmax())} of '
                "that field): the data does not match its schema"
            )
    array = _filled(array, hidden if hidden is not None and hidden.any() else None, path)
    if field.nullable or not array.null_count:
        return array
    # each null is hidden: it becomes a placeholder, the one value appended after the array's own
    nulls = array.is_null().to_numpy(zero_copy_only=False)
    indices = np.where(nulls, len(array), np.arange(len(array)))
    return take(pa.concat_arrays([array, _placeholder(field.type)]), pa.array(indices, pa.int64()))


def _has_required(kind: pa.DataType) -> bool:
    """Whether a field below ``kind`` is declared non-nullable (only those can need a placeholder)."""
    if pa.types.is_map(kind):
        return True  # keys are never null
    fields = [kind.field(i) for i in range(kind.num_fields)]
    return any(not f.nullable or _has_required(f.type) for f in fields)


def _placeholder(kind: pa.DataType) -> pa.Array:
    """One value of ``kind`` to stand where no reader looks: zero, empty, or built of those (a null
    only where the type holds nothing else)."""
    import decimal

    if pa.types.is_null(kind):
        return pa.nulls(1)
    if pa.types.is_dictionary(kind):
        indices = pa.array([0], kind.index_type)
        return pa.DictionaryArray.from_arrays(indices, _placeholder(kind.value_type), ordered=kind.ordered)
    if pa.types.is_struct(kind):
        if not kind.num_fields:
            return pa.array([{}], kind)
        children = [_placeholder(kind.field(i).type) for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(kind))
    if pa.types.is_fixed_size_list(kind):
        values = pa.concat_arrays([_placeholder(kind.value_type)] * kind.list_size)
        return pa.FixedSizeListArray.from_arrays(values, type=kind)
    value: Any = []  # lists, list views and maps: empty
    if pa.types.is_boolean(kind):
        value = False
    elif pa.types.is_fixed_size_binary(kind):
        value = b"\0" * kind.byte_width
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        value = ""
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        value = b""
    elif pa.types.is_decimal(kind):
        value = decimal.Decimal(0)
    elif pa.types.is_interval(kind):
        value = pa.MonthDayNano([0, 0, 0])
    elif pa.types.is_floating(kind):
        value = 0.0
    elif pa.types.is_integer(kind) or pa.types.is_temporal(kind):
        value = 0
    return pa.array([value], kind)
