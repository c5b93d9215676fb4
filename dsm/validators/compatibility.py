"""Whether readers of one schema can read another: every difference, classified breaking or compatible.

The verdict is for a reader written against OLD:

- **breaking**: a field removed; a type narrowed (``int64`` -> ``int32``) or changed to another kind
  (``int64`` -> ``string``, a timestamp's unit or time zone); nullability tightened (the old contract
  allowed nulls, the new forbids them) or relaxed (the old one promised no nulls); a key changed or removed.
- **compatible**: a field added; a type widened (``int32`` -> ``int64``, ``float32`` -> ``float64``,
  ``uint16`` -> ``int32``, ``string`` -> ``large_string``, ``binary`` -> ``large_binary``, ``list`` ->
  ``large_list``, a decimal with at least as many integer and fraction digits); a dictionary encoding added
  or removed; annotations (role, classification, media type) changed; fields reordered; a key added.

Nested types (struct fields, list items, map keys and values) are compared the same way, field by field.
``dsm diff`` (:mod:`dsm.commands.diff`) and a cutover's plan and verify stages judge with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dsm.arrow_types import parse_type
from dsm.contract import Field, Schema

__all__ = ["FieldChange", "compare_schemas", "verdict"]

_SIGNED = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_UNSIGNED = {pa.uint8(): 8, pa.uint16(): 16, pa.uint32(): 32, pa.uint64(): 64}
_FLOATS = {pa.float16(): 16, pa.float32(): 32, pa.float64(): 64}
_LARGER = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}


@dataclass(frozen=True, kw_only=True)
class FieldChange:
    """One difference in the schema. ``field`` is a path (``meta.source``, ``tags[]``, ``attrs{}``)."""

    field: str
    change: str
    old: str | None
    new: str | None
    breaking: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "change": self.change,
            "old": self.old,
            "new": self.new,
            "breaking": self.breaking,
            "detail": self.detail,
        }


# ----------------------------------------------------------------------------------------------- types


def _widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether every value of ``old`` is a value of ``new`` of the same kind (a lossless widening)."""
    if old in _SIGNED and new in _SIGNED:
        return _SIGNED[new] > _SIGNED[old]
    if old in _UNSIGNED and new in _UNSIGNED:
        return _UNSIGNED[new] > _UNSIGNED[old]
    if old in _UNSIGNED and new in _SIGNED:
        return _SIGNED[new] > _UNSIGNED[old]
    if old in _FLOATS and new in _FLOATS:
        return _FLOATS[new] > _FLOATS[old]
    if old in _LARGER and _LARGER[old].equals(new):
        return True
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return (
            new.scale >= old.scale
            and new.precision - new.scale >= old.precision - old.scale
            and not (
                new.precision == old.precision and new.scale == old.scale and new.bit_width <= old.bit_width
            )
        )
    return False


def _type_text(kind: pa.DataType) -> str:
    return str(kind)


def _compare_types(path: str, old: pa.DataType, new: pa.DataType) -> list[FieldChange]:
    if old.equals(new):
        return []
    if pa.types.is_dictionary(old) or pa.types.is_dictionary(new):
        old_values = old.value_type if pa.types.is_dictionary(old) else old
        new_values = new.value_type if pa.types.is_dictionary(new) else new
        inner = _compare_types(path, old_values, new_values)
        encoding = FieldChange(
            field=path,
            change="encoding_changed",
            old=_type_text(old),
            new=_type_text(new),
            breaking=False,
            detail="dictionary encoding added or removed: the values read are the same",
        )
        return [encoding, *inner]
    if _widens(old, new):
        return [
            FieldChange(
                field=path,
                change="type_widened",
                old=_type_text(old),
                new=_type_text(new),
                breaking=False,
                detail=f"every {old} value is a {new} value",
            )
        ]
    if _widens(new, old):
        return [
            FieldChange(
                field=path,
                change="type_narrowed",
                old=_type_text(old),
                new=_type_text(new),
                breaking=True,
                detail=f"{new} cannot hold every {old} value",
            )
        ]
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return _compare_fields(
            path + ".",
            [old.field(i) for i in range(old.num_fields)],
            [new.field(i) for i in range(new.num_fields)],
        )
    lists = (pa.types.is_list, pa.types.is_large_list)
    if any(f(old) for f in lists) and any(f(new) for f in lists):
        changes = []
        if pa.types.is_list(old) and pa.types.is_large_list(new):
            changes.append(
                FieldChange(
                    field=path,
                    change="type_widened",
                    old="list",
                    new="large_list",
                    breaking=False,
                    detail="large_list holds every list",
                )
            )
        elif pa.types.is_large_list(old) and pa.types.is_list(new):
            changes.append(
                FieldChange(
                    field=path,
                    change="type_narrowed",
                    old="large_list",
                    new="list",
                    breaking=True,
                    detail="list cannot hold every large_list (offsets are 32-bit)",
                )
            )
        return changes + _compare_fields(path, [old.value_field], [new.value_field], names=("[]",))
    if pa.types.is_map(old) and pa.types.is_map(new):
        return _compare_types(path + "{key}", old.key_type, new.key_type) + _compare_fields(
            path, [old.item_field], [new.item_field], names=("{}",)
        )
    return [
        FieldChange(
            field=path,
            change="type_changed",
            old=_type_text(old),
            new=_type_text(new),
            breaking=True,
            detail=f"{old} values do not read as {new}",
        )
    ]


