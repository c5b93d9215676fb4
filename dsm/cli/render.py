"""Rendering results for people (rich tables on stdout) and machines (one JSON document on stdout).

The consoles wrap at the terminal's width only when they write to a terminal; piped or captured, a line is
never wrapped (a path, a URL, an error message stays whole), so scripts and tests read the same text
whatever the width of the terminal and the length of the paths. Numbers are written by the formatters of
:mod:`dsm.units` (``human_bytes``, ``si``, ``seconds``, ``duration``, ``money`` here).

Values are printed as they are, never read as rich markup (``timestamp[ms]`` stays ``timestamp[ms]``, a
path with brackets stays whole): :func:`esc` escapes a value put into a markup string, and every table is a
:class:`SafeTable`, whose cells and titles are plain text (a styled cell is :func:`styled`) and are never
cut: a value too long for a terminal folds onto the next line instead of ending in "…", and piped nothing
wraps at all.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from dsm.units import format_bytes as human_bytes
from dsm.units import format_duration as duration
from dsm.units import format_money as money
from dsm.units import format_seconds as seconds
from dsm.units import format_si as si

__all__ = [
    "PIPE_WIDTH",
    "BarProgress",
    "SafeTable",
    "console",
    "duration",
    "engine_line",
    "err_console",
    "esc",
    "human_bytes",
    "money",
    "print_json",
    "progress_for",
    "readiness_table",
    "seconds",
    "si",
    "styled",
]

PIPE_WIDTH = 100_000
"""Columns of a console that does not write to a terminal: wide enough that nothing wraps."""


class _StreamConsole(Console):
    """A console as wide as its terminal, or :data:`PIPE_WIDTH` when it does not write to one."""

    @property
    def size(self) -> ConsoleDimensions:
        if not self.is_terminal:
            return ConsoleDimensions(PIPE_WIDTH, 25)
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _StreamConsole()
err_console = _StreamConsole(stderr=True)


def esc(value: Any) -> str:
    """``value`` as text for a rich markup string, printed as it is (``[`` escaped); None is ``-``.

    >>> esc("timestamp[ms]")
    'timestamp\\[ms]'
    """
    return "-" if value is None else escape(str(value))


def styled(value: Any, style: str) -> Text:
    """A table cell or line holding ``value`` as it is, in ``style`` (``"bold red"``)."""
    return Text("-" if value is None else str(value), style=style)


def _plain(cell: Any) -> Any:
    return Text(cell) if isinstance(cell, str) else cell


class SafeTable(Table):
    """A rich table that shows every value whole and as it is.

    String cells, headers and the title are plain text, not markup (pass :func:`styled` cells for style).
    Columns fold a value too long for the terminal onto more lines instead of cutting it with "…", and the
    title is a line of its own above the table (rich would wrap it to the table's width).
    """

    def __init__(self, *headers: str, title: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.heading = title
        for header in headers:
            self.add_column(header)

    def add_column(self, header: Any = "", *args: Any, **options: Any) -> None:  # type: ignore[override]
        options.setdefault("overflow", "fold")
        super().add_column(_plain(header), *args, **options)

    def add_row(self, *cells: Any, **options: Any) -> None:
        super().add_row(*(_plain(cell) for cell in cells), **options)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.heading:
            yield Text(self.heading, style="table.title")
        yield from super().__rich_console__(console, options)


def engine_line(report: Any) -> str | None:
    """``ran on ray at 10.0.0.5:6379: 3 nodes, 48 CPUs, 1 retry`` for an engine other than local."""
    if report is None or report.engine == "local":
        return None
    retries = "retries not counted" if report.retries is None else f"{report.retries} retries"
    if report.retries == 1:
        retries = "1 retry"
    return (
        f"ran on {report.engine} at {report.address}: {report.nodes} node(s), {report.cpus} CPUs, {retries}"
        f" (start-up {seconds(report.startup_seconds)})"
    )


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


class _Rate(ProgressColumn):
    """Bytes per second once rich has measured it (nothing before: never a ``?``)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{human_bytes(int(speed))}/s", style="progress.data.speed")


class _Done(ProgressColumn):
    """Bytes done, of the total when there is one."""

    def render(self, task: Task) -> Text:
        done = human_bytes(int(task.completed))
        text = done if task.total is None else f"{done} of {human_bytes(int(task.total))}"
        return Text(text, style="progress.download")


class BarProgress:
    """A byte progress bar on stderr, used only when stderr is a terminal.

    With a total (the data's size), the bar fills as the work reports bytes, with the rate and the time
    left; without one (a benchmark that runs for a duration), it shows the bytes done, the rate and the time
    spent.
    """

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task: Any = None

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        time_column = TimeRemainingColumn() if total_bytes else TimeElapsedColumn()
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            _Done(),
            _Rate(),
            time_column,
            console=err_console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(f"{description} ({total_units} shards)", total=total_bytes or None)

    def advance(self, nbytes: int) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, nbytes)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def progress_for(json_output: bool) -> BarProgress | None:
    """A progress bar when a person watches stderr, else nothing."""
    if json_output or not sys.stderr.isatty():
        return None
    return BarProgress()


_READINESS_COLOURS = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red", "unknown": "dim"}


def readiness_table(checks: Any, *, title: str, skipped: Any = ()) -> Any:
    """The answers of ``dsm storage check`` as a table: ``checks`` are their ``to_dict()`` forms (what
    ``dsm storage check --json`` prints, and what a cutover plan keeps), ``skipped`` the names the user let
    fail (``--skip-readiness``)."""
    table = SafeTable("check", "status", "required", "answer", title=title)
    for c in checks:
        required = "yes" if c["required"] else ("skipped" if c["name"] in set(skipped) else "")
        table.add_row(
            c["name"], styled(c["status"], _READINESS_COLOURS.get(c["status"], "")), required, c["detail"]
        )
    return table
