"""The typer app: each command parses its options, makes one library call, and renders the result."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from dsm.cli import CheckFailedExit, exits
from dsm.cli.render import console, human_bytes, print_json, progress_for
from dsm.errors import InputError

if TYPE_CHECKING:
    from dsm.commands.verify import VerifyReport

__all__ = ["app"]

app = typer.Typer(
    name="dsm",
    help="Register, verify, rewrite, benchmark and move ML datasets under YAML contracts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

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


@app.command(
    epilog="Examples:\n\n  dsm register data/web-text/ --name web-text\n\n"
    "  dsm register 's3://bucket/logs/*.jsonl' --name logs --schema logs-schema.yaml --json"
)
@exits
def register(
    source: Annotated[str, typer.Argument(help="Folder, glob or file of shards; any fsspec URL.")],
    name: Annotated[str, typer.Option("--name", help="Dataset name in the registry.")],
    format: Annotated[
        str | None, typer.Option("--format", help="Shard format (default: from extensions).")
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option("--schema", help="Schema: a dataset reference or a YAML file (contract or fields)."),
    ] = None,
    description: Annotated[
        str | None, typer.Option("--description", help="One line about the dataset.")
    ] = None,
    owner: Annotated[list[str] | None, typer.Option("--owner", help="An owner (repeatable).")] = None,
    key: Annotated[list[str] | None, typer.Option("--key", help="A key field (repeatable).")] = None,
    workers: WorkersOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Scan shards and write a new version of the dataset's contract."""
    import dsm.commands.register as register_command

    contract = register_command.register(
        source,
        name=name,
        format=format,
        schema=schema,
        registry=registry,
        description=description,
        owners=owner or (),
        key=key or (),
        workers=workers,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    if json_output:
        from dsm.commands._common import provenance

        # The contract, plus how its fingerprints were computed (not part of the contract: same digests).
        print_json({**contract.to_dict(), "provenance": provenance(rows_hashed=True)})
        return
    fp = contract.fingerprint
    console.print(
        f"registered [bold]{contract.ref}[/]: {len(contract.shards)} {contract.format} shards, "
        f"{contract.total_rows:,} rows, {human_bytes(contract.total_bytes)}"
        + (f", fingerprint {fp.unordered[:16]}" if fp else "")
    )


@app.command(
    epilog="Examples:\n\n  dsm verify web-text@prod\n\n  dsm verify web-text@3 --deep --json\n\n"
    "  dsm verify web-text@prod --fast   (S3/Azure: use the store's checksums, read nothing)\n\n"
    "Exit codes: 0 every shard holds, 1 a shard failed a check, 2 bad input, 3 storage failure."
)
@exits
def verify(
    ref: Annotated[
        str, typer.Argument(help="Dataset reference: NAME, NAME@N, NAME@ALIAS or a contract file.")
    ],
    deep: Annotated[
        bool, typer.Option("--deep", help="Also decode rows: schema, counts, row fingerprint.")
    ] = False,
    fast: Annotated[
        bool,
        typer.Option(
            "--fast",
            help="On object stores, check shards by the store's full-object checksum recorded at "
            "registration "
            "instead of reading them (verified_by: server); others are read.",
        ),
    ] = False,
    workers: WorkersOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Prove the data matches its contract: sizes and checksums (and, with --deep, rows)."""
    import dsm.commands.verify as verify_command

    report = verify_command.verify(
        ref,
        deep=deep,
        fast=fast,
        registry=registry,
        workers=workers,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    if json_output:
        print_json(report.to_dict())
    else:
        _render_verify(report)
    if not report.ok:
        raise CheckFailedExit()


def _render_verify(report: VerifyReport) -> None:
    failures = report.failures
    if failures:
        table = Table(title=f"{report.dataset}: shards that failed")
        table.add_column("shard")
        table.add_column("status", style="bold red")
        table.add_column("detail")
        for shard in failures:
            table.add_row(shard.path, shard.status, shard.detail)
        console.print(table)
    summary = ", ".join(f"{n} {status}" for status, n in report.summary.items())
    verdict = "[bold green]OK[/]" if report.ok else "[bold red]FAILED[/]"
    console.print(f"{verdict} {report.dataset} ({'deep' if report.deep else 'bytes'}): {summary}")
    for note in report.notes:
        console.print(f"  {note}")


@app.command(name="ls", epilog="Example:\n\n  dsm ls --json")
@exits
def ls_(
    registry: RegistryOpt = None, storage_option: StorageOpt = None, json_output: JsonOpt = False
) -> None:
    """List the datasets in the registry."""
    import dsm.commands.catalog as catalog

    entries = catalog.ls(registry=registry, storage_options=storage_options(storage_option))
    if json_output:
        print_json([e.to_dict() for e in entries])
        return
    table = Table(title="datasets")
    for column in ("name", "latest", "versions", "aliases", "format", "shards", "rows", "size"):
        table.add_column(column)
    for e in entries:
        aliases = ", ".join(f"{a}→{v}" for a, v in sorted(e.aliases.items()))
        rows = e.latest.total_rows
        table.add_row(
            e.name,
            str(e.latest.version),
            str(len(e.versions))
            + "".join(
                f" ({k}: {s})" for k, s in sorted(e.statuses.items()) if s in ("deprecated", "retired")
            ),
            aliases,
            e.latest.format,
            str(len(e.latest.shards)),
            f"{rows:,}" if rows is not None else "-",
            human_bytes(e.latest.total_bytes),
        )
    console.print(table)


@app.command(epilog="Examples:\n\n  dsm show web-text@prod\n\n  dsm show web-text@3 --json")
@exits
def show(
    ref: Annotated[str, typer.Argument(help="Dataset reference.")],
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Print a contract (YAML, or JSON with --json)."""
    import dsm.commands.catalog as catalog

    contract = catalog.show(ref, registry=registry, storage_options=storage_options(storage_option))
    if json_output:
        print_json(contract.to_dict())
    else:
        console.print(contract.to_yaml(), end="", markup=False, highlight=False)


@app.command(epilog="Example:\n\n  dsm alias web-text prod 3")
@exits
def alias(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    alias: Annotated[str, typer.Argument(help="Alias to set, e.g. prod.")],
    version: Annotated[int, typer.Argument(help="Version the alias points to.", min=1)],
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Point an alias at a version atomically; says where it pointed before."""
    import dsm.commands.catalog as catalog

    move = catalog.alias(
        name, alias, version, registry=registry, storage_options=storage_options(storage_option)
    )
    if json_output:
        print_json(move.to_dict())
        return
    before = f"was {move.previous}" if move.previous is not None else "new"
    console.print(f"{move.name}@{move.alias} → {move.version} ({before})")
    if not move.atomic:
        console.print("  warning: this registry's store has no conditional writes; the move was not atomic")


@app.command(epilog="Example:\n\n  dsm schema > contract.schema.json")
@exits
def schema(json_output: JsonOpt = False) -> None:
    """Print the JSON Schema that contract files are validated against."""
    import dsm.commands.catalog as catalog

    print_json(catalog.contract_schema())


import dsm.cli.bench  # noqa: E402  (bench)
import dsm.cli.cutover  # noqa: E402  (cutover plan/start/run/resume/rollback/status/list)
import dsm.cli.diff  # noqa: E402  (diff)
import dsm.cli.rewrite  # noqa: E402, F401  (convert-format, reshard)
