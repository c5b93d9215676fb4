"""Every option more than one command takes, declared once, each name with one meaning.

``--format`` is a format everywhere (the shard format to read, or the target format to write) and ``--to``
is always a destination. Library keyword names equal the option names (``--shard-size`` is
``shard_size=``); :func:`storage_options` and :func:`key_value_options` turn repeated ``KEY=VALUE`` pairs
into the library's mappings.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from dsm.errors import InputError

__all__ = [
    "CacheDirOpt",
    "ColumnsOpt",
    "CompressionOpt",
    "DestinationOpt",
    "EngineOpt",
    "FormatOptionOpt",
    "JsonOpt",
    "LevelOpt",
    "NumShardsOpt",
    "RayAddressOpt",
    "ReasonOpt",
    "RefArg",
    "RegistryOpt",
    "RowGroupOpt",
    "RowsPerShardOpt",
    "SeedOpt",
    "ShardSizeOpt",
    "ShuffleOpt",
    "SpillDirOpt",
    "StorageOpt",
    "TargetFormatOpt",
    "UnmaskOpt",
    "WorkersOpt",
    "deprecated_format_spelling",
    "key_value_options",
    "storage_options",
]

RefArg = Annotated[
    str, typer.Argument(help="Dataset reference: NAME, NAME@N, NAME@ALIAS or a contract file.")
]
RegistryOpt = Annotated[
    str | None,
    typer.Option(
        "--registry", envvar="DSM_REGISTRY", help="Registry URL (default: DSM_REGISTRY, else user data dir)."
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else there.")
]
StorageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        help="Filesystem option KEY=VALUE, or PROTOCOL:KEY=VALUE for one protocol's URLs (repeatable; "
        "values parsed as JSON when they are JSON).",
    ),
]
WorkersOpt = Annotated[
    int | None, typer.Option("--workers", min=1, help="Parallel workers (default: the cores).")
]
EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        envvar="DSM_ENGINE",
        help="Where the units run: local (this machine) or ray (a Ray cluster; pip install 'dsm[ray]'). "
        "Default: DSM_ENGINE, else local. The output is the same on both.",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="The Ray cluster for --engine ray (HOST:PORT of its head); default: RAY_ADDRESS, else a "
        "local Ray started for the command.",
    ),
]

# --- looking at rows (head, sample, find, episodes, diff --rows) ----------------------------------------

ColumnsOpt = Annotated[
    str | None, typer.Option("--columns", help="Only these fields, comma-separated: id,text.")
]
UnmaskOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--unmask",
        help="Show this classified field's values (repeatable). Each unmasking is recorded in the registry's "
        "audit log: who, when, which dataset and field (`dsm audit NAME`).",
    ),
]
ReasonOpt = Annotated[
    str | None, typer.Option("--reason", help="Why the fields are unmasked (kept in the audit record).")
]
CacheDirOpt = Annotated[
    str | None,
    typer.Option(
        "--cache-dir",
        envvar="DSM_CACHE_DIR",
        help="Where row indexes of JSONL, CSV and WebDataset shards are kept (default: DSM_CACHE_DIR, else "
        "the user's cache directory).",
    ),
]

# --- what a rewrite writes (convert-format, reshard, cutover plan/start) --------------------------------

TargetFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format", help="Target format: parquet, jsonl, csv, arrow, webdataset (default: the source's)."
    ),
]
DeprecatedToFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--to", hidden=True, help="Deprecated spelling of --format (until dsm 0.3); --to is a destination."
    ),
]
DestinationOpt = Annotated[
    str, typer.Option("--to", help="Destination folder of the new copy (any fsspec URL); empty.")
]
NumShardsOpt = Annotated[int | None, typer.Option("--num-shards", min=1, help="Number of output files.")]
ShardSizeOpt = Annotated[
    str | None, typer.Option("--shard-size", help="Target size of each output file, e.g. 256MB or 1GiB.")
]
RowsPerShardOpt = Annotated[
    int | None,
    typer.Option("--rows-per-shard", min=1, help="Rows per output file (the last may hold fewer)."),
]
ShuffleOpt = Annotated[bool, typer.Option("--shuffle", help="Shuffle rows across all output files (seeded).")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed of the shuffle (default 0).")]
SpillDirOpt = Annotated[
    str | None,
    typer.Option(
        "--spill-dir",
        help="Folder (any fsspec URL every worker reaches) for the shuffle's pass-1 files; default: under "
        "the destination. They are deleted when the new version is published.",
    ),
]
CompressionOpt = Annotated[
    str | None,
    typer.Option("--compression", help="Compression of the target format (e.g. zstd, snappy, gzip, none)."),
]
LevelOpt = Annotated[int | None, typer.Option("--compression-level", help="Compression level (Parquet).")]
RowGroupOpt = Annotated[
    int | None,
    typer.Option("--row-group-size", min=1, help="Rows per Parquet row group (default: the format's)."),
]
FormatOptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--format-option", help="Another option of the target format, KEY=VALUE (repeatable; JSON values)."
    ),
]


def deprecated_format_spelling(format: str | None, to: str | None, command: str) -> str | None:
    """The target format from ``--format`` or the old ``--to FORMAT`` (with a note on stderr)."""
    if to is None:
        return format
    if format is not None and format != to:
        raise InputError(f"{command}: --format {format} and --to {to} disagree; give --format only")
    print(
        f"note: `{command} --to FORMAT` is deprecated; write --format {to} (--to works until dsm 0.3)",
        file=sys.stderr,
    )
    return to


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def key_value_options(pairs: list[str] | None, flag: str) -> dict[str, Any] | None:
    """``["level=3", "name=x"]`` -> ``{"level": 3, "name": "x"}`` (values parsed as JSON when they are)."""
    if not pairs:
        return None
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"{flag} {pair!r}: expected KEY=VALUE")
        options[key] = _json_or_text(value)
    return options


def storage_options(pairs: list[str] | None) -> dict[str, Any] | None:
    """``["endpoint_url=http://...", "anon=true"]`` -> ``{"endpoint_url": "http://...", "anon": True}``.

    ``PROTOCOL:KEY=VALUE`` (``s3:endpoint_url=...``) applies to that protocol's URLs only.
    """
    flat = key_value_options(pairs, "--storage-option")
    if flat is None:
        return None
    options: dict[str, Any] = {}
    for key, value in flat.items():
        protocol, colon, name = key.partition(":")
        if colon and protocol and name:
            options.setdefault(protocol, {})[name] = value
        else:
            options[key] = value
    return options
