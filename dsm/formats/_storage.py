"""What a format makes of a schema: the types its files hold, and the exact conversions into them (private).

Each format says, in its ``stored_type``, what an Arrow type becomes once written and read back (Parquet
has no seconds unit, text formats have no dictionaries, ...) or that it cannot hold it. :class:`Storage` is
that answer for a whole schema, and :func:`convert_array` turns values into the stored types without
changing any value's row fingerprint (``docs/fingerprint.md``): it rescales units with overflow checks,
floors ``date64`` to days, decodes or re-encodes dictionaries and renames nested fields. A value that does
not fit the stored type (a ``timestamp[s]`` beyond the ``timestamp[ms]`` range) is a SchemaError naming
the field, never a silent change.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from dsm.arrow_types import list_view_as_list, placeholders_nulled, whole
from dsm.errors import SchemaError
from dsm.schema_memo import SchemaMemo

__all__ = ["Storage", "convert_array", "convert_batch", "same_type"]

_MS_PER_DAY = 86_400_000
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_FACTORS = {("s", "ms"): 1000, ("ms", "us"): 1000, ("us", "ns"): 1000, ("s", "us"): 10**6, ("s", "ns"): 10**9}


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal types with equal spelling: nested field names count too (Arrow's ``equals`` ignores some)."""
    return bool(a.equals(b)) and str(a) == str(b)


