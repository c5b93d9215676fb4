"""Rendering results for people (rich tables on stdout) and machines (one JSON document on stdout).

The consoles wrap at the terminal's width only when they write to a terminal; piped or captured, a line is
never wrapped (a path, a URL, an error message stays whole), so scripts and tests read the same text
whatever the width of the terminal and the length of the paths. Numbers are written by the formatters of
:mod:`dsm.units` (``human_bytes``, ``si``, ``seconds``, ``duration``, ``money`` here).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console, ConsoleDimensions
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from dsm.units import format_bytes as human_bytes
from dsm.units import format_duration as duration
from dsm.units import format_money as money
from dsm.units import format_seconds as seconds
from dsm.units import format_si as si

__all__ = [
    "PIPE_WIDTH",
    "BarProgress",
    "console",
    "duration",
    "engine_line",
    "err_console",
    "human_bytes",
    "money",
    "print_json",
    "progress_for",
    "readiness_table",
    "seconds",
    "si",
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


class BarProgress:
    """A byte progress bar on stderr, used only when stderr is a terminal."""

    def __init__(self) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=err_console,
            transient=True,
        )
        self._task: Any = None

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        self._bar.start()
        self._task = self._bar.add_task(f"{description} ({total_units} shards)", total=total_bytes or None)

    def advance(self, nbytes: int) -> None:
        if self._task is not None:
            self._bar.advance(self._task, nbytes)

    def finish(self) -> None:
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
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title)
    for column in ("check", "status", "required", "answer"):
        table.add_column(column)
    for c in checks:
        required = "yes" if c["required"] else ("skipped" if c["name"] in set(skipped) else "")
        colour = _READINESS_COLOURS.get(c["status"], "")
        table.add_row(c["name"], f"[{colour}]{c['status']}[/]", required, escape(c["detail"]))
    return table
