"""The registry: contracts by name and version, and aliases, in a folder at any fsspec URL.

Layout::

    NAME/versions/1.yaml, 2.yaml, ...   one file per version, created once, never overwritten
    NAME/aliases.yaml                   {alias: version}, replaced atomically (compare-and-swap)
    NAME/status.yaml                    {version: {status, reason, at, by}}: statuses given later
                                        (deprecated, retired), replaced atomically
    NAME/cutovers/ID/                   the journal and lease of a cutover (dsm.cutover)
    NAME/audit/<time>-<id>.json         one record per unmasking of classified fields: who, when, which
                                        version and fields, by which command and why; created once

A reference is ``NAME`` (its newest version that is not retired), ``NAME@3``, ``NAME@prod`` (an alias), or
a contract file path; :func:`resolve` turns one (or a :class:`Contract`, as it is) into its contract, for
every layer above.

>>> reg = Registry("memory://doc-registry")
>>> reg.names()
[]
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from dsm.contract import Contract, check_contract_size, check_shard_paths, load_yaml
from dsm.errors import ConflictError, ContractError, DatasetNotFound, InputError
from dsm.storage import (
    Location,
    canonical_location,
    claimed_location,
    compare_and_swap,
    location,
    overlaps,
    redact,
)
from dsm.units import utc_now_text

__all__ = [
    "AliasMove",
    "AuditRecord",
    "Catalog",
    "Registry",
    "VersionStatus",
    "default_registry_url",
    "load_contract_file",
    "open_registry",
    "parse_reference",
    "resolve",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_VERSION_FILE = re.compile(r"^(\d+)\.yaml$")
_RESERVED_ALIASES = {"latest"}
_STATUSES = ("draft", "active", "deprecated", "retired")
_PUBLISH_ATTEMPTS = 100


def default_registry_url() -> str:
    """``DSM_REGISTRY``, else a folder under the user's data directory."""
    env = os.environ.get("DSM_REGISTRY")
    if env:
        return env
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("dsm"), "registry")


def parse_reference(ref: str) -> tuple[str, str | None]:
    """Split ``NAME@SELECTOR`` into its name and selector (a version number, an alias, or None)."""
    name, sep, selector = ref.partition("@")
    if not _NAME.match(name) or (sep and not selector):
        raise InputError(
            f"{ref!r} is not a dataset reference (NAME, NAME@VERSION, NAME@ALIAS or a contract path)"
        )
    return name, (selector if sep else None)


@dataclass(frozen=True, kw_only=True)
class AliasMove:
    """An alias that was set: where it points now and where it pointed before (None: it is new).

    ``atomic`` is False when the registry's store has no conditional writes (the move was a check
    followed by a write, see docs/storage.md).
    """

    name: str
    alias: str
    version: int
    previous: int | None
    atomic: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "alias": self.alias,
            "version": self.version,
            "previous": self.previous,
            "atomic": self.atomic,
        }


@dataclass(frozen=True, kw_only=True)
class VersionStatus:
    """A status given to a version after it was written (deprecated by a cutover, retired when its data
    was deleted): why, when, and by what (a cutover id)."""

    version: int
    status: str
    reason: str
    at: str
    by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "at": self.at, "by": self.by}

    @classmethod
    def from_dict(cls, version: int, data: Mapping[str, Any]) -> VersionStatus:
        return cls(
            version=version,
            status=str(data["status"]),
            reason=str(data.get("reason", "")),
            at=str(data.get("at", "")),
            by=data.get("by"),
        )


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a bare container
        return str(os.getuid()) if hasattr(os, "getuid") else "?"


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """One unmasking of classified fields: the dataset version, the fields and their classifications,
    the command that showed them and why, who, where and when (``NAME/audit/`` of a registry)."""

    dataset: str
    version: int | None
    fields: tuple[str, ...]
    classifications: Mapping[str, str] = field(default_factory=dict)
    action: str = "unmask"
    command: str = ""
    reason: str | None = None
    user: str = ""
    host: str = ""
    at: str = ""
    tool: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "fields": list(self.fields),
            "classifications": dict(self.classifications),
            "action": self.action,
            "command": self.command,
            "reason": self.reason,
            "user": self.user,
            "host": self.host,
            "at": self.at,
            "tool": self.tool,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditRecord:
        return cls(
            dataset=str(data["dataset"]),
            version=data.get("version"),
            fields=tuple(data.get("fields") or ()),
            classifications=dict(data.get("classifications") or {}),
            action=str(data.get("action", "unmask")),
            command=str(data.get("command", "")),
            reason=data.get("reason"),
            user=str(data.get("user", "")),
            host=str(data.get("host", "")),
            at=str(data.get("at", "")),
            tool=str(data.get("tool", "")),
        )


