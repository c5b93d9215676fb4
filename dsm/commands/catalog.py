"""Registry commands: ``dsm ls``, ``dsm show``, ``dsm alias``, ``dsm schema``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsm.contract import Contract, contract_json_schema
from dsm.errors import InputError
from dsm.registry import AliasMove, Registry, open_registry, parse_reference, resolve
from dsm.storage import redact

__all__ = ["DatasetEntry", "alias", "contract_schema", "ls", "show"]


@dataclass(frozen=True, kw_only=True)
class DatasetEntry:
    """One dataset in the registry: its versions, the latest one's summary, and its aliases.

    ``statuses`` holds the versions whose status changed after they were written (``deprecated`` by a
    cutover, ``retired`` once their data was deleted). A dataset whose registry files cannot be read (not
    UTF-8, not a contract) has ``latest`` None and ``problem`` naming the file and what is wrong with it;
    the other datasets are listed as usual."""

    name: str
    versions: tuple[int, ...]
    aliases: Mapping[str, int]
    latest: Contract | None
    statuses: Mapping[int, str] = field(default_factory=dict)
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        latest = self.latest
        out: dict[str, Any] = {
            "name": self.name,
            "versions": list(self.versions),
            "aliases": dict(self.aliases),
            "latest": latest.version if latest else None,
            "format": latest.format if latest else None,
            "status": latest.status if latest else None,
            "shards": len(latest.shards) if latest else None,
            "rows": latest.total_rows if latest else None,
            "bytes": latest.total_bytes if latest else None,
            "location": latest.location if latest else None,
            "statuses": {str(v): s for v, s in sorted(self.statuses.items())},
        }
        if self.problem is not None:
            out["problem"] = self.problem
        return out


def ls(
    *, registry: str | Registry | None = None, storage_options: Mapping[str, Any] | None = None
) -> list[DatasetEntry]:
    """Every dataset in the registry, by name. One dataset's unreadable file does not hide the others: its
    entry says what is wrong (``problem``)."""
    reg = open_registry(registry, storage_options)
    entries = []
    for name in reg.names():
        versions = reg.versions(name)
        try:
            entry = DatasetEntry(
                name=name,
                versions=tuple(versions),
                aliases=reg.aliases(name),
                latest=reg.get(name, versions[-1]),
                statuses={v: s.status for v, s in reg.statuses(name).items()},
            )
        except InputError as exc:  # a file of this dataset does not load; StorageError is not its own
            entry = DatasetEntry(
                name=name, versions=tuple(versions), aliases={}, latest=None, problem=redact(str(exc))
            )
        entries.append(entry)
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
