"""``dsm diff``: parse options, call :func:`dsm.commands.diff.diff`, render the two contracts side by side."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from dsm.cli import checks_failed
from dsm.cli.options import JsonOpt, RegistryOpt, StorageOpt, storage_options

__all__ = ["add_to", "diff"]


def _cell(value: Any) -> str:
    """A table cell, escaped: type names such as ``timestamp[us, tz=UTC]`` are not rich markup."""
    from rich.markup import escape

    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return escape(json.dumps(value, sort_keys=True)) if value else "-"
    return escape(str(value))


def diff(
    old: Annotated[str, typer.Argument(help="The contract readers use now: NAME@N, NAME@ALIAS or a file.")],
    new: Annotated[str, typer.Argument(help="The contract to compare with it.")],
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Two contracts side by side, with a compatibility verdict for readers of the first."""
    from dsm.commands import diff as lib

    result = lib.diff(old, new, registry=registry, storage_options=storage_options(storage_option) or None)
    if json_output:
        from dsm.cli.render import print_json

        print_json(result.to_dict())
    else:
        from dsm.cli.render import console

        props = Table(title=f"{result.old} → {result.new}", show_edge=False)
        for column in ("", result.old, result.new):
            props.add_column(column)
        for row in result.properties:
            style = "" if row.same else "bold"
            props.add_row(
                row.item, _cell(row.old), f"[{style}]{_cell(row.new)}[/]" if style else _cell(row.new)
            )
        console.print(props)
        fields = Table(title="fields", show_edge=False)
        for column in ("field", result.old, result.new, "change"):
            fields.add_column(column)
        for field in result.fields:
            fields.add_row(_cell(field.name), _cell(field.old), _cell(field.new), field.change)
        console.print(fields)
        for change in result.changes:
            mark = "[bold red]breaking[/]" if change.breaking else "compatible"
            console.print(
                f"  {mark} {_cell(change.field)}: {change.change} ({_cell(change.detail)})", highlight=False
            )
        colour = {"breaking": "bold red", "compatible": "bold yellow", "identical": "bold green"}[
            result.verdict
        ]
        console.print(f"verdict for readers of {_cell(result.old)}: [{colour}]{result.verdict}[/]")
    if result.verdict == "breaking":
        checks_failed()


_EPILOG = (
    "Examples:\n\n  dsm diff web-text@prod web-text@4\n\n"
    "  dsm diff web-text@3 new-contract.yaml --json\n\n"
    "The verdict is for readers of OLD: a removed field, a narrowed or changed type, or a change of "
    "nullability is breaking; an added field or a widened type (int32->int64, float32->float64, "
    "string->large_string) is compatible.\n\n"
    "Exit codes: 0 identical or compatible, 1 breaking, 2 bad input."
)


def add_to(app: typer.Typer) -> None:
    app.command(epilog=_EPILOG)(diff)
