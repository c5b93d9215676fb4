"""``dsm storage check URL``: parse, call :func:`dsm.commands.storage_check.storage_check`, render."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from dsm.cli import checks_failed
from dsm.cli.options import JsonOpt, StorageOpt, storage_options
from dsm.cli.render import console, human_bytes, print_json, readiness_table, seconds

if TYPE_CHECKING:
    from dsm.commands.storage_check import ReadinessReport

__all__ = ["add_to", "check", "storage_app"]

storage_app = typer.Typer(
    name="storage",
    help="Storage readiness: what a bucket, container or folder answers before data moves there.",
    epilog="Example:\n\n  dsm storage check s3://new-bucket/datasets/ --require atomicity,security",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


def _render(report: ReadinessReport) -> None:
    checks = [c.to_dict() for c in report.checks]
    console.print(readiness_table(checks, title=f"{report.url} ({report.store})"))
    figures = report.throughput
    if figures is not None and not figures.errors:
        put, get = figures.put_latency_s, figures.get_latency_s
        console.print(
            f"throughput: {figures.objects} x {human_bytes(figures.object_size)} with {figures.workers} "
            f"workers: PUT {human_bytes(figures.put_bytes_per_s)}/s (p50 {seconds(put['p50'])}, p99 "
            f"{seconds(put['p99'])}), GET {human_bytes(figures.get_bytes_per_s)}/s "
            f"(p50 {seconds(get['p50'])}, p99 {seconds(get['p99'])}), "
            f"first byte p50 {seconds(figures.first_byte_s['p50'])}"
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
        checks_failed()


def add_to(app: typer.Typer) -> None:
    app.add_typer(storage_app, name="storage")
