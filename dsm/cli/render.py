"""Rendering results for people (rich tables on stdout) and machines (one JSON document on stdout)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

__all__ = [
    "BarProgress",
    "console",
    "err_console",
    "human_bytes",
    "print_json",
    "progress_for",
    "render_pii_scan",
]

console = Console()
err_console = Console(stderr=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def human_bytes(n: int | float | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} PB"


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


_PII_WORDS = {"email": "e-mail addresses", "phone": "phone numbers", "card": "payment card numbers (Luhn)"}


def render_pii_scan(scan: dict[str, Any]) -> None:
    """The warnings of ``register --scan-pii`` (counts per field and kind; the scan keeps no value)."""
    findings = scan.get("findings") or []
    if not findings:
        console.print(f"  pii scan: nothing found in {scan.get('rows', 0):,} sampled rows")
        return
    for f in findings:
        what = _PII_WORDS.get(f["kind"], f["kind"])
        console.print(
            f"  [bold yellow]warning:[/] field {f['field']}: {f['count']:,} of {f['sampled']:,} sampled "
            f"values look like {what}: classify it (classification: pii, with --schema) or check the data",
            highlight=False,
        )