@dataclass(frozen=True, kw_only=True)
class Storage:
    """What a format makes of ``source``: the schema its files hold and read back as (``schema``), one
    line per field whose type changes on the way (``changes``), and why it cannot hold the others
    (``problems``; ``schema`` is only meaningful when there are none)."""

    format: str
    source: pa.Schema
    schema: pa.Schema
    changes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @cached_property
    def converts(self) -> bool:
        """Whether batches of ``source`` need :meth:`convert` before they are written (a type changes, or
        a dictionary may hold a null among its values, which is moved into its indices)."""
        return bool(_columns_to_convert(self.source, self.schema))

    def retyped(self) -> dict[str, str]:
        """``{field: "source type -> stored type"}`` for the fields whose type the format changes."""
        return {
            a.name: f"{a.type} -> {b.type}"
            for a, b in zip(self.source, self.schema, strict=True)
            if not a.type.equals(b.type) or str(a.type) != str(b.type)
        }

    def check(self) -> None:
        """Raise SchemaError listing every field the format cannot hold."""
        if self.problems:
            raise SchemaError(f"format {self.format} cannot hold this schema: {'; '.join(self.problems)}")

    def convert(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` (of ``source``) with the stored types; the same row fingerprint."""
        self.check()
        return convert_batch(batch, self.schema)


def _has_dictionary(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        return True
    return any(_has_dictionary(kind.field(i).type) for i in range(kind.num_fields))


def _convert_plan(source: pa.Schema, target: pa.Schema) -> tuple[int, ...]:
    """The columns :func:`convert_array` changes on the way from ``source`` to ``target``: a type that
    differs, or a dictionary (a null among its values moves into its indices); the rest pass as they are."""
    return tuple(
        i
        for i, (a, b) in enumerate(zip(source, target, strict=True))
        if not a.type.equals(b.type) or _has_dictionary(a.type)
    )


_columns_to_convert = SchemaMemo(_convert_plan)


def convert_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with its columns converted to ``schema``'s types (same names, same order)."""
    if batch.num_columns != len(schema):
        raise ValueError(f"a batch of {batch.num_columns} columns cannot take a schema of {len(schema)}")
    arrays = batch.columns
    for i in _columns_to_convert(batch.schema, schema):
        field = schema.field(i)
        try:
            arrays[i] = convert_array(arrays[i], field.type)
        except SchemaError as exc:
            raise SchemaError(f'field "{field.name}": {exc}') from None
        except pa.ArrowException as exc:  # an index type too narrow for the values, a string too long...
            raise SchemaError(f'field "{field.name}": its values do not fit {field.type} ({exc})') from None
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _mask(array: pa.Array) -> pa.Array | None:
    return array.is_null() if array.null_count else None


def _integers(array: pa.Array, width: int) -> np.ndarray:
    """The integers a temporal array stores (nulls as 0), as int64."""
    storage = array.view(pa.int32() if width == 32 else pa.int64())
    if storage.null_count:
        storage = storage.fill_null(0)
    return np.asarray(storage.to_numpy(zero_copy_only=False), dtype=np.int64)


def _from_integers(values: np.ndarray, target: pa.DataType, array: pa.Array) -> pa.Array:
    width = 32 if target.bit_width == 32 else 64
    low, high = _INT32 if width == 32 else _INT64
    if len(values) and (values.min() < low or values.max() > high):
        raise SchemaError(f"a value of type {array.type} is outside the range of {target}, which holds it")
    storage = pa.array(values.astype(np.int32 if width == 32 else np.int64), mask=_null_mask(array))
    return storage.view(target)


def _null_mask(array: pa.Array) -> np.ndarray | None:
    if not array.null_count:
        return None
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _rescaled(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Times, timestamps and durations in a finer unit: exact, or a SchemaError when a value overflows."""
    factor = _FACTORS[(array.type.unit, target.unit)]
    values = _integers(array, array.type.bit_width)
    limit = _INT64[1] // factor
    if len(values) and (values.min() < -limit or values.max() > limit):
        raise SchemaError(f"a value of type {array.type} is outside the range of {target}, which holds it")
    return _from_integers(values * factor, target, array)


def _dictionary(array: pa.DictionaryArray, target: pa.DataType) -> pa.Array:
    array = placeholders_nulled(array)
    if not pa.types.is_dictionary(target):
        return convert_array(array.dictionary_decode(), target)
    dictionary = array.dictionary
    if not dictionary.null_count and same_type(array.type, target):
        return array
    if dictionary.null_count:
        # A null among the dictionary's values (which Parquet cannot write): re-encoded, nulls in the indices.
        encoded = convert_array(array.dictionary_decode(), target.value_type).dictionary_encode()
        indices, dictionary = encoded.indices, encoded.dictionary
    else:
        indices, dictionary = array.indices, convert_array(dictionary, target.value_type)
    indices = indices.cast(target.index_type, safe=True)
    return pa.DictionaryArray.from_arrays(indices, dictionary, ordered=target.ordered)


def _list_values(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The offsets (from 0) and the values a list array's slots use."""
    import pyarrow.compute as pc

    offsets = array.offsets
    start, stop = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, offsets[0]), array.values.slice(start, stop - start)


def _nested(array: pa.Array, target: pa.DataType) -> pa.Array | None:
    """Struct, list and map arrays rebuilt from converted children; None for other types."""
    source = array.type
    if pa.types.is_struct(source) and pa.types.is_struct(target) and source.num_fields == target.num_fields:
        children = [convert_array(array.field(i), target.field(i).type) for i in range(target.num_fields)]
        fields = [target.field(i) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=_mask(array))
    if pa.types.is_map(source) and pa.types.is_map(target):
        offsets, entries = _list_values(array)
        keys = convert_array(entries.field(0), target.key_type)
        items = convert_array(entries.field(1), target.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=_mask(array))
    lists = (pa.types.is_list, pa.types.is_large_list)
    for test in lists:
        if test(source) and test(target):
            offsets, values = _list_values(array)
            values = convert_array(values, target.value_type)
            return type(array).from_arrays(offsets, values, type=target, mask=_mask(array))
    views = (pa.types.is_list_view, pa.types.is_large_list_view)
    for test in views:
        if test(source) and test(target):
            values = convert_array(array.values, target.value_type)
            # Copies of the offsets and sizes: pyarrow refuses sliced ones beside a validity mask.
            offsets, sizes = (pa.concat_arrays([a, a.slice(0, 0)]) for a in (array.offsets, array.sizes))
            return type(array).from_arrays(offsets, sizes, values, type=target, mask=_mask(array))
    if pa.types.is_fixed_size_list(source) and pa.types.is_fixed_size_list(target):
        size = source.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        values = convert_array(values, target.value_type)
        return pa.FixedSizeListArray.from_arrays(values, type=target, mask=_mask(array))
    return None


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind))


def _is_bytes(kind: pa.DataType) -> bool:
    return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind))


def convert_array(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """``array`` as ``target`` with every value's row fingerprint unchanged; SchemaError if that cannot be.

    Only conversions that are exact by construction are done; any other pair is refused, so a format
    that declares a stored type dsm cannot reach is caught in tests, not in a published version.
    """
    array = whole(array)
    source = array.type
    if pa.types.is_dictionary(source):
        return _dictionary(array, target)
    if pa.types.is_dictionary(target):  # values encoded: the dictionary of what the values are
        encoded = convert_array(array, target.value_type).dictionary_encode()
        indices = encoded.indices.cast(target.index_type, safe=True)
        return pa.DictionaryArray.from_arrays(indices, encoded.dictionary, ordered=target.ordered)
    if source.equals(target) and not _has_dictionary(source):
        return array  # the same values; nested field names are the writer's (and no fingerprint's) concern
    nested = _nested(array, target)
    if nested is not None:
        return nested
    if pa.types.is_date64(source) and pa.types.is_date32(target):
        days = np.floor_divide(_integers(array, 64), _MS_PER_DAY)  # the fingerprint's days, floored
        return _from_integers(days, target, array)
    temporal = (pa.types.is_timestamp, pa.types.is_time, pa.types.is_duration)
    for test in temporal:
        same_zone = not pa.types.is_timestamp(source) or source.tz == target.tz
        if test(source) and test(target) and (source.unit, target.unit) in _FACTORS and same_zone:
            return _rescaled(array, target)
    views = (pa.types.is_list_view(source) and pa.types.is_list(target)) or (
        pa.types.is_large_list_view(source) and pa.types.is_large_list(target)
    )
    if views:
        return convert_array(list_view_as_list(array), target)
    if (_is_text(source) and _is_text(target)) or (_is_bytes(source) and _is_bytes(target)):
        try:
            return array.cast(target, safe=True)
        except (pa.ArrowException, ValueError) as exc:
            raise SchemaError(f"{source} values do not fit {target} ({exc})") from None
    raise SchemaError(f"dsm has no exact conversion from {source} to {target}")
