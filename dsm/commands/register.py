"""``dsm register``: scan shards at a URL and write a new contract version into the registry."""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import pyarrow as pa

from dsm._version import tool_name
from dsm.commands.policy import check_location, policy_error
from dsm.contract import Contract, Lineage, Schema, check_contract_size, load_yaml
from dsm.engine import Executor, NullProgress, Progress, map_units, open_executor
from dsm.errors import ContractError, InputError, SchemaError
from dsm.formats import Format, detect_compression, detect_format, get_format
from dsm.inspect.roles import RoleProposal, infer_roles
from dsm.policy import carry_classifications
from dsm.registry import Registry, load_contract_file, open_registry
from dsm.shards import (
    DescribedShard,
    IgnoredFile,
    contract_location,
    dataset_files,
    dataset_fingerprint,
    describe_shard,
    iter_shard,
    not_data,
    shard_schema,
    takes_unnamed,
)
from dsm.storage import FileInfo, Location, glob_of, location, redact
from dsm.units import parse_workers, utc_now_text
from dsm.validators.pii import scan_shards
from dsm.validators.schema import schema_differences

__all__ = ["AlreadyRegisteredWarning", "ScannedSource", "propose_roles", "register", "scan_source"]

_ROLE_SAMPLE_ROWS = 500

_GLOB_CHARS = "*?["
_IGNORED_SHOWN = 50


@dataclass(frozen=True, kw_only=True)
class ScannedSource:
    """The shards found at a source: their common root, relative paths and sizes, the format, the glob
    they were selected by (a single file: the glob of its name), and the files that are not data."""

    root: Location
    files: tuple[FileInfo, ...]
    format: str
    pattern: str | None = None
    ignored: tuple[IgnoredFile, ...] = ()


def _owner_list(owners: Sequence[str] | str) -> tuple[str, ...]:
    """``["a@x,b@y", "c@z"]`` -> ``("a@x", "b@y", "c@z")`` (a comma separates owners; duplicates dropped)."""
    given = [owners] if isinstance(owners, str) else list(owners)
    split = [part.strip() for value in given for part in str(value).split(",")]
    return tuple(dict.fromkeys(part for part in split if part))


