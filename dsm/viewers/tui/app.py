"""The ``dsm view`` app: a lazy table of rows, the selected row in a detail pane, a status line.

The table (:class:`~dsm.viewers.tui.table.LazyTable`) holds only the blocks of rows around the screen, read
through the row source in a worker thread; the row count is the contract's. Everything shown comes from the
inspect layer's view model, masked there: the app never sees a masked value, so no screen, search or copy can
show one. Key lookups, the episode scan and the row diff run in workers; their errors are shown, not raised.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.widgets import Footer, Static

from dsm.commands.inspect import parse_key
from dsm.errors import DsmError, InputError
from dsm.inspect.source import RowSource
from dsm.inspect.view import FieldView, RowView
from dsm.viewers.tui.cells import preview, row_text, row_weight
from dsm.viewers.tui.detail import DetailPane
from dsm.viewers.tui.prompts import ColumnPicker, HelpScreen, Prompt
from dsm.viewers.tui.table import Column, LazyTable
from dsm.viewers.tui.window import RowWindow

__all__ = ["ViewerApp", "column_width", "parse_position"]


def column_width(field: FieldView) -> int:
    """A column's width from its field: wide for texts and chats, narrow for numbers and flags."""
    kind = field.role or ""
    type_ = field.type
    if field.masked:
        width = 16
    elif kind in ("text", "messages"):
        width = 44
    elif kind in ("image", "audio", "video") or type_ in ("binary", "large_binary"):
        width = 26
    elif kind == "json" or type_.startswith(("list", "large_list", "struct", "map")):
        width = 24
    elif type_ in ("string", "large_string"):
        width = 28
    elif type_.startswith("timestamp"):
        width = 26
    elif type_ == "bool":
        width = 5
    else:
        width = 10
    return max(min(width, 60), len(field.name))


def parse_position(text: str, total: int) -> int:
    """A row position typed by a person (``4,000,000``, ``4_000_000``, ``-1`` for the last row)."""
    cleaned = text.strip().replace(",", "").replace("_", "")
    try:
        value = int(cleaned)
    except ValueError:
        raise InputError(f"{text!r} is not a row number") from None
    if value < 0:
        value += total
    if not 0 <= value < total:
        raise InputError(f"row {text} does not exist; rows are 0 to {total - 1:,}")
    return value


