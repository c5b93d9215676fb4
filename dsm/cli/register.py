"""``dsm register``: parse options, call :func:`dsm.commands.register.register`, render the new contract."""

from __future__ import annotations

from typing import Annotated

import typer

from dsm.cli.options import (
    EngineOpt,
    JsonOpt,
    RayAddressOpt,
    RegistryOpt,
    StorageOpt,
    WorkersOpt,
    storage_options,
)
from dsm.cli.render import console, engine_line, human_bytes, print_json, progress_for

__all__ = ["add_to", "register"]

_EPILOG = (
    "Examples:\n\n  dsm register data/web-text/ --name web-text\n\n"
    "  dsm register 's3://bucket/logs/*.jsonl' --name logs --schema logs-schema.yaml --json\n\n"
    "  dsm register s3://bucket/web-text/ --name web-text --engine ray --ray-address HEAD:6379"
)


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
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Scan shards and write a new version of the dataset's contract."""
    import dsm.commands.register as register_command
    from dsm.engine import open_executor

    # The executor is made here (it connects only when units run) so that the line below can say where
    # they ran: the library returns the contract itself.
    executor = open_executor(engine, ray_address=ray_address, workers=workers)
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
        engine=executor,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    if json_output:
        print_json(contract.to_dict())
        return
    fp = contract.fingerprint
    console.print(
        f"registered [bold]{contract.ref}[/]: {len(contract.shards)} {contract.format} shards, "
        f"{contract.total_rows:,} rows, {human_bytes(contract.total_bytes)}"
        + (f", fingerprint {fp.unordered[:16]}" if fp else "")
    )
    ran = engine_line(executor.report())
    if ran:
        console.print(f"  {ran}")


def add_to(app: typer.Typer) -> None:
    app.command(epilog=_EPILOG)(register)