def scan_source(
    source: str, *, format: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> ScannedSource:
    """Find the shards at ``source``: a folder (recursively), a glob, or one file, on any fsspec URL.

    Which files are shards and which are not data is :func:`dsm.shards.dataset_files`'s answer, the one
    ``dsm verify`` gets too. A single file registers as itself: its siblings are none of the dataset's.
    Hive-style partition folders (``lang=en/``) are refused: their values are in no file, and registering
    would silently drop them.
    """
    if format is not None:
        get_format(format)  # fails early on an unknown name
    pattern = None
    # A glob, unless a file or folder has that very name (``data[v1]/``).
    if any(ch in source for ch in _GLOB_CHARS) and not location(source, storage_options).exists():
        head = source[: min(source.index(ch) for ch in _GLOB_CHARS if ch in source)]
        base = head.rsplit("/", 1)[0] if "/" in head else "."
        root = location(base, storage_options)
        pattern = source[len(base) :].lstrip("/")
        listed = root.list_files()
    else:
        root = location(source, storage_options)
        if not root.exists():
            raise InputError(f"{redact(source)}: no such file or folder")
        if root.isdir():
            listed = root.list_files()
        else:
            parent, _, name = source.rstrip("/").rpartition("/")
            root = location(parent or ".", storage_options)
            pattern = glob_of(name)
            listed = [FileInfo(path=name, size=root.size(name))]
    candidates = [f for f in listed if (not pattern or fnmatch.fnmatchcase(f.path, pattern))]
    if format is None:
        files = [f for f in candidates if not_data(f.path) is None]
        kinds = sorted({k for f in files if (k := detect_format(f.path))})
        if len(kinds) > 1:
            raise InputError(
                f"{redact(source)} holds files of several formats ({', '.join(kinds)}); "
                "pass --format or a glob that selects one"
            )
        if not files:
            raise InputError(
                f"{redact(source)}: no files there (hidden files, tool metadata and documentation aside): "
                "nothing to register"
            )
        if not kinds:
            shown = ", ".join(f.path for f in files[:3]) + (
                f" and {len(files) - 3} more" if len(files) > 3 else ""
            )
            raise InputError(
                f"{redact(source)}: no file with a known format's extension ({shown}); pass --format "
                "(parquet, jsonl, csv, arrow, webdataset)"
            )
        format = kinds[0]
    unnamed = takes_unnamed([f.path for f in candidates if not_data(f.path) is None], format)
    found = dataset_files(candidates, format=format, pattern=pattern, unnamed=unnamed)
    if not found.shards:
        raise InputError(f"{redact(source)}: no {format} shards found")
    if found.partitions:
        folders = ", ".join(
            f"{k}={'|'.join(v[:3])}{'|...' if len(v) > 3 else ''}" for k, v in found.partitions.items()
        )
        raise InputError(
            f"{redact(source)} holds Hive-style partition folders ({folders}): their values are in no file, "
            f"so registering would drop the column(s) {', '.join(found.partitions)}. Register each partition "
            "folder as a dataset of its own, or write the partition values into the files (pyarrow.dataset."
            "write_dataset without partitioning, for one)"
        )
    return ScannedSource(root=root, files=found.shards, format=format, pattern=pattern, ignored=found.ignored)


def _read_options(scan: ScannedSource) -> dict[str, Any]:
    """The options that read the scanned shards: their whole-file compression, from their names
    (``.jsonl.gz`` is gzip); shards compressed differently cannot share one contract."""
    fmt = get_format(scan.format)
    if "compression" not in fmt.options() or fmt.self_describing:
        return {}
    codecs: dict[str | None, list[str]] = {}
    for info in scan.files:
        codecs.setdefault(detect_compression(info.path), []).append(info.path)
    if len(codecs) > 1:
        shown = "; ".join(f"{codec or 'none'}: {', '.join(paths[:2])}" for codec, paths in codecs.items())
        raise InputError(
            f"the {scan.format} shards are not all compressed the same way ({shown}); "
            "register each kind separately (a glob selects one)"
        )
    codec = next(iter(codecs))
    return {"compression": codec} if codec else {}


def _schema_from_option(schema: str | Schema | Contract, registry: Registry) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, Contract):
        return schema.schema
    if schema.endswith((".yaml", ".yml")):
        loc = location(schema)
        if not loc.fs.exists(loc.root):
            raise InputError(f"schema file {schema} does not exist", path=schema)
        check_contract_size(int(loc.fs.size(loc.root)), schema)
        data = load_yaml(loc.fs.cat_file(loc.root), source=schema)
        if isinstance(data, dict) and "dsm" in data:
            return load_contract_file(schema).schema
        if isinstance(data, dict) and "fields" in data:
            return Contract.from_dict(
                {"dsm": 1, "name": "schema", "location": ".", "format": "-", "schema": data, "shards": []},
                source=schema,
            ).schema
        raise ContractError(f"{schema}: expected a contract or a mapping with 'fields'")
    return registry.resolve(schema).schema


def _stored_schema(root: Location, fmt: Format, info: FileInfo) -> pa.Schema:
    """One unit of schema inference: the schema one shard stores."""
    return shard_schema(root, info.path, fmt)


def _describe(
    root: Location, fmt: Format, schema: pa.Schema, check_stored: bool, info: FileInfo
) -> DescribedShard:
    """One unit of a register: a shard's size, checksum, rows and fingerprints from one read (the checksum
    comes from the bytes that are decoded). With ``check_stored``, the schema the shard stores must be
    ``schema``, checked from the footer of that same read."""
    on_schema = partial(_stored_agrees, schema, info.path) if check_stored else None
    return describe_shard(root, info.path, fmt, schema, on_schema=on_schema)


def _stored_agrees(expected: pa.Schema, path: str, stored: pa.Schema) -> None:
    """``--schema`` over a self-describing format: the shard at ``path`` stores ``expected``."""
    differences = schema_differences(expected, stored.remove_metadata())
    if differences:
        raise SchemaError(
            f"shard {path} does not hold the given schema: {'; '.join(differences)}; register without "
            "--schema (the files' own schema), or rewrite the files"
        )


def _infer_schema(
    scan: ScannedSource, fmt: Format, workers: int | None, executor: Executor | None = None
) -> pa.Schema:
    """Self-describing formats: every shard's stored schema, which must agree. Text: the first shard's."""
    first = scan.files[0].path
    if not fmt.self_describing:
        return shard_schema(scan.root, first, fmt)
    schemas = map_units(
        partial(_stored_schema, scan.root, fmt),
        scan.files,
        workers=workers or scan.root.io_workers,
        executor=executor,
    )
    reference = schemas[0]
    for info, found in zip(scan.files, schemas, strict=True):
        problems = schema_differences(reference.remove_metadata(), found.remove_metadata())
        if problems:
            raise SchemaError(
                f"shard {info.path} disagrees with shard {first}: {problems[0]}"
                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                + "; register the shards separately or pass --schema"
            )
    return reference.remove_metadata()