class ViewerApp(App[None]):
    """Rows of one dataset version. ``opener(ref)`` opens another version the same way (for ``d``)."""

    TITLE = "dsm view"
    CSS = """
    Screen { layout: vertical; }
    #main { height: 1fr; layout: vertical; }
    #rows { height: 1fr; min-height: 6; }
    #detail { height: 1fr; border-top: solid $panel-lighten-2; }
    Screen.wide #main { layout: horizontal; }
    Screen.wide #rows { width: 3fr; height: 1fr; }
    Screen.wide #detail { width: 2fr; height: 1fr; border-top: none; border-left: solid $panel-lighten-2; }
    #status { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("g", "goto", "Go to"),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next(1)", "Next", show=False),
        Binding("N", "search_next(-1)", "Previous", show=False),
        Binding("colon", "command", "Command"),
        Binding("f", "columns", "Columns"),
        Binding("c", "copy", "Copy"),
        Binding("d", "diff", "Diff"),
        Binding("e", "episode", "Episode"),
    ]

    WIDE = 140
    """From this many columns on, the detail pane sits beside the table."""

    SHOW_READ_TIME = True
    """Whether the status line shows how long the last block took to read (snapshot tests turn it off:
    a time is not the same twice)."""

    def __init__(
        self,
        source: RowSource,
        *,
        columns: Sequence[str] | None = None,
        row: int | None = None,
        key: Sequence[str] | None = None,
        images: str = "auto",
        diff: str | None = None,
        opener: Callable[[str], RowSource] | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.read_columns = [f.name for f in source.fields] if columns is None else list(columns)
        self.fields = [source.field(name) for name in self.read_columns]
        self.start_row = row
        self.start_key = list(key or [])
        self.start_diff = diff
        self.images = images
        self.opener = opener
        self.query_text: str | None = None
        self.busy: str | None = None
        """What a worker is doing (a key lookup, the episode scan), for the status line; None when idle."""
        self.window: RowWindow[RowView] = RowWindow(source.num_rows, self._fetch, weight=row_weight)

    # ---------------------------------------------------------------------------------------- layout

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The row keys act on the rows screen only (the episode and diff screens have their own)."""
        if action in ("quit", "help") or self.screen is self.screen_stack[0]:
            return True
        return action not in _ROW_ACTIONS

    def compose(self) -> Any:
        with Container(id="main"):
            yield LazyTable(self.window, self._columns(self.read_columns), marker=_marker, id="rows")
            yield DetailPane(self._media, images=self.images, id="detail")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()
        self._layout(self.size.width)
        if self.start_row is not None:
            self.table.go(self.start_row)
        if self.start_key:
            self._find_key(self.start_key)
        if self.start_diff:
            self._open_diff(self.start_diff)
        self._update()

    def on_resize(self, event: Any) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        self.screen.set_class(width >= self.WIDE, "wide")

    @property
    def table(self) -> LazyTable[RowView]:
        return self.query_one("#rows", LazyTable)

    @property
    def detail(self) -> DetailPane:
        return self.query_one("#detail", DetailPane)

    def _columns(self, names: Sequence[str]) -> list[Column[RowView]]:
        out: list[Column[RowView]] = []
        for name in names:
            index = self.read_columns.index(name)
            field = self.fields[index]

            def render(row: RowView, index: int = index) -> Text:
                return preview(row.cells[index])

            out.append(Column(name=name, width=column_width(field), render=render))
        return out

    # ----------------------------------------------------------------------------------- reading

    def _fetch(self, offset: int, count: int) -> Sequence[RowView]:
        """One block of rows (in the table's worker thread): rendered and masked by the layer."""
        return self.source.read(offset, count, columns=self.read_columns, episodes=False).rows

    def _media(self, position: int, field: str) -> bytes:
        return self.source.media_bytes(position, field)

    def screen_ready(self) -> bool:
        """Whether the screen shows everything it will (rows read, pictures drawn, no lookup running)."""
        return self.table.screen_ready() and self.detail.pictures_pending == 0 and self.busy is None

    # --------------------------------------------------------------------------------------- status

    def on_lazy_table_cursor_moved(self, message: LazyTable.CursorMoved) -> None:
        if message.table is self.table:
            self._update()

    def _update(self) -> None:
        table = self.table
        total = self.source.num_rows
        row = table.row_at_cursor()
        if total == 0:
            self.detail.show_row(None, note="the dataset has no rows")
        elif row is None:
            error = self.window.error(table.cursor)
            self.detail.show_row(
                None, note=f"cannot read row {table.cursor:,}: {error}" if error else "reading…"
            )
        else:
            self.detail.show_row(row)
        self.query_one("#status", Static).update(self._status(row))

    def _status(self, row: RowView | None) -> Text:
        total = self.source.num_rows
        cursor = self.table.cursor
        line = Text(self.source.ref, style="bold")
        line.append(f" · row {cursor:,} of {total:,}" if total else " · no rows")
        if row is not None:
            where = row.location
            kind = {"row_group": "row group", "record_batch": "batch", "lines": "block", "sample": "sample"}
            line.append(f" · {where.shard}")
            if where.piece_kind in kind:
                line.append(f", {kind[where.piece_kind]} {where.piece:,}")
        seconds = self.window.last_read_seconds
        if seconds is not None and self.SHOW_READ_TIME:
            line.append(f" · read {seconds * 1000:.0f} ms", style="dim")
        if self.busy:
            line.append(f" · {self.busy}…", style="italic")
        masked = self.source.policy.masked
        if masked:
            line.append(f" · masked: {', '.join(masked)}", style="yellow")
        if self.source.policy.unmasked:
            line.append(
                f" · unmasked (audited): {', '.join(self.source.policy.unmasked)}", style="bold yellow"
            )
        return line

    def _error(self, error: BaseException) -> None:
        self.notify(str(error), severity="error", timeout=8)

    # ------------------------------------------------------------------------------------ actions

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_goto(self) -> None:
        total = self.source.num_rows

        def done(text: str | None) -> None:
            if text is None:
                return
            try:
                self.table.go(parse_position(text, total))
            except InputError as exc:
                self._error(exc)

        self.push_screen(Prompt(f"go to row (0 to {max(total - 1, 0):,}; -1 is the last):"), done)

    def action_search(self) -> None:
        def done(text: str | None) -> None:
            if text:
                self.query_text = text.lower()
                self._search(1)

        self.push_screen(Prompt("search the rows read so far:", value=self.query_text or ""), done)

    def action_search_next(self, direction: int) -> None:
        if self.query_text is None:
            self.action_search()
        else:
            self._search(direction)

    def _search(self, direction: int) -> None:
        wanted = self.query_text or ""
        found = self.window.search(
            lambda row: wanted in row_text(row), self.table.cursor, forward=direction > 0
        )
        if found is None:
            held = [p for p, _ in self.window.rows()]
            span = f"rows {held[0]:,}-{held[-1]:,}" if held else "no rows"
            self.notify(
                f"{wanted!r} is not in the {len(held):,} rows read so far ({span})", severity="warning"
            )
        else:
            self.table.go(found)

    def action_command(self) -> None:
        def done(text: str | None) -> None:
            if text:
                self.run_command(text)

        self.push_screen(Prompt(":", placeholder="key 123 · row N · columns a,b · diff REF · q"), done)

    def run_command(self, text: str) -> None:
        """A ``:`` command: ``key VALUE`` / ``key FIELD=VALUE ...``, ``row N``, ``columns a,b``, ``diff REF``,
        ``q``."""
        verb, _, rest = text.strip().lstrip(":").partition(" ")
        rest = rest.strip()
        try:
            if verb in ("q", "quit"):
                self.exit()
            elif verb == "key" and rest:
                self._find_key(rest.split())
            elif verb == "row" and rest:
                self.table.go(parse_position(rest, self.source.num_rows))
            elif verb == "columns" and rest:
                self._show_columns([c.strip() for c in rest.split(",") if c.strip()])
            elif verb == "diff" and rest:
                self._open_diff(rest)
            else:
                raise InputError(f":{text}: not a command (key 123, row N, columns a,b, diff REF, q)")
        except DsmError as exc:
            self._error(exc)

    def _show_columns(self, names: Sequence[str]) -> None:
        unknown = [n for n in names if n not in self.read_columns]
        if unknown:
            raise InputError(f"no column {', '.join(unknown)} (columns: {', '.join(self.read_columns)})")
        self.table.set_columns(self._columns(names), fit=True)

    def action_columns(self) -> None:
        shown = [c.name for c in self.table.columns]
        fields = [(f.name, f"{f.name}  ({f.role or f.type})") for f in self.fields]

        def done(names: list[str] | None) -> None:
            if names:
                self._show_columns(names)

        self.push_screen(ColumnPicker(fields, shown), done)

    def action_copy(self) -> None:
        row = self.table.row_at_cursor()
        if row is None:
            self.notify("the row is not read yet", severity="warning")
            return
        text = json.dumps(row.to_dict(), ensure_ascii=False)
        self.copy_to_clipboard(text)
        self.notify(f"copied row {row.position:,} as JSON ({len(text):,} chars)")

    # ---------------------------------------------------------------------------------- key lookup

    def _find_key(self, pairs: Sequence[str]) -> None:
        try:
            wanted = parse_key(list(pairs), tuple(self.source.contract.schema.key))
        except InputError as exc:
            self._error(exc)
            return
        shown = ", ".join(
            f"{k}={self.source.policy.text(k, v) if self.source.policy.is_masked(k) else v}"
            for k, v in wanted.items()
        )
        self.busy = f"finding {shown}"
        self._update()
        self._find_worker(wanted, shown)

    @work(thread=True, group="find", exit_on_error=False)
    def _find_worker(self, wanted: dict[str, str], shown: str) -> None:
        try:
            found = self.source.find(wanted)
        except DsmError as exc:
            self.call_from_thread(self._found, None, shown, exc)
            return
        self.call_from_thread(self._found, found.positions[0] if found.positions else None, shown, None)

    def _found(self, position: int | None, shown: str, error: BaseException | None) -> None:
        self.busy = None
        if error is not None:
            self._error(error)
        elif position is None:
            self.notify(f"no row with {shown}", severity="warning")
        else:
            self.table.go(position)
        self._update()

    # --------------------------------------------------------------------------------- diff, episode

    def action_diff(self) -> None:
        contract = self.source.contract
        version = contract.version or 0
        suggestion = f"{contract.name}@{version - 1}" if version > 1 else ""

        def done(text: str | None) -> None:
            if text:
                self._open_diff(text)

        self.push_screen(
            Prompt(f"diff {self.source.ref} against (NAME@N, alias or contract):", value=suggestion), done
        )

    def _open_diff(self, other_ref: str) -> None:
        from dsm.viewers.tui.diff import DiffScreen

        if self.opener is None:
            self._error(InputError("this viewer cannot open other versions"))
            return
        try:
            other = self.opener(other_ref)
        except DsmError as exc:
            self._error(exc)
            return
        mine = self.source
        newer = (other.contract.version or 0) > (mine.contract.version or 0)
        old, new = (mine, other) if newer else (other, mine)
        self.push_screen(DiffScreen(old, new))

    def action_episode(self) -> None:
        layout = self.source.episode_layout
        if layout is None:
            self.notify("no episodes here: no field has an RL role (reward, done, ...)", severity="warning")
            return
        position = self.table.cursor
        self.busy = "reading the episodes (RL columns)"
        self._update()
        self._episode_worker(position)

    @work(thread=True, group="episodes", exit_on_error=False)
    def _episode_worker(self, position: int) -> None:
        try:
            found = self.source.episodes(positions=[position])
        except DsmError as exc:
            self.call_from_thread(self._episode_ready, None, exc)
            return
        self.call_from_thread(self._episode_ready, found[0] if found else None, None)

    def _episode_ready(self, summary: Any, error: BaseException | None) -> None:
        from dsm.viewers.tui.episode import EpisodeScreen

        self.busy = None
        self._update()
        if error is not None:
            self._error(error)
        elif summary is None:
            self.notify("this row belongs to no episode", severity="warning")
        else:
            self.push_screen(EpisodeScreen(self.source, summary))


_ROW_ACTIONS = {"goto", "search", "search_next", "command", "columns", "copy", "diff", "episode"}


def _marker(row: RowView) -> str | None:
    return "!" if any(c.anomalies for c in row.cells) else None