class Registry:
    """Contracts and aliases under one URL."""

    def __init__(self, url: str | None = None, *, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = url or default_registry_url()
        self.location: Location = location(self.url, storage_options)

    def __repr__(self) -> str:
        return f"Registry({redact(self.url)!r})"

    # --- reading ----------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        if not self.location.exists():
            return []
        names = set()
        for info in self.location.list_files():
            parts = info.path.split("/")
            if len(parts) == 3 and parts[1] == "versions" and _VERSION_FILE.match(parts[2]):
                names.add(parts[0])
        return sorted(names)

    def select(self, names: Sequence[str], *, command: str) -> list[str]:
        """``names`` checked to be datasets of this registry (plain names, no version or alias), or every
        dataset when there are none: what a command over whole datasets (``gc``, ``footprint``) covers."""
        known = self.names()
        for name in names:
            parse_reference(name)
            if "@" in name:
                raise InputError(f"{name!r}: {command} takes dataset names; it covers every version of each")
            if name not in known:
                raise DatasetNotFound(f"no dataset named {name!r} in registry {redact(self.url)}")
        return list(names) or known

    def catalog(self, storage_options: Mapping[str, Any] | None = None) -> Catalog:
        """Every version of every dataset, read once (:class:`Catalog`)."""
        return Catalog.read(self, storage_options)

    def versions(self, name: str) -> list[int]:
        found = []
        for info in self.location.child(f"{name}/versions").list_files(recursive=False):
            match = _VERSION_FILE.match(info.path)
            if match:
                found.append(int(match.group(1)))
        return sorted(found)

    def aliases(self, name: str) -> dict[str, int]:
        return self._read_aliases(name)[0]

    def get(self, name: str, version: int) -> Contract:
        rel = f"{name}/versions/{version}.yaml"
        if not self.location.exists(rel):
            known = self.versions(name)
            if not known:
                raise DatasetNotFound(f"no dataset named {name!r} in registry {redact(self.url)}")
            raise DatasetNotFound(f"{name}@{version} does not exist; versions of {name}: {known}")
        source = redact(self.location.url_of(rel))
        check_contract_size(self.location.size(rel), source)
        contract = Contract.from_yaml(self.location.read_bytes(rel), source=source)
        status = self.statuses(name).get(version)
        return contract.evolve(status=status.status) if status is not None else contract

    def resolve(self, ref: str | Contract) -> Contract:
        """The contract a reference names. Accepts a :class:`Contract` as it is (its shard paths checked:
        one made in Python was never validated)."""
        if isinstance(ref, Contract):
            check_shard_paths([s.path for s in ref.shards], ref.ref)
            return ref
        ref = str(ref)
        if _looks_like_path(ref):
            return load_contract_file(ref)
        name, selector = parse_reference(ref)
        if selector is None or selector == "latest":
            versions = self.versions(name)
            if not versions:
                raise DatasetNotFound(
                    f"no dataset named {name!r} in registry {redact(self.url)}; `dsm ls` lists the names"
                )
            statuses = self.statuses(name)
            usable = [v for v in versions if v not in statuses or statuses[v].status != "retired"]
            if not usable:
                raise DatasetNotFound(f"every version of {name} is retired; name one: {name}@{versions[-1]}")
            return self.get(name, usable[-1])
        if selector.isdigit():
            return self.get(name, int(selector))
        aliases = self.aliases(name)
        if selector not in aliases:
            if not self.versions(name):
                raise DatasetNotFound(f"no dataset named {name!r} in registry {redact(self.url)}")
            raise DatasetNotFound(f"{name} has no alias {selector!r}; aliases: {sorted(aliases) or 'none'}")
        return self.get(name, aliases[selector])

    # --- writing ----------------------------------------------------------------------------------------

    def publish(self, contract: Contract) -> Contract:
        """Write ``contract`` as the next version of its name and return it with that version.

        Never overwrites: a writer that finds its version taken tries the next number.
        """
        if not _NAME.match(contract.name):
            raise InputError(
                f"{contract.name!r} is not a valid dataset name (letters, digits, '.', '_', '-')"
            )
        # Validated as a reader will load it (shard paths below the location, ...): never publish what
        # would not load back.
        Contract.from_dict(contract.to_dict(), source=f"the contract of {contract.name} to publish")
        created = contract.created or utc_now_text()
        version = (self.versions(contract.name) or [0])[-1] + 1
        for _ in range(_PUBLISH_ATTEMPTS):
            candidate = contract.evolve(version=version, created=created)
            try:
                self.location.create_exclusive(
                    f"{contract.name}/versions/{version}.yaml", candidate.to_yaml().encode("utf-8")
                )
                return candidate
            except ConflictError:
                version += 1
        raise ConflictError(f"could not find a free version number for {contract.name}; retry")

    def set_alias(self, name: str, alias: str, version: int, *, if_points_to: int | None = None) -> AliasMove:
        """Point ``alias`` at ``version`` atomically; report where it pointed before.

        With ``if_points_to``, move it only if it points at that version now (a compare-and-set on the
        alias's value: ConflictError names where it points instead). A retired version (its data deleted)
        is refused.
        """
        if alias in _RESERVED_ALIASES or alias.isdigit() or not _NAME.match(alias):
            raise InputError(f"{alias!r} cannot be an alias (it must be a name, not a number or 'latest')")
        if version not in self.versions(name):
            raise DatasetNotFound(
                f"{name}@{version} does not exist; versions of {name}: {self.versions(name)}"
            )
        status = self.statuses(name).get(version)
        if status is not None and status.status == "retired":
            raise InputError(f"{name}@{version} is retired ({status.reason}); an alias cannot point at it")
        current, raw = self._read_aliases(name)
        if if_points_to is not None and current.get(alias) != if_points_to:
            raise ConflictError(
                f"{name}@{alias} points at {current.get(alias)}, not at {if_points_to}: someone moved it; "
                "it was not changed"
            )
        updated = {**current, alias: version}
        new = yaml.safe_dump(dict(sorted(updated.items())), sort_keys=True).encode("utf-8")
        atomic = compare_and_swap(self.location, f"{name}/aliases.yaml", raw, new)
        return AliasMove(name=name, alias=alias, version=version, previous=current.get(alias), atomic=atomic)

    def statuses(self, name: str) -> dict[int, VersionStatus]:
        """The versions of ``name`` whose status changed after they were written (``NAME/status.yaml``)."""
        return self._read_statuses(name)[0]

    def set_status(
        self, name: str, version: int, status: str, *, reason: str, by: str | None = None
    ) -> VersionStatus:
        """Record that ``name@version`` is now ``status`` (``deprecated``, ``retired``...), atomically.

        Version files are never rewritten: the status lives in ``NAME/status.yaml`` and :meth:`get`
        reports it as the contract's ``status``.
        """
        if status not in _STATUSES:
            raise InputError(f"{status!r} is not a dataset status; one of {', '.join(_STATUSES)}")
        known = self.versions(name)
        if version not in known:
            raise DatasetNotFound(f"{name}@{version} does not exist; versions of {name}: {known}")
        current, raw = self._read_statuses(name)
        entry = VersionStatus(
            version=version,
            status=status,
            reason=reason,
            by=by,
            at=utc_now_text(),
        )
        updated = {**current, version: entry}
        body = {v: e.to_dict() for v, e in sorted(updated.items())}
        new = yaml.safe_dump(body, sort_keys=False).encode("utf-8")
        compare_and_swap(self.location, f"{name}/status.yaml", raw, new)
        return entry

    def record_unmask(
        self,
        *,
        dataset: str,
        version: int | None,
        fields: Sequence[str],
        classifications: Mapping[str, str],
        command: str,
        reason: str | None = None,
        tool: str = "",
    ) -> AuditRecord:
        """Append the record of an unmasking to ``NAME/audit/`` and return it: a new file, created
        exclusively (never overwritten, on every store). A :class:`StorageError` means nothing may be
        unmasked."""
        now = datetime.now(UTC)
        record = AuditRecord(
            dataset=dataset,
            version=version,
            fields=tuple(fields),
            classifications={f: classifications[f] for f in fields if f in classifications},
            command=command,
            reason=reason,
            user=_user(),
            host=socket.gethostname(),
            at=now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            tool=tool,
        )
        rel = f"{dataset}/audit/{now.strftime('%Y%m%dT%H%M%S%fZ')}-{uuid.uuid4().hex[:12]}.json"
        body = json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n"
        self.location.create_exclusive(rel, redact(body).encode("utf-8"))
        return record

    def audit(self, name: str) -> tuple[AuditRecord, ...]:
        """Every audit record of dataset ``name``, oldest first."""
        folder = self.location.child(f"{name}/audit")
        records = []
        for info in folder.list_files(recursive=False):
            if not info.path.endswith(".json"):
                continue
            try:
                records.append(AuditRecord.from_dict(json.loads(folder.read_bytes(info.path))))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise ContractError(
                    f"{redact(folder.url_of(info.path))}: not an audit record (expected a JSON object with "
                    "dataset, fields, user, at); it was changed by hand"
                ) from None
        return tuple(sorted(records, key=lambda r: r.at))

    def _read_statuses(self, name: str) -> tuple[dict[int, VersionStatus], bytes | None]:
        rel = f"{name}/status.yaml"
        if not self.location.exists(rel):
            return {}, None
        raw = self._read_yaml_bytes(rel)
        data = load_yaml(raw, source=redact(self.location.url_of(rel))) or {}
        try:
            return {int(v): VersionStatus.from_dict(int(v), e) for v, e in data.items()}, raw
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ContractError(
                f"{redact(self.location.url_of(rel))}: expected a mapping of version to "
                "{status, reason, at, by}"
            ) from None

    def _read_yaml_bytes(self, rel: str) -> bytes:
        check_contract_size(self.location.size(rel), redact(self.location.url_of(rel)))
        return self.location.read_bytes(rel)

    def _read_aliases(self, name: str) -> tuple[dict[str, int], bytes | None]:
        rel = f"{name}/aliases.yaml"
        if not self.location.exists(rel):
            return {}, None
        raw = self._read_yaml_bytes(rel)
        data = load_yaml(raw, source=redact(self.location.url_of(rel))) or {}
        if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
            raise ContractError(
                f"{redact(self.location.url_of(rel))}: expected a mapping of alias to version"
            )
        return {str(k): int(v) for k, v in data.items()}, raw


@dataclass(kw_only=True)
class Catalog:
    """Every version of every dataset in a registry, read once, and where each one's files are.

    What decides that something is safe to delete or to write compares canonical locations
    (:func:`dsm.storage.canonical_location`) against every version here, never location strings: a
    dataset registered from a parent folder, through a symlink or under another spelling of the URL
    lists the same files.
    """

    registry: Registry
    storage_options: Mapping[str, Any] | None = None
    contracts: dict[tuple[str, int], Contract] = field(default_factory=dict)
    statuses: dict[str, dict[int, VersionStatus]] = field(default_factory=dict)
    aliases: dict[str, dict[str, int]] = field(default_factory=dict)
    _locations: dict[str, Location] = field(default_factory=dict, repr=False)

    @classmethod
    def read(cls, reg: Registry, storage_options: Mapping[str, Any] | None = None) -> Catalog:
        """Every contract, status and alias of ``reg``. A contract that does not load is an error:
        nothing may be judged unused while a version cannot be read."""
        out = cls(registry=reg, storage_options=storage_options)
        for name in reg.names():
            out.statuses[name] = reg.statuses(name)
            out.aliases[name] = reg.aliases(name)
            for version in reg.versions(name):
                out.contracts[(name, version)] = reg.get(name, version)
        return out

    def location_of(self, contract: Contract) -> Location:
        if contract.location not in self._locations:
            self._locations[contract.location] = location(contract.location, self.storage_options)
        return self._locations[contract.location]

    def files_of(self, contract: Contract) -> dict[str, str]:
        """``{canonical value: shard path}`` of every file ``contract`` lists."""
        loc = self.location_of(contract)
        return {canonical_location(loc, s.path): s.path for s in contract.shards}

    def listed_files(self, *, exclude: Collection[tuple[str, int]] = ()) -> dict[str, list[str]]:
        """``{canonical value: refs}``: every file that a version not in ``exclude`` lists."""
        listed: dict[str, list[str]] = {}
        for key, contract in sorted(self.contracts.items()):
            if key in exclude:
                continue
            for canonical in self.files_of(contract):
                listed.setdefault(canonical, []).append(contract.ref)
        return listed

    def claimed(self, contract: Contract) -> str:
        """The canonical place a version holds (:func:`dsm.storage.claimed_location`)."""
        pattern = contract.metadata.get("source_glob")
        paths = [s.path for s in contract.shards]
        return claimed_location(self.location_of(contract), paths, str(pattern) if pattern else None)

    def claims(self, url: str) -> list[Contract]:
        """Versions whose place overlaps ``url`` (``url`` is inside it, around it, or the same place,
        compared canonically), except retired versions none of whose files is still there."""
        target = canonical_location(location(url, self.storage_options))
        found = []
        for (name, version), contract in sorted(self.contracts.items()):
            if not overlaps(target, self.claimed(contract)):
                continue
            status = self.statuses.get(name, {}).get(version)
            if status is not None and status.status == "retired" and not self._any_file_left(contract):
                continue  # its data was deleted: nothing of it can be overwritten
            found.append(contract)
        return found

    def _any_file_left(self, contract: Contract) -> bool:
        loc = self.location_of(contract)
        present = {f.path for f in loc.list_files()}
        return any(s.path in present for s in contract.shards)

    def refuse_destination(self, url: str, *, doing: str) -> None:
        """InputError (exit 2) when ``url`` overlaps a registered version's place or the registry
        itself: data written there could overwrite, or mix with, files a version lists."""
        target = canonical_location(location(url, self.storage_options))
        if overlaps(target, canonical_location(self.registry.location)):
            raise InputError(
                f"{doing}: the destination {redact(url)} overlaps the registry "
                f"({redact(self.registry.url)}); choose a folder of its own; nothing was written"
            )
        claims = self.claims(url)
        if claims:
            shown = ", ".join(f"{c.ref} ({redact(c.location)})" for c in claims[:3])
            more = f" and {len(claims) - 3} more" if len(claims) > 3 else ""
            raise InputError(
                f"{doing}: the destination {redact(url)} overlaps the location of {shown}{more}: a "
                "destination may not be a registered dataset's folder, inside one, around one, or a "
                "link to one (its files could be overwritten or mixed with the new ones); choose a "
                "folder of its own; nothing was written"
            )


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml")) or "/" in ref or os.sep in ref


def load_contract_file(path: str, storage_options: Mapping[str, Any] | None = None) -> Contract:
    """Load a contract from a file path or URL."""
    loc = location(path, storage_options)
    if not loc.fs.exists(loc.root):
        raise DatasetNotFound(f"contract file {redact(path)} does not exist")
    check_contract_size(int(loc.fs.size(loc.root)), redact(path))
    return Contract.from_yaml(loc.fs.cat_file(loc.root), source=redact(path))


def open_registry(
    registry: str | Registry | None, storage_options: Mapping[str, Any] | None = None
) -> Registry:
    """The :class:`Registry` at ``registry`` (a URL; None: the default), or ``registry`` itself."""
    if isinstance(registry, Registry):
        return registry
    return Registry(registry, storage_options=storage_options)


def resolve(
    ref: str | Contract,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Contract:
    """The contract ``ref`` names (a name, ``NAME@N``, ``NAME@ALIAS``, a contract path, or a Contract).

    >>> resolve(Contract.from_dict({"dsm": 1, "name": "d", "location": ".", "format": "csv",
    ...     "schema": {"fields": []}, "shards": []})).name
    'd'
    """
    if isinstance(ref, Contract):
        check_shard_paths([s.path for s in ref.shards], ref.ref)
        return ref
    return open_registry(registry, storage_options).resolve(ref)
