"""The dataset contract: a frozen model of the YAML file that is the one source of truth about a version.

Contracts load with YAML's safe loader, bounded (:func:`load_yaml`: size, aliases), and validate against
``contract.schema.json`` (``dsm schema`` prints it); errors name the file, the line and the field path. A
contract whose ``dsm:`` format version this dsm does not know is refused.

>>> text = "dsm: 1\\nname: t\\nlocation: /d\\nformat: parquet\\nschema: {fields: []}\\nshards: []"
>>> c = Contract.from_yaml(text)
>>> c.name, c.format
('t', 'parquet')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from dsm import json_schema
from dsm.errors import ContractError
from dsm.paths import path_problem

__all__ = [
    "CONTRACT_FORMAT_VERSION",
    "MAX_CONTRACT_BYTES",
    "Contract",
    "DatasetFingerprint",
    "Field",
    "Lineage",
    "Schema",
    "Shard",
    "check_contract_size",
    "check_shard_paths",
    "contract_json_schema",
    "load_yaml",
]

CONTRACT_FORMAT_VERSION = 1
MAX_CONTRACT_BYTES = 512 << 20
"""Largest contract (or registry YAML file) dsm reads: about two million shards."""
_ALIAS_ALLOWANCE = 10_000
"""Nodes YAML aliases may add beyond one per character of the text (a contract needs none)."""


def check_contract_size(size: int, source: str) -> None:
    """Refuse a YAML file larger than :data:`MAX_CONTRACT_BYTES` before reading it."""
    if size > MAX_CONTRACT_BYTES:
        raise ContractError(
            f"{source}: {size} bytes, more than the {MAX_CONTRACT_BYTES >> 20} MiB a contract may have; "
            "split the dataset"
        )


def _expanded_nodes(data: Any, budget: int) -> int:
    """Nodes of ``data`` counted as often as they are reached (aliases share objects), up to ``budget``."""
    count, stack = 0, [data]
    while stack:
        node = stack.pop()
        count += 1
        if count > budget:
            return count
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def load_yaml(text: str | bytes, *, source: str) -> Any:
    """Parse one YAML document of a registry (a contract, aliases, statuses) safely and boundedly.

    The safe loader builds no objects but plain data; the text is at most :data:`MAX_CONTRACT_BYTES`;
    and aliases may not multiply the data (a "billion laughs" of nested aliases expands exponentially in
    whatever walks it next): every error is a ContractError naming ``source``.
    """
    check_contract_size(len(text), source)
    if isinstance(text, bytes):
        raw = text
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise ContractError(
                f"{source}: not UTF-8 text (line {line}, byte {exc.start}: {exc.reason}); a registry file is "
                "UTF-8 YAML: restore the file or write it again",
                path=source,
                line=line,
            ) from None
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise ContractError(
            f"{source}: YAML syntax error at {where}: {exc.problem or exc}",
            path=source,
            line=mark.line + 1 if mark else None,
        ) from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise ContractError(f"{source}: not valid YAML: {exc}", path=source) from None
    budget = len(text) + _ALIAS_ALLOWANCE
    if _expanded_nodes(data, budget) > budget:
        raise ContractError(
            f"{source}: YAML aliases expand it beyond {budget} values (an alias bomb?); write the values out"
        )
    return data


def contract_json_schema() -> dict[str, Any]:
    """The JSON Schema every contract is validated against."""
    return json_schema.schema("contract")


def _drop_none(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if v is not None}


@dataclass(frozen=True, kw_only=True)
class Field:
    """One column: an Arrow type name plus the annotations readers and governance need."""

    name: str
    type: str
    nullable: bool = True
    role: str | None = None
    classification: str | None = None
    media_type: str | None = None
    description: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Field:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        out = _drop_none(
            {
                "name": self.name,
                "type": self.type,
                "role": self.role,
                "classification": self.classification,
                "media_type": self.media_type,
                "description": self.description,
            }
        )
        if not self.nullable:
            out["nullable"] = False
        return out


@dataclass(frozen=True, kw_only=True)
class Schema:
    """The fields of a dataset in order, and an optional key."""

    fields: tuple[Field, ...]
    key: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        return cls(
            fields=tuple(Field.from_dict(f) for f in data.get("fields", [])), key=tuple(data.get("key", ()))
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fields": [f.to_dict() for f in self.fields]}
        if self.key:
            out["key"] = list(self.key)
        return out

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def to_arrow(self) -> Any:
        """The ``pyarrow.Schema`` these fields name (imports pyarrow on first use)."""
        import pyarrow as pa

        from dsm.arrow_types import parse_type

        return pa.schema([pa.field(f.name, parse_type(f.type), nullable=f.nullable) for f in self.fields])

    @classmethod
    def from_arrow(cls, schema: Any, *, annotations: Schema | None = None, key: Sequence[str] = ()) -> Schema:
        """Fields from a ``pyarrow.Schema``, keeping the annotations (role, classification, ...) of
        same-named fields in ``annotations``."""
        from dsm.arrow_types import type_name

        known = {f.name: f for f in annotations.fields} if annotations else {}
        fields = []
        for arrow_field in schema:
            base = known.get(arrow_field.name)
            fields.append(
                Field(
                    name=arrow_field.name,
                    type=type_name(arrow_field.type),
                    nullable=arrow_field.nullable,
                    role=base.role if base else None,
                    classification=base.classification if base else None,
                    media_type=base.media_type if base else None,
                    description=base.description if base else None,
                )
            )
        return cls(fields=tuple(fields), key=tuple(key) or (annotations.key if annotations else ()))


@dataclass(frozen=True, kw_only=True)
class Shard:
    """One file of the dataset: its path relative to the location, physical and logical identity."""

    path: str
    bytes: int
    rows: int | None = None
    checksum: str | None = None
    fingerprint: str | None = None
    ordered_fingerprint: str | None = None
    server_checksum: str | None = None
    """A full-object checksum the object store keeps (``crc64nvme:..``, ``md5:..``), recorded so that
    ``dsm verify --fast`` can check the shard without reading it; never an ETag (docs/storage.md)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Shard:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "path": self.path,
                "bytes": self.bytes,
                "rows": self.rows,
                "checksum": self.checksum,
                "fingerprint": self.fingerprint,
                "ordered_fingerprint": self.ordered_fingerprint,
                "server_checksum": self.server_checksum,
            }
        )


