"""``dsm head``, ``sample``, ``find``, ``episodes``, ``log``, ``audit``: parse options, make one call on
:mod:`dsm.commands.inspect`, render the view model (rich text on a terminal, whole values when piped,
``--json`` for machines)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsm.cli import checks_failed
from dsm.cli.options import (
    CacheDirOpt,
    ColumnsOpt,
    JsonOpt,
    ReasonOpt,
    RefArg,
    RegistryOpt,
    StorageOpt,
    UnmaskOpt,
    storage_options,
)
from dsm.cli.render import progress_for

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from dsm.commands.inspect import EpisodeReport, FindResult, LineageLog
    from dsm.inspect.episodes import EpisodeSummary
    from dsm.inspect.view import CellView, RowPage

__all__ = ["add_to", "audit", "episodes", "find", "head", "log", "render_page", "sample"]

_TEXT_LINES = 12
_TEXT_CHARS = 1200
_TURN_CHARS = 400


def _columns(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [c.strip() for c in value.split(",") if c.strip()]
    return names or None


# ---------------------------------------------------------------------------------------------- render


def _clip(text: str, whole: bool, lines: int = _TEXT_LINES, chars: int = _TEXT_CHARS) -> tuple[str, str]:
    """``text`` (cut for a screen unless ``whole``) and a note of what was cut."""
    if whole:
        return text, ""
    kept = text.split("\n")
    note = ""
    if len(kept) > lines:
        note = f"... {len(kept) - lines:,} more lines"
        text = "\n".join(kept[:lines])
    if len(text) > chars:
        note = f"... {len(text) - chars:,} more chars" + (f", {note[4:]}" if note else "")
        text = text[:chars]
    return text, note


def _indented(text: str, indent: int) -> str:
    pad = " " * indent
    return "\n".join(pad + line for line in text.split("\n"))


def _cell_lines(cell: CellView, whole: bool, indent: int) -> list[Text]:
    """The lines below a cell's summary: the text, the chat turns, the JSON, ..."""
    import json

    from rich.text import Text

    out: list[Text] = []
    if cell.kind == "text" and isinstance(cell.value, str):
        body, note = _clip(cell.value, whole)
        out.append(Text(_indented(body, indent)))
        if note:
            out.append(Text(" " * indent + note, style="dim"))
    elif cell.kind == "messages" and isinstance(cell.value, list):
        width = max((len(t.get("role") or "?") for t in cell.value), default=4)
        for turn in cell.value:
            content, note = _clip(str(turn.get("content") or ""), whole, lines=6, chars=_TURN_CHARS)
            line = Text(" " * indent)
            style = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}.get(
                turn.get("kind"), "bold red"
            )
            line.append(f"{turn.get('role') or '?':<{width}}", style=style)
            line.append(" │ ")
            line.append(content.replace("\n", "\n" + " " * (indent + width + 3)))
            if note:
                line.append(f" {note}", style="dim")
            if turn.get("marks"):
                line.append("  [" + "; ".join(turn["marks"]) + "]", style="dim")
            out.append(line)
    elif cell.kind == "json" and cell.details.get("valid"):
        shown = cell.value if whole else cell.details.get("folded", cell.value)
        body, note = _clip(json.dumps(shown, indent=2, ensure_ascii=False), whole, lines=20)
        out.append(Text(_indented(body, indent)))
        if note:
            out.append(Text(" " * indent + note, style="dim"))
    elif cell.kind in ("list", "struct") and whole:
        out.append(Text(_indented(json.dumps(cell.value, ensure_ascii=False), indent)))
    return out


