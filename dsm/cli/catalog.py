"""``dsm ls``, ``dsm show``, ``dsm alias``, ``dsm schema``: the registry commands of
:mod:`dsm.commands.catalog`, rendered."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from dsm.cli.options import JsonOpt, RegistryOpt, StorageOpt, storage_options
from dsm.cli.render import console, human_bytes, print_json

__all__ = ["add_to", "alias", "ls_", "schema", "show"]


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


def schema(json_output: JsonOpt = False) -> None:
    """Print the JSON Schema that contract files are validated against."""
    import dsm.commands.catalog as catalog

    print_json(catalog.contract_schema())


def add_to(app: typer.Typer) -> None:
    app.command(name="ls", epilog="Example:\n\n  dsm ls --json")(ls_)
    app.command(epilog="Examples:\n\n  dsm show web-text@prod\n\n  dsm show web-text@3 --json")(show)
    app.command(epilog="Example:\n\n  dsm alias web-text prod 3")(alias)
    app.command(epilog="Example:\n\n  dsm schema > contract.schema.json")(schema)
