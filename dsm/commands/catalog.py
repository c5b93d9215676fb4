"""Registry commands: ``dsm ls``, ``dsm show``, ``dsm alias``, ``dsm schema``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsm.contract import Contract, contract_json_schema
from dsm.registry import AliasMove, Registry, open_registry, parse_reference, resolve

__all__ = ["DatasetEntry", "alias", "contract_schema", "ls", "show"]


@dataclass(frozen=True, kw_only=True)
class DatasetEntry:
    """One dataset in the registry: its versions, the latest one's summary, and its aliases.

    ``statuses`` holds the versions whose status changed after they were written (``deprecated`` by a
    cutover, ``retired`` once their data was deleted)."""

    name: str
    versions: tuple[int, ...]
    aliases: Mapping[str, int]
    latest: Contract
    statuses: Mapping[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "versions": list(self.versions),
            "aliases": dict(self.aliases),
            "latest": self.latest.version,
            "format": self.latest.format,
            "status": self.latest.status,
            "shards": len(self.latest.shards),
            "rows": self.latest.total_rows,
            "bytes": self.latest.total_bytes,
            "location": self.latest.location,
            "statuses": {str(v): s for v, s in sorted(self.statuses.items())},
        }


def ls(
    *, registry: str | Registry | None = None, storage_options: Mapping[str, Any] | None = None
) -> list[DatasetEntry]:
    """Every dataset in the registry, by name."""
    reg = open_registry(registry, storage_options)
    entries = []
    for name in reg.names():
        versions = reg.versions(name)
        entries.append(
            DatasetEntry(
                name=name,
                versions=tuple(versions),
                aliases=reg.aliases(name),
                latest=reg.get(name, versions[-1]),
                statuses={v: s.status for v, s in reg.statuses(name).items()},
            )
        )
    return entries


def show(
    ref: str, *, registry: str | Registry | None = None, storage_options: Mapping[str, Any] | None = None
) -> Contract:
    """The contract a reference names."""
    return resolve(ref, registry, storage_options)


def alias(
    name: str,
    alias: str,
    version: int,
    *,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> AliasMove:
    """Point ``NAME@ALIAS`` at ``version`` atomically; the result says where it pointed before."""
    parse_reference(name)
    return open_registry(registry, storage_options).set_alias(name, alias, version)


def contract_schema() -> dict[str, Any]:
    """The JSON Schema of contract files."""
    return contract_json_schema()