def _render_cells(console: Console, cells: Any, whole: bool, masked_style: str = "yellow") -> None:
    from rich.text import Text

    width = max((len(c.field) for c in cells), default=4) + 2
    for cell in cells:
        line = Text("  ")
        line.append(f"{cell.field:<{width}}", style="bold")
        if cell.masked:
            classification = cell.details.get("classification")
            line.append(cell.summary, style=masked_style)
            line.append(f"  [{classification}, masked]" if classification else "  [masked]", style="dim")
        else:
            summary = cell.summary
            if cell.kind == "scalar" and not whole:
                summary = _clip(summary, False, lines=1, chars=200)[0]
            line.append(summary)
            if cell.role and cell.kind not in ("scalar", "null"):
                line.append(f"  ({cell.role})", style="dim")
        console.print(line, highlight=False, soft_wrap=True)
        for extra in _cell_lines(cell, whole, width + 2):
            console.print(extra, highlight=False, soft_wrap=True)
        for anomaly in cell.anomalies:
            console.print(
                Text(f"  {'':<{width}}! {anomaly}", style="bold red"), highlight=False, soft_wrap=True
            )


def _episode_line(summary: EpisodeSummary) -> Text:
    from rich.text import Text

    from dsm.inspect.view import plain

    terminal = f"ends at step {summary.terminal_step}" if summary.terminal_step is not None else "never ends"
    line = Text(
        f"  episode {plain(summary.episode)}: {summary.length:,} steps (rows {summary.first_position:,}-"
        f"{summary.last_position:,}), return {plain(summary.total_reward)}, {terminal}"
    )
    for anomaly in summary.anomalies:
        line.append(f"\n    ! {anomaly}", style="bold red")
    return line


def render_page(page: RowPage, console: Console, *, title: str) -> None:
    """A page of rows as text: each row with where it lives, then its cells by role."""
    from rich.text import Text

    whole = not console.is_terminal
    header = Text(f"{page.dataset} · {title} · {page.total_rows:,} rows in all", style="bold")
    if page.masked:
        header.append(f" · masked: {', '.join(page.masked)}", style="yellow")
    if page.unmasked:
        header.append(f" · unmasked (audited): {', '.join(page.unmasked)}", style="bold yellow")
    console.print(header, highlight=False)
    for row in page.rows:
        console.print(
            Text(f"── row {row.position:,} · {row.location.describe()}", style="cyan"),
            highlight=False,
            soft_wrap=True,
        )
        _render_cells(console, row.cells, whole)
    if page.episodes:
        console.print(Text("episodes of these rows:", style="bold"), highlight=False)
        for summary in page.episodes:
            console.print(_episode_line(summary), highlight=False, soft_wrap=True)
    for note in page.notes:
        console.print(Text(f"note: {note}", style="dim"), highlight=False)


def _show_page(page: RowPage, json_output: bool, title: str) -> None:
    from dsm.cli.render import console, print_json

    if json_output:
        print_json(page.to_dict())
    else:
        render_page(page, console, title=title)


# --------------------------------------------------------------------------------------------- commands


