"""The storage-class table of ``dsm footprint``: the copies each storage class keeps of a byte, and its price.

The table ships with dsm (``storage_classes.yaml`` beside this module, illustrative figures) and is replaced
with ``--storage-classes FILE`` (same layout), like the cutover's price table (docs/lifecycle.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from dsm.commands.cutover.prices import load_yaml_table
from dsm.errors import ContractError

__all__ = ["STORAGE_CLASS_TABLE_VERSION", "StorageClass", "StorageClassTable", "load_storage_classes"]

STORAGE_CLASS_TABLE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class StorageClass:
    """One storage class: the copies of each byte it keeps, and its price if it has its own."""

    name: str
    copies: float
    storage_per_gb_month: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"copies": self.copies}
        if self.storage_per_gb_month is not None:
            out["storage_per_gb_month"] = self.storage_per_gb_month
        return out


@dataclass(frozen=True, kw_only=True)
class StorageClassTable:
    """Storage classes by store (``s3``, ``az``, ``file``...), each store with its default class."""

    stores: Mapping[str, Mapping[str, StorageClass]]
    defaults: Mapping[str, str]
    aliases: Mapping[str, str]
    source: str = "built-in"

    def store_name(self, protocol: str) -> str:
        return self.aliases.get(protocol, protocol)

    def lookup(self, protocol: str, name: str | None) -> tuple[str, StorageClass, str | None]:
        """(class name, class, note): the class ``name`` of the store behind ``protocol`` (its default
        class when ``name`` is None). A store or class the table does not list counts one copy."""
        store = self.store_name(protocol)
        classes = self.stores.get(store)
        if classes is None:
            chosen = name or "default"
            return chosen, StorageClass(name=chosen, copies=1.0), f"{store} is not in {self.source}: 1 copy"
        chosen = name or self.defaults[store]
        found = classes.get(chosen)
        if found is None:
            return (
                chosen,
                StorageClass(name=chosen, copies=1.0),
                f"{store} class {chosen} is not in {self.source}",
            )
        return chosen, found, None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STORAGE_CLASS_TABLE_VERSION,
            "stores": {
                store: {
                    "default": self.defaults[store],
                    "classes": {n: c.to_dict() for n, c in classes.items()},
                }
                for store, classes in self.stores.items()
            },
            "aliases": dict(self.aliases),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str) -> StorageClassTable:
        """Validate a storage-class table; errors name ``source`` and the field."""
        if not isinstance(data, Mapping):
            raise ContractError(f"{source}: a storage-class table is a YAML mapping")
        if data.get("version", STORAGE_CLASS_TABLE_VERSION) != STORAGE_CLASS_TABLE_VERSION:
            raise ContractError(f"{source}: field version: this dsm reads storage-class tables of version 1")
        raw = data.get("stores")
        if not isinstance(raw, Mapping) or not raw:
            raise ContractError(f"{source}: field stores: a mapping of store name to its classes")
        stores: dict[str, dict[str, StorageClass]] = {}
        defaults: dict[str, str] = {}
        known = {f.name for f in fields(StorageClass)} - {"name"}
        for store, entry in raw.items():
            where = f"{source}: field stores.{store}"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("classes"), Mapping):
                raise ContractError(f"{where}: expected {{default: NAME, classes: {{NAME: {{copies: N}}}}}}")
            classes = {}
            for name, spec in entry["classes"].items():
                at = f"{where}.classes.{name}"
                if not isinstance(spec, Mapping):
                    raise ContractError(f"{at}: expected a mapping with copies")
                unknown = sorted(set(spec) - known)
                if unknown:
                    raise ContractError(f"{at}: unknown fields {unknown}; known: {', '.join(sorted(known))}")
                copies = spec.get("copies")
                if isinstance(copies, bool) or not isinstance(copies, (int, float)) or copies < 1:
                    raise ContractError(f"{at}.copies: expected a number at least 1, got {copies!r}")
                price = spec.get("storage_per_gb_month")
                if price is not None and (
                    isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0
                ):
                    raise ContractError(
                        f"{at}.storage_per_gb_month: expected a number at least 0, got {price!r}"
                    )
                classes[str(name)] = StorageClass(
                    name=str(name),
                    copies=float(copies),
                    storage_per_gb_month=None if price is None else float(price),
                )
            default = entry.get("default")
            if default not in classes:
                raise ContractError(
                    f"{where}.default: {default!r} is not one of its classes ({', '.join(classes)})"
                )
            stores[str(store)] = classes
            defaults[str(store)] = str(default)
        aliases = data.get("aliases") or {}
        if not isinstance(aliases, Mapping):
            raise ContractError(f"{source}: field aliases: a mapping of protocol to store name")
        return cls(
            stores=stores,
            defaults=defaults,
            aliases={str(k): str(v) for k, v in aliases.items()},
            source=source,
        )


def load_storage_classes(
    path: str | None = None, *, storage_options: Mapping[str, Any] | None = None
) -> StorageClassTable:
    """The storage-class table in ``path`` (YAML at any fsspec URL), or the one shipped with dsm."""
    data, source = load_yaml_table(
        path,
        package="dsm.commands.footprint",
        resource="storage_classes.yaml",
        what="storage-class table",
        storage_options=storage_options,
    )
    return StorageClassTable.from_dict(data, source=source)
