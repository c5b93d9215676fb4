"""``dsm deprecate``, ``dsm retire``, ``dsm gc``: parse, call :mod:`dsm.commands.lifecycle`, render."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from dsm.cli import checks_failed
from dsm.cli.options import JsonOpt, RegistryOpt, StorageOpt, storage_options
from dsm.cli.render import console, human_bytes, print_json

if TYPE_CHECKING:
    from dsm.commands.lifecycle import GcReport, StatusChange

__all__ = ["add_to", "deprecate", "gc", "retire"]

VersionArg = Annotated[
    str, typer.Argument(help="The version: NAME@N, NAME@ALIAS or NAME (its newest version not retired).")
]
ReasonOpt = Annotated[str | None, typer.Option("--reason", help="Why (kept with the status).")]


def _render_change(change: StatusChange, json_output: bool) -> None:
    if json_output:
        print_json(change.to_dict())
        return
    if not change.changed:
        console.print(f"{change.ref} was already {change.status} ({escape(change.reason)}, {change.at})")
        return
    console.print(f"{change.ref}: {change.previous} → [bold]{change.status}[/] ({escape(change.reason)})")


def _set_status(
    command: str, ref: str, reason: str | None, registry: str | None, options: list[str] | None
) -> StatusChange:
    from dsm.commands import lifecycle

    change: StatusChange = getattr(lifecycle, command)(
        ref, reason=reason, registry=registry, storage_options=storage_options(options)
    )
    return change


def deprecate(
    ref: VersionArg,
    reason: ReasonOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Mark a version deprecated: superseded, still readable, its data kept."""
    _render_change(_set_status("deprecate", ref, reason, registry, storage_option), json_output)


def retire(
    ref: VersionArg,
    reason: ReasonOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Mark a version retired: no longer read; gc may delete the files dsm wrote for it."""
    _render_change(_set_status("retire", ref, reason, registry, storage_option), json_output)


def _render_gc(report: GcReport) -> None:
    table = Table(title=f"gc {report.run}" + (" (dry run)" if report.dry_run else ""))
    for column in ("version", "file", "bytes", "action", "why"):
        table.add_column(column, overflow="fold")  # whole paths, never cut
    colours = {"delete": "yellow", "deleted": "bold red", "missing": "dim", "kept": "green"}
    for version in report.versions:
        if not version.files:
            style = "bold red" if version.decision == "refused" else "green"
            table.add_row(version.ref, "-", "-", f"[{style}]{version.decision}[/]", escape(version.reason))
            continue
        for f in version.files:
            table.add_row(
                version.ref,
                escape(f.url),
                human_bytes(f.bytes),
                f"[{colours.get(f.action, '')}]{f.action}[/]",
                escape(f.reason),
            )
    console.print(table)
    verb = "would delete" if report.dry_run else "deleted"
    console.print(f"{verb} {len(report.files_deleted)} file(s), {human_bytes(report.bytes_deleted)}")
    for note in report.notes:
        console.print(f"  {escape(note)}")


def gc(
    names: Annotated[
        list[str] | None, typer.Argument(help="Datasets to collect (default: every dataset).")
    ] = None,
    retain: Annotated[
        str, typer.Option("--retain", help="Keep retired versions' data this long after retiring (7d, 0).")
    ] = "7d",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would be deleted (the default).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Delete the files listed, and journal it.")] = False,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Delete the files dsm wrote for retired versions nothing else uses (a dry run unless --yes)."""
    from dsm.commands import lifecycle

    report = lifecycle.gc(
        names or (),
        retain=retain,
        dry_run=dry_run or None,
        yes=yes,
        registry=registry,
        storage_options=storage_options(storage_option),
    )
    if json_output:
        print_json(report.to_dict())
    else:
        _render_gc(report)
    if not report.ok:
        checks_failed()


def add_to(app: typer.Typer) -> None:
    app.command(
        epilog="Examples:\n\n  dsm deprecate web-text@2 --reason 'superseded by web-text@3'\n\n"
        "  dsm deprecate web-text@2 --json"
    )(deprecate)
    app.command(
        epilog="Examples:\n\n  dsm retire web-text@1 --reason 'replaced by web-text@3'\n\n"
        "Refused (exit 2) while an alias points at the version; afterwards no alias can point at it, and "
        "`dsm gc` may delete the files dsm wrote for it."
    )(retire)
    app.command(
        epilog="Examples:\n\n  dsm gc                     (dry run: lists what would be deleted)\n\n"
        "  dsm gc web-text --retain 30d --yes\n\n  dsm gc --json\n\n"
        "Deletes only files dsm wrote (convert-format, reshard, cutover copies) for versions retired longer "
        "ago than --retain, that no alias points at and that no other version of any dataset lists; every "
        "deletion is journaled in the registry (NAME/deletions/).\n\n"
        "Exit codes: 0 done, 1 a retired version was refused (an alias points at it), 2 bad input, "
        "3 storage failure."
    )(gc)
