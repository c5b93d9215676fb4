"""The small screens of the viewer: a one-line prompt (``g``, ``/``, ``:``, ``d``), the column picker and
the help."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, SelectionList, Static

__all__ = ["ColumnPicker", "HelpScreen", "Prompt"]


class Prompt(ModalScreen[str | None]):
    """Ask for one line of text; Enter gives it, Escape gives None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    Prompt { align: center bottom; }
    Prompt > Vertical { width: 100%; height: auto; background: $panel; padding: 0 1; }
    Prompt Label { color: $text-muted; }
    """

    def __init__(self, label: str, *, value: str = "", placeholder: str = "", id: str | None = None) -> None:
        super().__init__(id=id)
        self.label = label
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> Any:
        with Vertical():
            yield Label(self.label)
            yield Input(value=self.value, placeholder=self.placeholder, id="prompt-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ColumnPicker(ModalScreen[list[str] | None]):
    """Choose the table's columns (space toggles, Enter applies, Escape cancels)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("enter", "apply", "Apply", priority=True),
    ]
    DEFAULT_CSS = """
    ColumnPicker { align: center middle; }
    ColumnPicker > Vertical { width: 60; height: auto; max-height: 80%; background: $panel; padding: 0 1; }
    ColumnPicker SelectionList { height: auto; max-height: 20; }
    """

    def __init__(self, fields: Sequence[tuple[str, str]], shown: Sequence[str]) -> None:
        super().__init__()
        self.fields = list(fields)
        self.shown = set(shown)

    def compose(self) -> Any:
        with Vertical():
            yield Label("columns: space toggles, enter applies, escape cancels")
            yield SelectionList[str](
                *[(label, name, name in self.shown) for name, label in self.fields], id="columns"
            )

    def action_apply(self) -> None:
        chosen = set(self.query_one("#columns", SelectionList).selected)
        self.dismiss([name for name, _ in self.fields if name in chosen])

    def action_cancel(self) -> None:
        self.dismiss(None)


KEYS: tuple[tuple[str, str], ...] = (
    ("↑ ↓ PgUp PgDn", "move the cursor; Home / End: first and last row; ← →: scroll the columns"),
    ("g", "go to a row by position"),
    (
        ":",
        "a command: `:key 123` or `:key id=123` (find by key), `:row N`, `:columns a,b`, `:diff REF`, `:q`",
    ),
    ("/  n  N", "search the rows read so far (around the cursor); next, previous match"),
    ("f", "pick the table's columns"),
    ("c", "copy the row as JSON (masked values stay masked)"),
    ("d", "diff against another version (rows added, removed, changed by key)"),
    ("e", "the episode of this row (RL data): steps, rewards, playback"),
    ("tab", "move between the table and the detail pane"),
    ("?", "this help"),
    ("q", "quit (Escape closes a screen)"),
)


class HelpScreen(ModalScreen[None]):
    """The keys of the viewer."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close"),
        Binding("question_mark", "close", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: auto; max-width: 100%; height: auto; background: $panel; padding: 1 2; }
    """

    def __init__(self, extra: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__()
        self.extra = list(extra)

    def compose(self) -> Any:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for key, what in (*KEYS, *self.extra):
            table.add_row(key, what)
        yield Static(table)
        yield Static(Text("escape closes", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