@dataclass(frozen=True, kw_only=True)
class DatasetFingerprint:
    """The row fingerprint of the whole dataset (see docs/fingerprint.md)."""

    algorithm: str
    rows: int
    unordered: str
    ordered: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetFingerprint:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "rows": self.rows,
            "unordered": self.unordered,
            "ordered": self.ordered,
        }


@dataclass(frozen=True, kw_only=True)
class Lineage:
    """How a version was made: from which parent, by which operation and parameters, by which tool."""

    operation: str
    parent: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    tool: str = ""
    created: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Lineage:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "parent": self.parent,
                "operation": self.operation,
                "parameters": dict(self.parameters),
                "tool": self.tool or None,
                "created": self.created or None,
            }
        )


@dataclass(frozen=True, kw_only=True)
class Contract:
    """One version of a dataset. Immutable; derive changed copies with :meth:`evolve`."""

    name: str
    location: str
    format: str
    schema: Schema
    shards: tuple[Shard, ...]
    version: int | None = None
    description: str | None = None
    owners: tuple[str, ...] = ()
    status: str = "active"
    format_options: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: DatasetFingerprint | None = None
    lineage: Lineage | None = None
    created: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """``NAME@VERSION`` (or ``NAME`` for an unregistered contract)."""
        return f"{self.name}@{self.version}" if self.version is not None else self.name

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def total_rows(self) -> int | None:
        rows = [s.rows for s in self.shards]
        return None if any(r is None for r in rows) else sum(r for r in rows if r is not None)

    def shard(self, path: str) -> Shard:
        for s in self.shards:
            if s.path == path:
                return s
        raise KeyError(path)

    def evolve(self, **changes: Any) -> Contract:
        return replace(self, **changes)

    # --- (de)serialisation ------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<contract>") -> Contract:
        """Validate ``data`` against the contract JSON Schema and build the model."""
        _check_version(data, source)
        _validate(data, source, None)
        return cls._build(data)

    @classmethod
    def _build(cls, data: Mapping[str, Any]) -> Contract:
        fingerprint = data.get("fingerprint")
        lineage = data.get("lineage")
        return cls(
            name=data["name"],
            version=data.get("version"),
            description=data.get("description"),
            owners=tuple(data.get("owners", ())),
            status=data.get("status", "active"),
            location=data["location"],
            format=data["format"],
            format_options=dict(data.get("format_options") or {}),
            schema=Schema.from_dict(data["schema"]),
            shards=tuple(Shard.from_dict(s) for s in data["shards"]),
            fingerprint=DatasetFingerprint.from_dict(fingerprint) if fingerprint else None,
            lineage=Lineage.from_dict(lineage) if lineage else None,
            created=data.get("created"),
            metadata=dict(data.get("metadata") or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dsm": CONTRACT_FORMAT_VERSION, "name": self.name}
        if self.version is not None:
            out["version"] = self.version
        if self.description:
            out["description"] = self.description
        out["owners"] = list(self.owners)
        out["status"] = self.status
        out["location"] = self.location
        out["format"] = self.format
        if self.format_options:
            out["format_options"] = dict(self.format_options)
        out["schema"] = self.schema.to_dict()
        out["shards"] = [s.to_dict() for s in self.shards]
        if self.fingerprint:
            out["fingerprint"] = self.fingerprint.to_dict()
        if self.lineage:
            out["lineage"] = self.lineage.to_dict()
        if self.created:
            out["created"] = self.created
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out

    @classmethod
    def from_yaml(cls, text: str | bytes, *, source: str = "<contract>") -> Contract:
        """Parse and validate YAML text (bounded: :func:`load_yaml`); errors name ``source``, the line and
        the field."""
        data = load_yaml(text, source=source)
        if not isinstance(data, dict):
            raise ContractError(
                f"{source}: a contract is a YAML mapping, got {type(data).__name__}", path=source
            )
        try:
            _check_version(data, source)
            _validate(data, source, text if isinstance(text, str) else text.decode("utf-8"))
        except ContractError as exc:
            exc.path = exc.path or source
            raise
        return cls._build(data)

    def to_yaml(self) -> str:
        return yaml.dump(self.to_dict(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """Safe loader that keeps timestamps as strings (a contract stores them as text)."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _Dumper(yaml.SafeDumper):
    """Writes every value out: a contract dsm writes holds no anchors or aliases (a value shared in memory,
    such as one metadata mapping in two places, is written twice)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # PyYAML writes NEL (and the Unicode line and paragraph separators) raw in a quoted scalar, where a
    # YAML reader folds them into a space: a field named "\x85" came back as " ". Double quotes escape them.
    style = '"' if any(ch in value for ch in "\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_text)


def _check_version(data: Mapping[str, Any], source: str) -> None:
    version = data.get("dsm")
    if version is None:
        raise ContractError(
            f"{source}: missing 'dsm:' (the contract format version); this dsm reads version 1"
        )
    if version != CONTRACT_FORMAT_VERSION:
        raise ContractError(
            f"{source}: contract format version {version!r} is not known to this dsm, which reads "
            f"version {CONTRACT_FORMAT_VERSION}; a dsm that reads version {version!r} is needed"
        )


def _validate(data: Mapping[str, Any], source: str, text: str | None) -> None:
    import fastjsonschema

    try:
        json_schema.validator("contract")(data)
    except fastjsonschema.JsonSchemaValueException as error:
        path = [int(p) if isinstance(p, str) and p.isdigit() else p for p in (error.path or [])[1:]]
        where = _path_text(path)
        line = _line_of(text, path) if text is not None else None
        at = f" (line {line})" if line else ""
        message = error.message.removeprefix(str(error.name)).strip() if error.name else error.message
        raise ContractError(f"{source}{at}: field {where}: {message}") from None
    _check_semantics(data, source)


def _check_semantics(data: Mapping[str, Any], source: str) -> None:
    names = [f["name"] for f in data["schema"]["fields"]]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ContractError(f"{source}: field schema.fields: duplicate field names {duplicates}")
    for key in data["schema"].get("key", []):
        if key not in names:
            raise ContractError(f"{source}: field schema.key: {key!r} is not a field of the schema")
    paths = [s["path"] for s in data["shards"]]
    if len(set(paths)) != len(paths):
        raise ContractError(f"{source}: field shards: a shard path appears twice")
    check_shard_paths(paths, source)


def check_shard_paths(paths: Sequence[str], source: str) -> None:
    """ContractError naming the first shard path that is not relative to the location or leaves it."""
    for index, path in enumerate(paths):
        problem = path_problem(path)
        if problem is not None:
            raise ContractError(
                f"{source}: field shards[{index}].path: {path!r} {problem}; shard paths are relative to the "
                "location and stay below it"
            )


def _path_text(path: Sequence[str | int]) -> str:
    if not path:
        return "(top level)"
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(text: str, path: Sequence[str | int]) -> int | None:
    """The 1-based line of the YAML node at ``path``, or of its nearest existing parent."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for part in path:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            match = next((v for k, v in node.value if k.value == part), None)
            if match is None:
                break
            line = next(k for k, v in node.value if k.value == part).start_mark.line + 1
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