def _nullability(path: str, old_nullable: bool, new_nullable: bool) -> list[FieldChange]:
    if old_nullable == new_nullable:
        return []
    if old_nullable:
        return [
            FieldChange(
                field=path,
                change="nullability_tightened",
                old="nullable",
                new="not null",
                breaking=True,
                detail="the old contract allowed nulls here; the new one forbids them",
            )
        ]
    return [
        FieldChange(
            field=path,
            change="nullability_relaxed",
            old="not null",
            new="nullable",
            breaking=True,
            detail="readers of the old contract were promised no nulls here",
        )
    ]


def _compare_fields(
    prefix: str, old: list[pa.Field], new: list[pa.Field], names: tuple[str, ...] | None = None
) -> list[FieldChange]:
    """Nested fields (struct children, or with ``names`` a list item / map value paired positionally)."""
    changes: list[FieldChange] = []
    if names is not None:
        for label, a, b in zip(names, old, new, strict=True):
            path = prefix + label
            changes += _nullability(path, a.nullable, b.nullable) + _compare_types(path, a.type, b.type)
        return changes
    new_by_name = {f.name: f for f in new}
    old_names = {f.name for f in old}
    for a in old:
        path = prefix + a.name
        b = new_by_name.get(a.name)
        if b is None:
            changes.append(
                FieldChange(
                    field=path,
                    change="removed",
                    old=_type_text(a.type),
                    new=None,
                    breaking=True,
                    detail="readers of the old contract read this field",
                )
            )
            continue
        changes += _nullability(path, a.nullable, b.nullable) + _compare_types(path, a.type, b.type)
    for b in new:
        if b.name not in old_names:
            changes.append(
                FieldChange(
                    field=prefix + b.name,
                    change="added",
                    old=None,
                    new=_type_text(b.type),
                    breaking=False,
                    detail="a new field; readers of the old contract do not see it",
                )
            )
    return changes


_ANNOTATIONS = ("role", "classification", "media_type")


def _annotation_changes(old: Field, new: Field) -> list[FieldChange]:
    changes = []
    for name in _ANNOTATIONS:
        a, b = getattr(old, name), getattr(new, name)
        if a != b:
            changes.append(
                FieldChange(
                    field=old.name,
                    change=f"{name}_changed",
                    old=a,
                    new=b,
                    breaking=False,
                    detail=f"{name} {a or '(none)'} -> {b or '(none)'}"
                    + ("; governance tags are not kept" if name == "classification" and a and not b else ""),
                )
            )
    return changes


def compare_schemas(old: Schema, new: Schema) -> tuple[FieldChange, ...]:
    """Every difference between ``old`` and ``new`` that a reader of ``old`` could notice, classified.

    >>> a = Schema(fields=(Field(name="id", type="int32"),))
    >>> [(c.change, c.breaking) for c in compare_schemas(a, Schema(fields=(Field(name="id", type="int64"),)))]
    [('type_widened', False)]
    """
    old_arrow = [pa.field(f.name, parse_type(f.type), nullable=f.nullable) for f in old.fields]
    new_arrow = [pa.field(f.name, parse_type(f.type), nullable=f.nullable) for f in new.fields]
    changes = _compare_fields("", old_arrow, new_arrow)
    new_fields = {f.name: f for f in new.fields}
    for field in old.fields:
        if field.name in new_fields:
            changes += _annotation_changes(field, new_fields[field.name])
    common_old = [f.name for f in old.fields if f.name in new_fields]
    common_new = [f.name for f in new.fields if f.name in {f.name for f in old.fields}]
    if common_old != common_new:
        changes.append(
            FieldChange(
                field="(fields)",
                change="reordered",
                old=", ".join(common_old),
                new=", ".join(common_new),
                breaking=False,
                detail="fields are read by name; their order changed",
            )
        )
    if old.key != new.key:
        breaking = bool(old.key)
        changes.append(
            FieldChange(
                field="(key)",
                change="key_changed" if old.key and new.key else ("key_removed" if old.key else "key_added"),
                old=", ".join(old.key) or None,
                new=", ".join(new.key) or None,
                breaking=breaking,
                detail="readers of the old contract look rows up by its key"
                if breaking
                else "a key was added",
            )
        )
    return tuple(changes)


def verdict(changes: tuple[FieldChange, ...] | list[FieldChange]) -> str:
    """``breaking`` if any change is, else ``compatible`` if there is any, else ``identical``."""
    if any(c.breaking for c in changes):
        return "breaking"
    return "compatible" if changes else "identical"
