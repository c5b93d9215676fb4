"""``dsm footprint``: parse, call :func:`dsm.commands.footprint.footprint`, render."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from dsm.cli.options import JsonOpt, RegistryOpt, StorageOpt, storage_options
from dsm.cli.render import console, human_bytes, money, print_json

if TYPE_CHECKING:
    from dsm.commands.footprint import FootprintReport

__all__ = ["add_to", "footprint"]


def _render(report: FootprintReport) -> None:
    versions = Table(title="versions")
    for column in (
        "version",
        "status",
        "aliases",
        "live",
        "rows",
        "logical",
        "stored",
        "shared",
        "copies",
        "missing",
    ):
        versions.add_column(column)
    for v in report.versions:
        versions.add_row(
            v.ref,
            v.status,
            ", ".join(v.aliases) or "-",
            "yes" if v.live else "[bold red]no[/]",
            f"{v.rows:,}" if v.rows is not None else "-",
            human_bytes(v.logical_bytes),
            human_bytes(v.stored_bytes),
            human_bytes(v.shared_bytes),
            human_bytes(v.copy_bytes),
            str(v.missing),
        )
    console.print(versions)
    classes = Table(title="stores and storage classes")
    for column in ("store", "class", "files", "physical", "copies", "raw", "per GB-month", "per month"):
        classes.add_column(column)
    for c in report.classes:
        classes.add_row(
            c.store,
            c.storage_class,
            str(c.files),
            human_bytes(c.bytes),
            f"{c.copies:g}",
            human_bytes(c.raw_bytes),
            f"{c.price_per_gb_month:g}",
            money(c.monthly_cost, report.currency),
        )
    console.print(classes)
    if report.cutovers:
        cutovers = Table(title="open cutovers")
        for column in (
            "cutover",
            "alias",
            "phase",
            "extra storage",
            "from",
            "complete after",
            "until complete",
        ):
            cutovers.add_column(column)
        for open_cutover in report.cutovers:
            cutovers.add_row(
                open_cutover.id,
                f"{open_cutover.dataset}@{open_cutover.alias}",
                open_cutover.phase,
                human_bytes(open_cutover.extra_bytes),
                escape(open_cutover.extra_source),
                open_cutover.complete_after or "-",
                money(open_cutover.cost_until_complete, report.currency)
                if open_cutover.cost_until_complete is not None
                else "-",
            )
        console.print(cutovers)
    console.print(
        f"physical {human_bytes(report.physical_bytes)} ({human_bytes(report.raw_bytes)} raw, "
        f"{report.amplification:.2f}x); shared by versions {human_bytes(report.shared_bytes)}; extra copies "
        f"{human_bytes(report.copy_bytes)}; unreferenced {human_bytes(report.unreferenced_bytes)} "
        f"(retired {human_bytes(report.unreferenced_retired_bytes)}, without an alias "
        f"{human_bytes(report.unreferenced_unaliased_bytes)}); "
        f"{money(report.monthly_cost, report.currency)} a month"
    )
    for note in report.notes:
        console.print(f"  note: {escape(note)}")


def footprint(
    names: Annotated[list[str] | None, typer.Argument(help="Datasets (default: every dataset).")] = None,
    prices: Annotated[
        str | None, typer.Option("--prices", help="Price table YAML (default: the one shipped with dsm).")
    ] = None,
    storage_classes: Annotated[
        str | None,
        typer.Option("--storage-classes", help="Storage-class table YAML (copies kept, prices per class)."),
    ] = None,
    output: Annotated[
        str | None, typer.Option("--output", help="Also write an HTML report with plots.")
    ] = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Logical against physical bytes per version; shared, copied and unreferenced bytes; cost."""
    from dsm.commands import footprint as lib

    report = lib.footprint(
        names or (),
        prices=prices,
        storage_classes=storage_classes,
        output=output,
        registry=registry,
        storage_options=storage_options(storage_option),
    )
    if json_output:
        print_json(report.to_dict())
        return
    _render(report)
    if output:
        console.print(f"HTML report: {escape(output)}")


def add_to(app: typer.Typer) -> None:
    app.command(
        epilog="Examples:\n\n  dsm footprint\n\n  dsm footprint web-text --output footprint.html\n\n"
        "  dsm footprint --prices my-prices.yaml --storage-classes my-classes.yaml --json\n\n"
        "Shared: one stored file several versions list. Extra copies: the same content stored at more than "
        "one location. Unreferenced: files only retired versions, or versions without an alias that are not "
        "their dataset's newest, list (what retire and gc can free). Raw bytes count the copies a storage "
        "class keeps (the storage-class table, replaceable like the price table)."
    )(footprint)
