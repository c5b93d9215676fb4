"""``dsm storage check URL``: parse, call :func:`dsm.commands.storage_check.storage_check`, render."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from dsm.cli import CheckFailedExit, exits
from dsm.cli.app import JsonOpt, StorageOpt, app, storage_options
from dsm.cli.render import console, human_bytes, print_json

if TYPE_CHECKING:
    from dsm.commands.storage_check import ReadinessReport

__all__ = ["check", "storage_app"]

storage_app = typer.Typer(
    name="storage",
    help="Storage readiness: what a bucket, container or folder answers before data moves there.",
    epilog="Example:\n\n  dsm storage check s3://new-bucket/datasets/ --require atomicity,security",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.add_typer(storage_app, name="storage")

_COLOURS = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "unknown": "dim"}


def render_checks(report: ReadinessReport, *, title: str | None = None) -> None:
    """The checks of a readiness report as a table (also used by ``dsm cutover plan``)."""
    table = Table(title=title or f"{report.url} ({report.store})")
    for column in ("check", "status", "required", "answer"):
        table.add_column(column)
    for c in report.checks:
        table.add_row(
            c.name, f"[{_COLOURS[c.status]}]{c.status}[/]", "yes" if c.required else "", escape(c.detail)
        )
    console.print(table)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _render(report: ReadinessReport) -> None:
    render_checks(report)
    figures = report.throughput
    if figures is not None and not figures.errors:
        put, get = figures.put_latency_s, figures.get_latency_s
        console.print(
            f"throughput: {figures.objects} x {human_bytes(figures.object_size)} with {figures.workers} "
            f"workers: PUT {human_bytes(figures.put_bytes_per_s)}/s (p50 {_ms(put['p50'])}, p99 "
            f"{_ms(put['p99'])}), GET {human_bytes(figures.get_bytes_per_s)}/s (p50 {_ms(get['p50'])}, p99 "
            f"{_ms(get['p99'])}), first byte p50 {_ms(figures.first_byte_s['p50'])}"
        )
    scratch = report.scratch
    if scratch.clean:
        written = scratch.objects_written
        console.print(f"scratch: {written} object(s) written under {escape(scratch.prefix)}, all removed")
    else:
        console.print(f"[bold red]scratch left behind:[/] {escape(', '.join(scratch.left))}")
    for key, value in scratch.notes.items():
        if key == "soft_deleted":
            console.print(f"  note: {escape(str(value))}")
    verdict = "[bold green]READY[/]" if report.ok else "[bold red]NOT READY[/]"
    failed = ", ".join(c.name for c in report.failed)
    console.print(
        f"{verdict} {escape(report.url)}" + (f": required check(s) did not pass: {failed}" if failed else "")
    )


@storage_app.command(
    epilog="Examples:\n\n  dsm storage check s3://new-bucket/datasets/\n\n"
    "  dsm storage check az://container/prefix --require atomicity,security --json\n\n"
    "  dsm storage check /mnt/data --objects 16 --object-size 8MiB --min-throughput 200MB/s\n\n"
    "Checks (groups): write, read, list, delete (permissions); conditional-create, compare-and-swap "
    "(atomicity); read-after-write, list-after-write (consistency); server-checksums (checksums); "
    "delete-protection (durability); encryption, public-access (security); throughput. Each answers "
    "pass, warn, fail, or unknown where the store's API does not tell. Always required: permissions "
    "and consistency; --require adds more. Scratch objects go under URL/.dsm-tmp-readiness-*/ and are "
    "always removed.\n\n"
    "Exit codes: 0 every required check passed, 1 one did not, 2 bad input, 3 storage failure."
)
@exits
def check(
    url: Annotated[
        str, typer.Argument(help="The folder, bucket prefix or container prefix (any fsspec URL).")
    ],
    require: Annotated[
        list[str] | None,
        typer.Option(
            "--require", help="Checks or groups that must pass (repeatable or comma-separated; all)."
        ),
    ] = None,
    checks: Annotated[
        list[str] | None, typer.Option("--check", help="Run only these checks or groups (repeatable).")
    ] = None,
    objects: Annotated[
        int, typer.Option("--objects", help="Objects the throughput probe writes and reads.")
    ] = 8,
    object_size: Annotated[
        str, typer.Option("--object-size", help="Size of each probe object (1MiB, 8MB; at most 1 GiB).")
    ] = "1MiB",
    workers: Annotated[int, typer.Option("--workers", help="Parallel requests of the throughput probe.")] = 4,
    min_throughput: Annotated[
        str | None, typer.Option("--min-throughput", help="Fail throughput below this rate (200MB/s).")
    ] = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Check that a location is ready: permissions, atomicity, checksums, durability, security, speed."""
    from dsm.commands import storage_check as lib

    report = lib.storage_check(
        url,
        require=require or (),
        checks=checks,
        objects=objects,
        object_size=object_size,
        workers=workers,
        min_throughput=min_throughput,
        storage_options=storage_options(storage_option),
    )
    if json_output:
        print_json(report.to_dict())
    else:
        _render(report)
    if not report.ok:
        raise CheckFailedExit()
