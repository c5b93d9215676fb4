"""The diff view: rows added, removed and changed between two versions, from the inspect layer's keyed diff.

:func:`dsm.inspect.rowdiff.compare_rows` runs once in a worker (shards with equal fingerprints are skipped
unread; memory is one hash partition), with its progress shown; then the differences of each kind are a lazy
table paged through :meth:`RowDiffRun.page`, and the selected one is shown side by side, OLD beside NEW,
changed cells highlighted (in a text, the changed characters). ``1``/``2``/``3`` switch between changed,
added and removed; ``escape`` goes back (a comparison still running is stopped, its work folder removed).
"""

from __future__ import annotations

import difflib
import json
import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, ProgressBar, Static

from dsm.errors import DsmError
from dsm.inspect.rowdiff import ChangedRow, RowDiffRun, compare_rows
from dsm.inspect.source import RowSource
from dsm.inspect.view import CellView
from dsm.viewers.tui.cells import preview
from dsm.viewers.tui.table import Column, LazyTable
from dsm.viewers.tui.window import RowWindow

__all__ = ["DiffScreen", "marked_pair"]

KINDS = ("changed", "added", "removed")
_TEXT_DIFF_CHARS = 4000


class _Stopped(Exception):
    """The person left the diff view while the comparison ran."""


class _Progress:
    """The comparison's progress, handed to the screen's bar at most ten times a second."""

    def __init__(self, screen: DiffScreen) -> None:
        self.screen = screen
        self.total = 0
        self.done = 0
        self._shown = 0.0

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        self.total, self.done = total_bytes, 0
        self.screen.app.call_from_thread(self.screen._progress, self.total, 0, description)

    def advance(self, nbytes: int) -> None:
        if self.screen.stopping.is_set():
            raise _Stopped()
        self.done += nbytes
        now = time.monotonic()
        if now - self._shown > 0.1:
            self._shown = now
            self.screen.app.call_from_thread(self.screen._progress, self.total, self.done, None)

    def finish(self) -> None:
        pass


def marked_pair(old: CellView | None, new: CellView | None) -> tuple[Text, Text]:
    """Two cells side by side, what differs highlighted: in texts the changed characters, otherwise the
    whole value."""

    def whole(cell: CellView | None) -> str:
        if cell is None:
            return ""
        if cell.masked:
            return cell.summary
        if isinstance(cell.value, str):
            return cell.value
        if cell.kind in ("list", "struct", "json", "messages") and cell.value is not None:
            return json.dumps(cell.value, ensure_ascii=False)
        return cell.summary

    a, b = whole(old)[:_TEXT_DIFF_CHARS], whole(new)[:_TEXT_DIFF_CHARS]
    if old is None or new is None or old.masked or new.masked:
        return (
            Text(a, style="on dark_red" if old is not None else "dim"),
            Text(b, style="on dark_green" if new is not None else "dim"),
        )
    left, right = Text(), Text()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append(a[i1:i2])
            right.append(b[j1:j2])
        else:
            left.append(a[i1:i2], style="bold white on dark_red")
            right.append(b[j1:j2], style="bold white on dark_green")
    return left, right


