"""``dsm verify``: parse options, call :func:`dsm.commands.verify.verify`, render the shards that failed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from dsm.cli import checks_failed
from dsm.cli.options import (
    EngineOpt,
    JsonOpt,
    RayAddressOpt,
    RegistryOpt,
    StorageOpt,
    WorkersOpt,
    storage_options,
)
from dsm.cli.render import SafeTable, console, engine_line, esc, print_json, progress_for, styled

if TYPE_CHECKING:
    from dsm.commands.verify import VerifyReport

__all__ = ["add_to", "verify"]

_EPILOG = (
    "Examples:\n\n  dsm verify web-text@prod\n\n  dsm verify web-text@3 --deep --json\n\n"
    "  dsm verify web-text@prod --fast   (S3/Azure: use the store's checksums, read nothing)\n\n"
    "  dsm verify web-text@3 --deep --engine ray --ray-address HEAD:6379\n\n"
    "Exit codes: 0 every shard holds, 1 a shard failed a check, 2 bad input, 3 storage failure."
)


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
    engine: EngineOpt = None,
    ray_address: RayAddressOpt = None,
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
        engine=engine,
        ray_address=ray_address,
        storage_options=storage_options(storage_option),
        progress=progress_for(json_output),
    )
    if json_output:
        print_json(report.to_dict())
    else:
        _render_verify(report)
    if not report.ok:
        checks_failed()


def _render_verify(report: VerifyReport) -> None:
    failures = report.failures
    if failures:
        table = SafeTable("shard", "status", "detail", title=f"{report.dataset}: shards that failed")
        for shard in failures:
            table.add_row(shard.path, styled(shard.status, "bold red"), shard.detail)
        console.print(table)
    summary = ", ".join(f"{n} {status}" for status, n in report.summary.items())
    verdict = "[bold green]OK[/]" if report.ok else "[bold red]FAILED[/]"
    console.print(
        f"{verdict} {esc(report.dataset)} ({'deep' if report.deep else 'bytes'}): {esc(summary)}",
        highlight=False,
    )
    ran = engine_line(report.engine)
    if ran:
        console.print(f"  {esc(ran)}", highlight=False)
    for note in report.notes:
        console.print(f"  {esc(note)}", highlight=False)


def add_to(app: typer.Typer) -> None:
    app.command(epilog=_EPILOG)(verify)
