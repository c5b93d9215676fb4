"""The price table a cutover plan estimates cost with: per GB moved, per 1,000 requests, per GB-month stored.

The defaults ship with dsm (``dsm/commands/cutover/prices.yaml``, illustrative list prices); ``--prices FILE``
replaces them with a file of the same layout. Prices are looked up by storage protocol (``s3``, ``az``,
``gs``, ``file``...), through ``aliases`` (``abfs`` -> ``az``), else under ``default``.

>>> table = load_prices()
>>> table.store("abfss").storage_per_gb_month > 0, table.store("file").transfer_out_per_gb
(True, 0.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

from dsm.contract import check_contract_size, load_yaml
from dsm.errors import ContractError
from dsm.storage import location, redact

__all__ = ["PriceTable", "StorePrices", "load_prices", "load_yaml_table"]

PRICE_TABLE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class StorePrices:
    """What one kind of store charges (in the table's currency)."""

    transfer_out_per_gb: float
    transfer_within_per_gb: float
    write_per_gb: float
    read_requests_per_1000: float
    write_requests_per_1000: float
    storage_per_gb_month: float

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class PriceTable:
    """Prices by store, the currency, and the sizes that turn bytes into GB and requests."""

    currency: str
    gb: int
    request_bytes: int
    stores: Mapping[str, StorePrices]
    aliases: Mapping[str, str]
    source: str = "built-in"

    def store(self, protocol: str) -> StorePrices:
        """The prices of the store behind ``protocol`` (``default`` when the table does not list it)."""
        name = self.aliases.get(protocol, protocol)
        return self.stores.get(name) or self.stores["default"]

    def store_name(self, protocol: str) -> str:
        name = self.aliases.get(protocol, protocol)
        return name if name in self.stores else "default"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PRICE_TABLE_VERSION,
            "currency": self.currency,
            "gb": self.gb,
            "request_bytes": self.request_bytes,
            "stores": {k: v.to_dict() for k, v in self.stores.items()},
            "aliases": dict(self.aliases),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str) -> PriceTable:
        """Validate a price table; errors name ``source`` and the field."""
        if not isinstance(data, Mapping):
            raise ContractError(f"{source}: a price table is a YAML mapping")
        version = data.get("version", PRICE_TABLE_VERSION)
        if version != PRICE_TABLE_VERSION:
            raise ContractError(f"{source}: field version: this dsm reads price tables of version 1")
        stores_raw = data.get("stores")
        if not isinstance(stores_raw, Mapping) or "default" not in stores_raw:
            raise ContractError(f"{source}: field stores: a mapping of store name to prices, with 'default'")
        names = [f.name for f in fields(StorePrices)]
        stores = {}
        for store, prices in stores_raw.items():
            if not isinstance(prices, Mapping):
                raise ContractError(f"{source}: field stores.{store}: a mapping of price name to number")
            unknown = sorted(set(prices) - set(names))
            if unknown:
                raise ContractError(
                    f"{source}: field stores.{store}: unknown prices {unknown}; known: {', '.join(names)}"
                )
            values = {}
            for name in names:
                value = prices.get(name, stores_raw["default"].get(name) if store != "default" else None)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise ContractError(
                        f"{source}: field stores.{store}.{name}: expected a number at least 0, got {value!r}"
                    )
                values[name] = float(value)
            stores[str(store)] = StorePrices(**values)
        aliases = data.get("aliases") or {}
        if not isinstance(aliases, Mapping):
            raise ContractError(f"{source}: field aliases: a mapping of protocol to store name")
        gb, request_bytes = data.get("gb", 1_000_000_000), data.get("request_bytes", 8 << 20)
        for name, value in (("gb", gb), ("request_bytes", request_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ContractError(
                    f"{source}: field {name}: expected a whole number of bytes, got {value!r}"
                )
        return cls(
            currency=str(data.get("currency", "USD")),
            gb=int(gb),
            request_bytes=int(request_bytes),
            stores=stores,
            aliases={str(k): str(v) for k, v in aliases.items()},
            source=source,
        )


def load_prices(path: str | None = None, *, storage_options: Mapping[str, Any] | None = None) -> PriceTable:
    """The price table in ``path`` (a YAML file at any fsspec URL), or the one shipped with dsm."""
    data, source = load_yaml_table(
        path,
        package="dsm.commands.cutover",
        resource="prices.yaml",
        what="price table",
        storage_options=storage_options,
    )
    return PriceTable.from_dict(data, source=source)


def load_yaml_table(
    path: str | None,
    *,
    package: str,
    resource: str,
    what: str,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[Any, str]:
    """(the parsed YAML, its source) of a table users can replace (the price table, the storage classes):
    the file at ``path`` (any fsspec URL), or ``resource`` shipped in ``package`` when ``path`` is None."""
    if path is None:
        text: str | bytes = resources.files(package).joinpath(resource).read_text(encoding="utf-8")
        source = "built-in"
    else:
        parent, _, name = str(path).rstrip("/").rpartition("/")
        loc = location(parent or ".", storage_options)
        if not loc.exists(name):
            raise ContractError(f"{what} {redact(str(path))} does not exist")
        source = redact(str(path))
        check_contract_size(loc.size(name), source)
        text = loc.read_bytes(name)
    return load_yaml(text, source=source), source
