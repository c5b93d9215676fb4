"""``dsm diff``: parse options, call :func:`dsm.commands.diff.diff`, render the two contracts side by side."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from dsm.cli import checks_failed
from dsm.cli.options import (
    CacheDirOpt,
    JsonOpt,
    ReasonOpt,
    RegistryOpt,
    StorageOpt,
    UnmaskOpt,
    WorkersOpt,
    storage_options,
)
from dsm.cli.render import progress_for
from dsm.errors import InputError

if TYPE_CHECKING:
    from dsm.inspect.rowdiff import ChangedRow, RowDiff

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
    rows: Annotated[
        bool, typer.Option("--rows", help="Compare the rows: added, removed and changed, by key.")
    ] = False,
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key",
            help="With --rows: a field that identifies a row (repeatable; default: the "
            "contract's key; without one, rows are compared by position).",
        ),
    ] = None,
    sample: Annotated[
        int, typer.Option("--sample", min=0, help="With --rows: rows shown of each kind.")
    ] = 10,
    fail_on_change: Annotated[
        bool, typer.Option("--fail-on-change", help="With --rows: exit 1 when any row differs (for CI).")
    ] = False,
    memory_limit: Annotated[
        str, typer.Option("--memory-limit", help="With --rows: hashed rows held at once, e.g. 256MB.")
    ] = "256MB",
    workdir: Annotated[
        str | None, typer.Option("--workdir", help="With --rows: where partitions spill (default: TMPDIR).")
    ] = None,
    no_fingerprints: Annotated[
        bool,
        typer.Option("--no-fingerprints", help="With --rows: read shards even where fingerprints are equal."),
    ] = False,
    unmask: UnmaskOpt = None,
    reason: ReasonOpt = None,
    cache_dir: CacheDirOpt = None,
    workers: WorkersOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Two contracts side by side, with a compatibility verdict for readers of the first; with --rows, the
    rows added, removed and changed between them."""
    from dsm.commands import diff as lib

    if rows:
        result_rows = lib.diff_rows(
            old,
            new,
            key=key or None,
            sample=sample,
            memory_limit=memory_limit,
            workers=workers,
            workdir=workdir,
            use_fingerprints=not no_fingerprints,
            unmask=unmask or (),
            reason=reason,
            registry=registry,
            storage_options=storage_options(storage_option),
            cache_dir=cache_dir,
            progress=progress_for(json_output),
        )
        if json_output:
            from dsm.cli.render import print_json

            print_json(result_rows.to_dict())
        else:
            _render_rows(result_rows)
        if fail_on_change and result_rows.differs:
            checks_failed()
        return
    given = [
        flag
        for flag, used in (("--key", key), ("--fail-on-change", fail_on_change), ("--unmask", unmask))
        if used
    ]
    if given:
        raise InputError(f"{given[0]} compares rows: add --rows")
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
    "  dsm diff web-text@3 web-text@4 --rows --key id --fail-on-change\n\n"
    "With --rows: rows added, removed and changed (by the key; by position when there is none), changed "
    "cells per column and a sample of each, old and new side by side; shards with equal fingerprints are "
    "skipped unread.\n\n"
    "Exit codes: 0 identical or compatible (with --rows: always, unless --fail-on-change and a row "
    "differs), 1 breaking (or a row differs with --fail-on-change), 2 bad input."
)


def _render_rows(result: RowDiff) -> None:
    from rich.text import Text

    from dsm.cli.render import console

    how = f"by key {', '.join(result.key)}" if result.key else "by position (no key)"
    console.print(Text(f"{result.old} → {result.new}: rows compared {how}", style="bold"), highlight=False)
    console.print(f"  rows: {result.old_rows:,} → {result.new_rows:,}", highlight=False)
    console.print(
        f"  added {result.added:,} · removed {result.removed:,} · changed {result.changed:,} · "
        f"unchanged {result.unchanged:,}",
        highlight=False,
    )
    changed = sorted(((n, c) for n, c in result.changed_cells.items() if c), key=lambda item: -item[1])
    if changed:
        cells = ", ".join(f"{name} {count:,}" for name, count in changed)
        console.print(Text(f"  changed cells: {cells}"), highlight=False, soft_wrap=True)
    for title, sample in (
        ("changed", result.sample_changed),
        ("added", result.sample_added),
        ("removed", result.sample_removed),
    ):
        if sample:
            console.print(Text(f"{title} (first {len(sample)} by position):", style="bold"), highlight=False)
            for row in sample:
                _render_changed(row)
    if result.skipped_shards:
        console.print(
            Text(
                f"{result.skipped_shards} shard(s), {result.skipped_rows:,} rows, skipped unread: "
                "equal fingerprints",
                style="dim",
            ),
            highlight=False,
        )
    for extra, side in ((result.columns_only_old, result.old), (result.columns_only_new, result.new)):
        if extra:
            console.print(
                Text(f"only in {side}: {', '.join(extra)} (not compared)", style="yellow"), highlight=False
            )
    for note in result.notes:
        console.print(Text(f"note: {note}", style="dim"), highlight=False)
    verdict = "rows differ" if result.differs else "no row differs"
    console.print(Text(verdict, style="bold red" if result.differs else "bold green"), highlight=False)


def _render_changed(row: ChangedRow) -> None:
    from rich.text import Text

    from dsm.cli.render import console

    key = ", ".join(f"{k}={v}" for k, v in row.key.items())
    where = f"old row {row.old_position:,}" if row.old_position is not None else ""
    if row.new_position is not None:
        where += (" → " if where else "") + f"new row {row.new_position:,}"
    console.print(Text(f"  {key} ({where})", style="cyan"), highlight=False)
    for name in row.columns or tuple(row.old or row.new):
        before = row.old.get(name)
        after = row.new.get(name)
        line = Text(f"    {name}: ")
        if before is not None:
            line.append(_value_text(before), style="red")
        if before is not None and after is not None:
            line.append(" → ")
        if after is not None:
            line.append(_value_text(after), style="green")
        console.print(line, highlight=False, soft_wrap=True)


def _value_text(cell: Any) -> str:
    import json

    if cell.masked or cell.value is None:
        return str(cell.summary)
    if isinstance(cell.value, str):
        text = cell.value
        return json.dumps(text if len(text) <= 200 else text[:197] + "...", ensure_ascii=False)
    return json.dumps(cell.value, ensure_ascii=False, default=str)[:200]


def add_to(app: typer.Typer) -> None:
    app.command(epilog=_EPILOG)(diff)
