"""``dsm diff``: two contracts side by side, and whether readers of the first can read the second.

The verdict is for a reader written against OLD:

- **breaking**: a field removed; a type narrowed (``int64`` -> ``int32``) or changed to another kind
  (``int64`` -> ``string``, a timestamp's unit or time zone); nullability tightened (the old contract
  allowed nulls, the new forbids them) or relaxed (the old one promised no nulls); a key changed or removed.
- **compatible**: a field added; a type widened (``int32`` -> ``int64``, ``float32`` -> ``float64``,
  ``uint16`` -> ``int32``, ``string`` -> ``large_string``, ``binary`` -> ``large_binary``, ``list`` ->
  ``large_list``, a decimal with at least as many integer and fraction digits); a dictionary encoding added
  or removed; annotations (role, classification, media type) changed; fields reordered; a key added.
- **identical**: none of the above.

Nested types (struct fields, list items, map keys and values) are compared the same way, field by field
(:mod:`dsm.validators.compatibility` judges; this module lays the two contracts side by side).

>>> d = diff("web-text@3", "web-text@4")  # doctest: +SKIP
>>> d.verdict, [c.field for c in d.breaking]  # doctest: +SKIP
('breaking', ['score'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsm.contract import Contract, Schema
from dsm.registry import Registry, open_registry
from dsm.validators.compatibility import FieldChange, compare_schemas, verdict

if TYPE_CHECKING:
    from dsm.engine import Progress
    from dsm.inspect.rowdiff import RowDiff

__all__ = [
    "VERDICTS",
    "ContractDiff",
    "FieldChange",
    "FieldRow",
    "PropertyRow",
    "compare_schemas",
    "diff",
    "diff_rows",
]

VERDICTS = ("identical", "compatible", "breaking")


@dataclass(frozen=True, kw_only=True)
class FieldRow:
    """A top-level field side by side: its type in each contract (None where it is absent)."""

    name: str
    old: str | None
    new: str | None
    change: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "old": self.old, "new": self.new, "change": self.change}


@dataclass(frozen=True, kw_only=True)
class PropertyRow:
    """A contract property side by side (format, location, shards, rows, fingerprint...)."""

    item: str
    old: Any
    new: Any

    @property
    def same(self) -> bool:
        return bool(self.old == self.new)

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.item, "old": self.old, "new": self.new, "same": self.same}


@dataclass(frozen=True, kw_only=True)
class ContractDiff:
    """Two contracts side by side and the compatibility verdict for readers of ``old``."""

    old: str
    new: str
    changes: tuple[FieldChange, ...]
    fields: tuple[FieldRow, ...]
    properties: tuple[PropertyRow, ...]

    @property
    def breaking(self) -> list[FieldChange]:
        return [c for c in self.changes if c.breaking]

    @property
    def verdict(self) -> str:
        return verdict(self.changes)

    @property
    def compatible(self) -> bool:
        return not self.breaking

    @property
    def same_rows(self) -> bool | None:
        """Whether both hold the same multiset of rows (their unordered fingerprints), None if unknown."""
        row = next((p for p in self.properties if p.item == "fingerprint.unordered"), None)
        if row is None or row.old is None or row.new is None:
            return None
        return row.same

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "verdict": self.verdict,
            "compatible": self.compatible,
            "same_rows": self.same_rows,
            "changes": [c.to_dict() for c in self.changes],
            "fields": [f.to_dict() for f in self.fields],
            "properties": [p.to_dict() for p in self.properties],
        }


def _field_rows(old: Schema, new: Schema, changes: tuple[FieldChange, ...]) -> tuple[FieldRow, ...]:
    by_field: dict[str, list[str]] = {}
    for change in changes:
        top = change.field.split(".")[0].split("[")[0].split("{")[0]
        by_field.setdefault(top, []).append(change.change)
    old_types = {f.name: f.type + ("" if f.nullable else " not null") for f in old.fields}
    new_types = {f.name: f.type + ("" if f.nullable else " not null") for f in new.fields}
    names = [f.name for f in old.fields] + [f.name for f in new.fields if f.name not in old_types]
    return tuple(
        FieldRow(
            name=name,
            old=old_types.get(name),
            new=new_types.get(name),
            change=", ".join(by_field.get(name, [])) or "same",
        )
        for name in names
    )


def _properties(old: Contract, new: Contract) -> tuple[PropertyRow, ...]:
    def fp(c: Contract, which: str) -> str | None:
        return getattr(c.fingerprint, which) if c.fingerprint else None

    items: list[tuple[str, Any, Any]] = [
        ("version", old.version, new.version),
        ("status", old.status, new.status),
        ("format", old.format, new.format),
        ("format_options", dict(old.format_options), dict(new.format_options)),
        ("location", old.location, new.location),
        ("shards", len(old.shards), len(new.shards)),
        ("rows", old.total_rows, new.total_rows),
        ("bytes", old.total_bytes, new.total_bytes),
        ("fingerprint.unordered", fp(old, "unordered"), fp(new, "unordered")),
        ("fingerprint.ordered", fp(old, "ordered"), fp(new, "ordered")),
        ("key", list(old.schema.key), list(new.schema.key)),
        ("owners", list(old.owners), list(new.owners)),
        ("lineage", _lineage(old), _lineage(new)),
    ]
    return tuple(PropertyRow(item=item, old=a, new=b) for item, a, b in items)


def _lineage(contract: Contract) -> str | None:
    if contract.lineage is None:
        return None
    parent = f" of {contract.lineage.parent}" if contract.lineage.parent else ""
    return f"{contract.lineage.operation}{parent}"


def diff(
    old: str | Contract,
    new: str | Contract,
    *,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ContractDiff:
    """Compare two contracts (any references: ``NAME@3``, ``NAME@prod``, a contract file) for readers of
    ``old``; see the module docstring for what is breaking. Reads contracts only, never data."""
    reg = open_registry(registry, storage_options)
    a, b = reg.resolve(old), reg.resolve(new)
    changes = compare_schemas(a.schema, b.schema)
    return ContractDiff(
        old=a.ref,
        new=b.ref,
        changes=changes,
        fields=_field_rows(a.schema, b.schema, changes),
        properties=_properties(a, b),
    )


def diff_rows(
    old: str | Contract,
    new: str | Contract,
    *,
    key: Sequence[str] | None = None,
    sample: int = 10,
    memory_limit: int | str = "256MB",
    workers: int | None = None,
    workdir: str | None = None,
    use_fingerprints: bool = True,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    progress: Progress | None = None,
) -> RowDiff:
    """Rows added, removed and changed from ``old`` to ``new``: matched by ``key`` (default: the contract's
    key), else by position. Changed-cell counts per column and a sample of each kind come with the counts;
    shards whose fingerprints are equal are skipped unread. Memory stays within about ``memory_limit`` of
    hashed rows per partition, spilled to ``workdir`` (default: the system's temporary folder), whatever the
    datasets' sizes. See :mod:`dsm.inspect.rowdiff`.

    >>> d = diff_rows("web-text@3", "web-text@4", key=["id"])  # doctest: +SKIP
    >>> d.added, d.removed, d.changed, d.changed_cells["text"]  # doctest: +SKIP
    (500, 500, 1000, 1000)
    """
    from dsm.inspect.rowdiff import compare_rows
    from dsm.inspect.source import open_rows
    from dsm.units import parse_size

    limit = parse_size(memory_limit, what="memory_limit")
    reg = open_registry(registry, storage_options)
    sides = [
        open_rows(
            ref,
            registry=reg,
            unmask=unmask,
            reason=reason,
            command="diff --rows",
            storage_options=storage_options,
            cache_dir=cache_dir,
        )
        for ref in (old, new)
    ]
    with compare_rows(
        sides[0],
        sides[1],
        key=key,
        sample=sample,
        memory_limit=limit,
        workers=workers,
        workdir=workdir,
        use_fingerprints=use_fingerprints,
        progress=progress,
    ) as run:
        return run.summary