class DiffScreen(Screen[None]):
    """OLD against NEW, by OLD's contract key (by position without one)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("1", "kind('changed')", "Changed"),
        Binding("2", "kind('added')", "Added"),
        Binding("3", "kind('removed')", "Removed"),
    ]
    DEFAULT_CSS = """
    DiffScreen { layout: vertical; }
    DiffScreen > #diff-summary { height: auto; max-height: 6; padding: 0 1; background: $panel; }
    DiffScreen > ProgressBar { padding: 0 1; }
    DiffScreen > #diff-rows { height: 1fr; min-height: 5; }
    DiffScreen > #diff-side { height: 1fr; border-top: solid $panel-lighten-2; padding: 0 1; }
    """

    def __init__(self, old: RowSource, new: RowSource) -> None:
        super().__init__()
        self.old = old
        self.new = new
        self.run: RowDiffRun | None = None
        self.kind = "changed"
        self.error: str | None = None
        self.stopping = threading.Event()
        self.window: RowWindow[ChangedRow] = RowWindow(0, self._fetch)

    def compose(self) -> Any:
        yield Static(Text(f"comparing {self.old.ref} → {self.new.ref}…", style="bold"), id="diff-summary")
        yield ProgressBar(id="diff-progress", show_eta=False)
        yield LazyTable(self.window, self._columns(), id="diff-rows")
        with VerticalScroll(id="diff-side"):
            yield Static(id="diff-pair")
        yield Footer()

    def on_mount(self) -> None:
        self._compare()

    def on_unmount(self) -> None:
        self.stopping.set()
        if self.run is not None:
            self.run.close()

    @property
    def table(self) -> LazyTable[ChangedRow]:
        return self.query_one("#diff-rows", LazyTable)

    def _columns(self) -> list[Column[ChangedRow]]:
        def key(row: ChangedRow) -> Text:
            return Text(", ".join(f"{k}={v}" for k, v in row.key.items()))

        def where(row: ChangedRow) -> Text:
            old = "-" if row.old_position is None else f"{row.old_position:,}"
            new = "-" if row.new_position is None else f"{row.new_position:,}"
            return Text(f"{old} → {new}")

        def columns(row: ChangedRow) -> Text:
            if row.kind != "changed":
                return Text(row.kind, style="green" if row.kind == "added" else "red")
            return Text(", ".join(row.columns), style="yellow")

        def first(row: ChangedRow) -> Text:
            name = row.columns[0] if row.columns else next(iter(row.new or row.old), None)
            if name is None:
                return Text("")
            cell = (row.new or {}).get(name) or (row.old or {}).get(name)
            return preview(cell) if cell is not None else Text("")

        return [
            Column(name="key", width=16, render=key),
            Column(name="rows old → new", width=20, render=where),
            Column(name="columns", width=18, render=columns),
            Column(name="value (new)", width=40, render=first),
        ]

    # ---------------------------------------------------------------------------------- comparing

    @work(thread=True, group="diff", exit_on_error=False)
    def _compare(self) -> None:
        try:
            run = compare_rows(self.old, self.new, sample=0, progress=_Progress(self))
        except _Stopped:
            return
        except DsmError as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        if self.stopping.is_set():
            run.close()
            return
        self.app.call_from_thread(self._compared, run)

    def _progress(self, total: int, done: int, description: str | None) -> None:
        bar = self.query_one("#diff-progress", ProgressBar)
        bar.update(total=max(total, 1), progress=done)

    def _failed(self, message: str) -> None:
        self.error = message
        self.query_one("#diff-progress", ProgressBar).display = False
        self.query_one("#diff-summary", Static).update(Text(f"cannot compare: {message}", style="bold red"))

    def _compared(self, run: RowDiffRun) -> None:
        self.run = run
        self.query_one("#diff-progress", ProgressBar).display = False
        self.query_one("#diff-summary", Static).update(self._summary())
        first = next((k for k in KINDS if run.total(k)), "changed")
        self.action_kind(first)

    def _summary(self) -> Text:
        if self.run is None:
            return Text(f"comparing {self.old.ref} → {self.new.ref}…", style="bold")
        d = self.run.summary
        how = f"by key {', '.join(d.key)}" if d.key else "by position"
        text = Text(f"{d.old} → {d.new}: rows compared {how}\n", style="bold")
        text.append(f"rows {d.old_rows:,} → {d.new_rows:,} · ")
        text.append(f"changed {d.changed:,}", style="yellow")
        text.append(" · ")
        text.append(f"added {d.added:,}", style="green")
        text.append(" · ")
        text.append(f"removed {d.removed:,}", style="red")
        text.append(f" · unchanged {d.unchanged:,}")
        cells = ", ".join(f"{k} {v:,}" for k, v in d.changed_cells.items() if v)
        if cells:
            text.append(f"\nchanged cells: {cells}")
        if d.identical_by_fingerprint:
            text.append("\nidentical by fingerprint: nothing was read", style="dim")
        elif d.skipped_shards:
            text.append(f"\n{d.skipped_shards} shard(s) skipped by equal fingerprints", style="dim")
        for note in d.notes:
            text.append(f"\nnote: {note}", style="dim")
        text.append(f"\nshowing {self.kind} · 1 changed · 2 added · 3 removed · escape back", style="dim")
        return text

    def _fetch(self, offset: int, count: int) -> Sequence[ChangedRow]:
        if self.run is None:
            return []
        return self.run.page(self.kind, offset, count).rows

    def action_kind(self, kind: str) -> None:
        if self.run is None:
            return
        self.kind = kind
        self.window = RowWindow(self.run.total(kind), self._fetch)
        self.table.set_window(self.window)
        self.query_one("#diff-summary", Static).update(self._summary())
        self._show_pair()

    def action_back(self) -> None:
        self.stopping.set()
        self.dismiss(None)

    def screen_ready(self) -> bool:
        return (self.run is not None or self.error is not None) and self.table.screen_ready()

    # ------------------------------------------------------------------------------- side by side

    def on_lazy_table_cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        self._show_pair()

    def _show_pair(self) -> None:
        pair = self.query_one("#diff-pair", Static)
        if self.run is None:
            return
        if self.window.total == 0:
            pair.update(Text(f"no {self.kind} rows", style="dim"))
            return
        row = self.table.row_at_cursor()
        if row is None:
            pair.update(Text("reading…", style="dim"))
            return
        table = Table(expand=True, show_lines=True, title_justify="left")
        table.title = ", ".join(f"{k}={v}" for k, v in row.key.items())
        table.add_column("field", style="bold", no_wrap=True, ratio=1)
        table.add_column(
            f"OLD {self.old.ref}" + (f" row {row.old_position:,}" if row.old_position is not None else ""),
            ratio=3,
        )
        table.add_column(
            f"NEW {self.new.ref}" + (f" row {row.new_position:,}" if row.new_position is not None else ""),
            ratio=3,
        )
        names = list(dict.fromkeys([*row.old, *row.new]))
        for name in names:
            left, right = marked_pair(row.old.get(name), row.new.get(name))
            changed = name in row.columns
            table.add_row(Text(name, style="bold yellow" if changed else "bold"), left, right)
        pair.update(table)