def head(
    ref: RefArg,
    n: Annotated[int, typer.Option("-n", "--rows", min=0, help="How many rows.")] = 10,
    offset: Annotated[int, typer.Option("--offset", min=0, help="First row (0-based position).")] = 0,
    columns: ColumnsOpt = None,
    unmask: UnmaskOpt = None,
    reason: ReasonOpt = None,
    cache_dir: CacheDirOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Show rows from a position, rendered by the fields' roles; reads only the pieces holding them."""
    import dsm.commands.inspect as lib

    page = lib.head(
        ref,
        n=n,
        offset=offset,
        columns=_columns(columns),
        unmask=unmask or (),
        reason=reason,
        registry=registry,
        storage_options=storage_options(storage_option),
        cache_dir=cache_dir,
    )
    last = offset + len(page.rows) - 1
    _show_page(page, json_output, f"rows {offset:,}-{last:,}" if page.rows else f"no rows at {offset:,}")


def sample(
    ref: RefArg,
    n: Annotated[int, typer.Option("-n", "--rows", min=0, help="How many rows.")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="Seed: the same seed shows the same rows.")] = 0,
    columns: ColumnsOpt = None,
    unmask: UnmaskOpt = None,
    reason: ReasonOpt = None,
    cache_dir: CacheDirOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Show rows drawn uniformly from the whole dataset (seeded), reading only the pieces holding them."""
    import dsm.commands.inspect as lib

    page = lib.sample(
        ref,
        n=n,
        seed=seed,
        columns=_columns(columns),
        unmask=unmask or (),
        reason=reason,
        registry=registry,
        storage_options=storage_options(storage_option),
        cache_dir=cache_dir,
    )
    _show_page(page, json_output, f"{len(page.rows):,} rows sampled with seed {seed}")


def find(
    ref: RefArg,
    row: Annotated[int | None, typer.Option("--row", min=0, help="A row by its 0-based position.")] = None,
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key",
            help="FIELD=VALUE to match (repeatable for a composite key); VALUE alone for "
            "the contract's one key field.",
        ),
    ] = None,
    all_matches: Annotated[bool, typer.Option("--all", help="Every match, not only the first.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="With --all: stop after this many.")] = 100,
    columns: ColumnsOpt = None,
    unmask: UnmaskOpt = None,
    reason: ReasonOpt = None,
    cache_dir: CacheDirOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Find a row by position or key, with its shard, row group and position, so a bug report can name it.

    Exit code 1 when no row matches."""
    import dsm.commands.inspect as lib

    result = lib.find(
        ref,
        row=row,
        key=key,
        all=all_matches,
        limit=limit,
        columns=_columns(columns),
        unmask=unmask or (),
        reason=reason,
        registry=registry,
        storage_options=storage_options(storage_option),
        cache_dir=cache_dir,
        progress=progress_for(json_output),
    )
    if json_output:
        from dsm.cli.render import print_json

        print_json(result.to_dict())
    else:
        _render_find(result)
    if not result.found:
        checks_failed()


def _render_find(result: FindResult) -> None:
    from rich.text import Text

    from dsm.cli.render import console

    query = result.query.get("key") or {}
    asked = (
        f"row {result.query['row']:,}"
        if "row" in result.query
        else ", ".join(f"{k}={v}" for k, v in query.items())
    )
    if result.found:
        render_page(result.page, console, title=f"{len(result.page.rows):,} match(es) for {asked}")
    else:
        console.print(
            Text(
                f"{result.dataset}: no row with {asked} ({result.scanned_rows:,} rows read)", style="bold red"
            ),
            highlight=False,
        )
    for note in result.notes:
        console.print(Text(f"note: {note}", style="dim"), highlight=False)
    if result.found and not result.complete and "key" in result.query:
        console.print(
            Text(
                f"stopped at the first match after {result.scanned_rows:,} rows; --all for every match",
                style="dim",
            ),
            highlight=False,
        )


def episodes(
    ref: RefArg,
    anomalies: Annotated[
        bool, typer.Option("--anomalies", help="Only the episodes that look wrong.")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Show at most this many episodes.")] = 1000,
    unmask: UnmaskOpt = None,
    reason: ReasonOpt = None,
    cache_dir: CacheDirOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Summarise the episodes of RL data: length, return, where done fires, and anomalies (an episode that
    never terminates, NaN rewards, steps out of order). Exit code 1 when an episode is anomalous."""
    import dsm.commands.inspect as lib

    report = lib.episodes(
        ref,
        anomalies_only=anomalies,
        limit=limit,
        unmask=unmask or (),
        reason=reason,
        registry=registry,
        storage_options=storage_options(storage_option),
        cache_dir=cache_dir,
        progress=progress_for(json_output),
    )
    if json_output:
        from dsm.cli.render import print_json

        print_json(report.to_dict())
    else:
        _render_episodes(report)
    if report.anomalous:
        checks_failed()


def _render_episodes(report: EpisodeReport) -> None:
    from rich.text import Text

    from dsm.cli.render import console

    layout = report.layout
    fields = ", ".join(
        f"{role}={name}" for role, name in layout.to_dict().items() if role != "layout" and name
    )
    console.print(
        Text(
            f"{report.dataset}: {report.total:,} episodes ({layout.layout} layout: {fields}), "
            f"{report.anomalous:,} anomalous",
            style="bold",
        ),
        highlight=False,
        soft_wrap=True,
    )
    for kind, count in sorted(report.by_anomaly.items(), key=lambda item: -item[1]):
        console.print(Text(f"  {count:,} × {kind}", style="bold red"), highlight=False)
    for summary in report.episodes:
        console.print(_episode_line(summary), highlight=False, soft_wrap=True)
    if report.truncated:
        console.print(Text(f"(the first {len(report.episodes):,} shown; --limit for more)", style="dim"))


def log(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Every version of a dataset as a lineage tree, newest first: operation, parent, parameters, created,
    status and the aliases pointing to it."""
    import dsm.commands.inspect as lib

    result = lib.log(name, registry=registry, storage_options=storage_options(storage_option))
    if json_output:
        from dsm.cli.render import print_json

        print_json(result.to_dict())
    else:
        _render_log(result)


def _render_log(result: LineageLog) -> None:
    import json

    from rich.text import Text

    from dsm.cli.render import console

    console.print(Text(f"{result.name}: {len(result.entries)} versions", style="bold"), highlight=False)
    for entry in result.entries:
        line = Text("  " + "   " * entry.depth + ("└─ " if entry.depth else ""))
        line.append(f"@{entry.version}", style="bold cyan")
        if entry.aliases:
            line.append(" (" + ", ".join(entry.aliases) + ")", style="bold green")
        line.append(f" {entry.operation or '?'}")
        if entry.parent:
            line.append(f" of {entry.parent}")
        line.append(
            f" · {entry.created or 'no date'} · {entry.status}",
            style="dim" if entry.status == "active" else "yellow",
        )
        rows = f"{entry.rows:,} rows" if entry.rows is not None else "rows unknown"
        line.append(f" · {entry.format}, {rows}", style="dim")
        if entry.parameters:
            line.append(" · " + json.dumps(dict(entry.parameters), sort_keys=True, default=str), style="dim")
        console.print(line, highlight=False, soft_wrap=True)


def audit(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Who unmasked which classified fields of a dataset, when, with which command and why."""
    import dsm.commands.inspect as lib

    result = lib.audit(name, registry=registry, storage_options=storage_options(storage_option))
    if json_output:
        from dsm.cli.render import print_json

        print_json(result.to_dict())
        return
    from rich.table import Table

    from dsm.cli.render import console

    table = Table(title=f"{result.name}: {len(result.records)} unmasking(s)")
    for column in ("at", "user", "host", "version", "fields", "command", "reason"):
        table.add_column(column)
    for record in result.records:
        fields = ", ".join(f"{f} ({record.classifications.get(f, '?')})" for f in record.fields)
        table.add_row(
            record.at,
            record.user,
            record.host,
            str(record.version),
            fields,
            record.command,
            record.reason or "",
        )
    console.print(table)


_EPILOGS = {
    "head": "Examples:\n\n  dsm head web-text@prod\n\n"
    "  dsm head web-text@3 -n 5 --offset 4000000 --columns id,text\n\n"
    "  dsm head chats --unmask email --reason 'ticket 4411' --json",
    "sample": "Examples:\n\n  dsm sample web-text@prod -n 20 --seed 7\n\n"
    "  dsm sample images --columns id,image --json",
    "find": "Examples:\n\n  dsm find web-text@prod --row 4481216\n\n  dsm find web-text@prod --key id=123\n\n"
    "  dsm find events --key user=42 --key day=2026-11-30 --all --json\n\n"
    "Exit codes: 0 found, 1 no row matches, 2 bad input.",
    "episodes": "Examples:\n\n  dsm episodes rollouts@3\n\n  dsm episodes rollouts@3 --anomalies --json\n\n"
    "Exit codes: 0 every episode looks right, 1 an episode is anomalous, 2 bad input.",
    "log": "Examples:\n\n  dsm log web-text\n\n  dsm log web-text --json",
    "audit": "Examples:\n\n  dsm audit chats\n\n  dsm audit chats --json",
}


def add_to(app: typer.Typer) -> None:
    for command in (head, sample, find, episodes, log, audit):
        app.command(name=command.__name__, epilog=_EPILOGS[command.__name__])(command)