def register(
    source: str,
    *,
    name: str,
    format: str | None = None,
    schema: str | Schema | Contract | None = None,
    registry: str | Registry | None = None,
    description: str | None = None,
    owners: Sequence[str] = (),
    key: Sequence[str] = (),
    workers: int | None = None,
    write_roles: bool = False,
    scan_pii: bool = False,
    allow_breaking: bool = False,
    engine: str | Executor | None = None,
    ray_address: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> Contract:
    """Scan the shards at ``source`` and publish a new version of contract ``name``; return it.

    Computes per shard its bytes, rows, ``xxh3-128`` checksum and row fingerprints, and the dataset's
    fingerprint. Nothing is written unless every shard decodes under the schema. Classification tags of
    the dataset's newest version are carried to same-named fields, and the registry's data policy must
    allow the location (else InputError naming the rule, before any shard is read). ``scan_pii`` samples
    rows for e-mail addresses, phone and card numbers in unclassified fields and records the counts (never
    a value) in ``metadata.pii_scan``. With ``write_roles``, the roles :func:`propose_roles` finds are
    written on the fields that have none. The shards are read on ``engine`` (``"local"`` or ``"ray"``,
    with ``ray_address``; default ``DSM_ENGINE``, else local), which the lineage records; the contract is
    the same on every engine.

    Versions mean what users expect: shards identical to the newest version's (bytes, rows, schema) return
    that version with an :class:`AlreadyRegisteredWarning` instead of writing a new one; a schema that
    ``dsm diff`` calls breaking for readers of the newest version is refused (:class:`SchemaError`, before
    any shard is read) unless ``allow_breaking``. Without ``key``, the newest version's key is kept when
    its fields are there. ``owners`` given as ``"a@x,b@y"`` are two owners.

    >>> contract = register("data/web-text/", name="web-text")  # doctest: +SKIP
    >>> contract.ref  # doctest: +SKIP
    'web-text@1'
    """
    if workers is not None:
        parse_workers(workers)  # before anything is read
    executor = open_executor(engine, ray_address=ray_address, workers=workers)
    reg = open_registry(registry, storage_options)
    owners = _owner_list(owners)
    scan = scan_source(source, format=format, storage_options=storage_options)
    options = _read_options(scan)
    fmt = get_format(scan.format, **options)
    given = _schema_from_option(schema, reg) if schema is not None else None
    arrow_schema = given.to_arrow() if given is not None else _infer_schema(scan, fmt, workers, executor)
    # verify --deep compares the types a file stores with the contract's: with --schema, each shard's must
    # agree now. Checked from the footer of the read that describes the shard (one read per shard).
    check_stored = given is not None and fmt.self_describing
    problems = fmt.unsupported(arrow_schema)
    if problems:
        raise SchemaError(f"format {scan.format} cannot hold this schema: {'; '.join(problems)}")
    newest = reg.versions(name)
    annotations = carry_classifications(given, reg.get(name, newest[-1]).schema if newest else None)
    current = reg.current(name) if newest else None
    if not key and current is not None and set(current.schema.key) <= set(arrow_schema.names):
        key = current.schema.key  # a new version keeps the key readers look its rows up by
    declared = Schema.from_arrow(arrow_schema, annotations=annotations, key=key)  # names every type
    if current is not None and not allow_breaking:
        _refuse_breaking(current, declared)
    verdict = check_location(
        declared,
        contract_location(scan.root),
        sample=scan.files[0].path,
        registry=reg,
        storage_options=storage_options,
    )
    if not verdict.ok:
        raise policy_error(verdict, f"register {name}")
    progress = progress or NullProgress()
    total = sum(f.size for f in scan.files)
    progress.start(total_bytes=total, total_units=len(scan.files), description=f"register {name}")

    def done(index: int, _: DescribedShard) -> None:
        progress.advance(scan.files[index].size)  # one read per shard

    try:
        results = map_units(
            partial(_describe, scan.root, fmt, arrow_schema, check_stored),
            scan.files,
            workers=workers or scan.root.io_workers,
            on_done=done,
            executor=executor,
        )
    finally:
        progress.finish()
    metadata: dict[str, Any] = {"source_glob": scan.pattern} if scan.pattern else {}
    if scan.ignored:
        metadata["ignored_files"] = [f.to_dict() for f in scan.ignored[:_IGNORED_SHOWN]]
        if len(scan.ignored) > _IGNORED_SHOWN:
            metadata["ignored_count"] = len(scan.ignored)
    if scan_pii:
        classified = {f.name for f in declared.fields if f.classification}
        found = scan_shards(scan.root, [f.path for f in scan.files], fmt, arrow_schema, classified=classified)
        metadata["pii_scan"] = found.to_dict()
    if write_roles:
        first = next(
            iter_shard(scan.root, scan.files[0].path, fmt, schema=arrow_schema, batch_rows=_ROLE_SAMPLE_ROWS),
            None,
        )
        if first is not None:
            proposals = infer_roles(pa.Table.from_batches([first]), known=_roles(declared))
            declared = _with_roles(declared, proposals)
    contract = Contract(
        name=name,
        description=description,
        owners=tuple(owners),
        location=contract_location(scan.root),
        format=scan.format,
        format_options=options,
        schema=declared,
        shards=tuple(r.shard for r in results),
        fingerprint=dataset_fingerprint(r.digest for r in results),
        lineage=Lineage(
            operation="register",
            parameters={"source": redact(source), "format": scan.format, "engine": executor.name},
            tool=tool_name(),
            created=utc_now_text(),
        ),
        metadata=metadata,
    )
    if current is not None and _same_registration(current, contract):
        warnings.warn(
            f"{current.ref} already holds exactly these shards (same bytes, rows and schema): it is returned "
            "and no new version was written",
            AlreadyRegisteredWarning,
            stacklevel=2,
        )
        return current
    return reg.publish(contract)


class AlreadyRegisteredWarning(UserWarning):
    """``register`` found the newest version already holding exactly these shards and returned it."""


def _refuse_breaking(current: Contract, declared: Schema) -> None:
    """A :class:`SchemaError` when readers of ``current`` could not read the new schema (``dsm diff``)."""
    from dsm.validators.compatibility import compare_schemas

    breaking = [c for c in compare_schemas(current.schema, declared) if c.breaking]
    if breaking:
        shown = "; ".join(f"{c.field}: {c.change}" + (f" ({c.detail})" if c.detail else "") for c in breaking)
        raise SchemaError(
            f"the new schema is breaking for readers of {current.ref}: {shown}; `dsm diff` shows both "
            "contracts, --allow-breaking registers it anyway (or register it under another name)",
            field=breaking[0].field,
        )


def _identity(contract: Contract) -> tuple[Any, ...]:
    return (
        contract.location,
        contract.format,
        dict(contract.format_options),
        contract.schema.to_dict(),
        tuple(
            (s.path, s.bytes, s.checksum, s.rows, s.fingerprint, s.ordered_fingerprint)
            for s in contract.shards
        ),
        contract.fingerprint.to_dict() if contract.fingerprint else None,
        contract.metadata.get("source_glob"),
    )


def _same_registration(current: Contract, new: Contract) -> bool:
    """Whether ``new`` says nothing ``current`` does not: the same shards, schema and location, and no
    description or owners other than the current ones (leaving them out keeps the current ones)."""
    if _identity(current) != _identity(new):
        return False
    return (new.description in (None, current.description)) and (
        not new.owners or new.owners == current.owners
    )


def _roles(schema: Schema) -> dict[str, str | None]:
    return {f.name: f.role for f in schema.fields}


def _with_roles(schema: Schema, proposals: Sequence[RoleProposal]) -> Schema:
    """``schema`` with the proposed roles (and media types) on fields that have no role."""
    by_field = {p.field: p for p in proposals}
    fields = []
    for f in schema.fields:
        proposal = by_field.get(f.name)
        if proposal is not None and not f.role:
            f = replace(f, role=proposal.role, media_type=f.media_type or proposal.media_type)
        fields.append(f)
    return Schema(fields=tuple(fields), key=schema.key)


def propose_roles(
    ref: str | Contract,
    *,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[RoleProposal, ...]:
    """Roles for the fields of a dataset that has none, proposed from their names and its first rows
    (a chat's list of {role, content} structs, PNG or JPEG bytes, ``reward``/``done`` columns...).
    Nothing is written: ``dsm register --write-roles`` writes them.

    >>> [(p.field, p.role) for p in propose_roles("rollouts@1")]  # doctest: +SKIP
    [('episode_id', 'episode'), ('reward', 'reward'), ('done', 'done')]
    """
    from dsm.inspect.source import RowSource

    reg = open_registry(registry, storage_options)
    contract = reg.resolve(ref)
    source = RowSource(contract, storage_options=storage_options)
    return tuple(source.propose_roles(rows=_ROLE_SAMPLE_ROWS))
