"""A table of dsm's own over a :class:`~dsm.viewers.tui.window.RowWindow`: only the rows on screen exist.

Textual's ``DataTable`` keeps every row in memory; this widget is a Line API ``ScrollView`` whose virtual
height is the number of rows (plus the header line), so a billion-row dataset scrolls like a small one: each
line is drawn from the window when it is shown, the window is told which rows are on screen after every
scroll or cursor move, and a thread worker reads their blocks (then the next ones). Rows not read yet show
``…`` until their block arrives.

Keys: up/down, PgUp/PgDn, Home/End (first and last row), left/right (scroll the columns). A click selects a
row, the wheel scrolls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import get_current_worker

from dsm.viewers.tui.window import RowWindow

__all__ = ["Column", "LazyTable"]

T = TypeVar("T")

_GAP = 2


@dataclass(frozen=True)
class Column(Generic[T]):
    """A column: its title, its width in cells and how a row's cell is drawn."""

    name: str
    width: int
    render: Callable[[T], Text]


class LazyTable(ScrollView, Generic[T], can_focus=True):
    """Rows of a :class:`RowWindow`, a cursor, a header; ``marker(row)`` (one cell) flags rows, e.g. ``!``
    for a row with anomalies."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First row", show=False),
        Binding("end", "last", "Last row", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lazy-table--header",
        "lazy-table--cursor",
        "lazy-table--position",
        "lazy-table--pending",
        "lazy-table--error",
    }

    DEFAULT_CSS = """
    LazyTable {
        background: $surface;
        color: $foreground;
        scrollbar-gutter: stable;
    }
    LazyTable > .lazy-table--header { text-style: bold; background: $panel; color: $text; }
    LazyTable > .lazy-table--cursor { background: $block-cursor-blurred-background; }
    LazyTable:focus > .lazy-table--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
    }
    LazyTable > .lazy-table--position { color: $text-muted; }
    LazyTable > .lazy-table--pending { color: $text-muted; }
    LazyTable > .lazy-table--error { color: $text-error; text-style: bold; }
    """

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    class CursorMoved(Message):
        """The cursor moved, or the block holding it arrived."""

        def __init__(self, table: LazyTable[object], position: int) -> None:
            super().__init__()
            self.table = table
            self.position = position

        @property
        def control(self) -> LazyTable[object]:
            return self.table

    class _BlockLoaded(Message):
        def __init__(self, block: int) -> None:
            super().__init__()
            self.block = block

    def __init__(
        self,
        window: RowWindow[T],
        columns: Sequence[Column[T]],
        *,
        marker: Callable[[T], str | None] | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.window = window
        self.columns: list[Column[T]] = list(columns)
        self._widest: list[Column[T]] = list(columns)
        self.marker = marker
        self._fitted = False
        self._update_virtual_size()

    # ------------------------------------------------------------------------------------ geometry

    @property
    def gutter_width(self) -> int:
        """Cells of the fixed position column (the widest position, with separators, and a marker)."""
        return len(f"{max(self.window.total - 1, 0):,}") + 3

    @property
    def page_rows(self) -> int:
        """Rows one screen of the table shows (its height less the header)."""
        return max(1, self.scrollable_content_region.height - 1)

    @property
    def first_shown(self) -> int:
        return int(self.scroll_offset.y)

    def _update_virtual_size(self) -> None:
        width = self.gutter_width + sum(c.width + _GAP for c in self.columns)
        self.virtual_size = Size(width, self.window.total + 1)

    def set_columns(self, columns: Sequence[Column[T]], *, fit: bool = False) -> None:
        """Show these columns; ``fit`` narrows them to the rows around the cursor."""
        self.columns = list(columns)
        self._widest = list(columns)
        self._fitted = False
        self._update_virtual_size()
        if fit:
            self._fit(self.window.block_of(self.cursor))
        self.refresh()

    def _fit(self, block: int) -> None:
        """Fit the columns to the rows of ``block``: the first block read sets each width (never wider
        than the column allows), later blocks only widen a column whose values need more room."""
        first = block * self.window.block_rows
        rows = [r for r in (self.window.get(p) for p in range(first, first + self.window.block_rows)) if r]
        if not rows:
            return
        fitted = []
        for widest, shown in zip(self._widest, self.columns, strict=True):
            need = max((widest.render(r).cell_len for r in rows), default=0)
            width = max(len(widest.name), min(widest.width, need), 3)
            if self._fitted:
                width = max(width, shown.width)
            fitted.append(Column(name=widest.name, width=width, render=widest.render))
        self._fitted = True
        if [c.width for c in fitted] != [c.width for c in self.columns]:
            self.columns = fitted
            self._update_virtual_size()

    def set_window(self, window: RowWindow[T]) -> None:
        """Show another window (the old one's worker stops); the cursor goes to its first row."""
        self.window.close()
        self.window = window
        self.columns = list(self._widest)
        self._fitted = False
        self._update_virtual_size()
        self._start_worker()
        self.cursor = 0
        self.scroll_to(y=0, animate=False)
        self._want()
        self.refresh()

    # -------------------------------------------------------------------------------------- worker

    def on_mount(self) -> None:
        self._start_worker()
        self._want()

    def on_unmount(self) -> None:
        self.window.close()

    def _start_worker(self) -> None:
        window = self.window

        def serve() -> None:
            worker = get_current_worker()
            window.serve(
                lambda: worker.is_cancelled, lambda block: self.post_message(self._BlockLoaded(block))
            )

        self.run_worker(serve, thread=True, name="rows", group=f"rows-{id(window)}", exit_on_error=False)

    def on_lazy_table__block_loaded(self, message: LazyTable._BlockLoaded) -> None:
        message.stop()
        self._fit(message.block)
        self.refresh()
        if self.window.block_of(self.cursor) == message.block:
            self.post_message(self.CursorMoved(self, self.cursor))  # type: ignore[arg-type]

    def _want(self) -> None:
        first = self.first_shown
        self.window.want(first, first + self.page_rows - 1, cursor=self.cursor)

    def on_resize(self, event: events.Resize) -> None:
        self._want()

    # -------------------------------------------------------------------------------------- cursor

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.window.total - 1)) if self.window.total else 0

    def watch_cursor(self, old: int, new: int) -> None:
        top = self.first_shown
        if new < top:
            self.scroll_to(y=new, animate=False, immediate=True)
        elif new >= top + self.page_rows:
            self.scroll_to(y=new - self.page_rows + 1, animate=False, immediate=True)
        self._want()
        self.refresh()
        self.post_message(self.CursorMoved(self, new))  # type: ignore[arg-type]

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._want()

    def action_cursor(self, step: int) -> None:
        self.cursor += step

    def action_page(self, direction: int) -> None:
        rows = self.page_rows
        top = max(0, min(self.first_shown + direction * rows, self.window.total - rows))
        self.scroll_to(y=top, animate=False, immediate=True)
        self.cursor += direction * rows

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = self.window.total - 1

    def go(self, position: int) -> None:
        """Put the cursor on row ``position``, at the top of the screen when it was not shown."""
        position = self.validate_cursor(position)
        top = self.first_shown
        if not top <= position < top + self.page_rows:
            self.scroll_to(y=max(0, position - 2), animate=False, immediate=True)
        self.cursor = position

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        position = self.first_shown + offset.y - 1
        if position < self.window.total:
            self.cursor = position

    def row_at_cursor(self) -> T | None:
        return self.window.get(self.cursor)

    def screen_ready(self) -> bool:
        """Whether every row on screen (and the cursor's) has been read."""
        first = self.first_shown
        return self.window.ready(first, first + self.page_rows - 1) and self.window.ready(
            self.cursor, self.cursor
        )

    # ------------------------------------------------------------------------------------ drawing

    def _cells(self, texts: Sequence[Text]) -> Text:
        line = Text()
        for column, text in zip(self.columns, texts, strict=True):
            cell = text.copy()
            cell.truncate(column.width, overflow="ellipsis", pad=True)
            line.append_text(cell)
            line.append(" " * _GAP)
        return line

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x = int(self.scroll_offset.x)
        base = self.rich_style
        gutter = self.gutter_width
        if y == 0:
            style = self.get_component_rich_style("lazy-table--header")
            head = Text(" " * gutter)
            body = self._cells([Text(c.name) for c in self.columns])
            return self._strip(head, body, scroll_x, width, base + style)
        position = self.first_shown + y - 1
        if position >= self.window.total:
            return Strip.blank(width, base)
        row = self.window.get(position)
        mark = " "
        if row is None:
            error = self.window.error(position)
            style = self.get_component_rich_style("lazy-table--error" if error else "lazy-table--pending")
            body = Text(f"! {error}" if error else "…", style=style)
        else:
            body = self._cells([c.render(row) for c in self.columns])
            mark = (self.marker(row) if self.marker else None) or " "
        head = Text(
            f"{position:>{gutter - 3},} ", style=self.get_component_rich_style("lazy-table--position")
        )
        head.append(mark[:1], style="bold red")
        head.append(" ")
        line_style = base
        if position == self.cursor:
            line_style = base + self.get_component_rich_style("lazy-table--cursor")
        return self._strip(head, body, scroll_x, width, line_style)

    def _strip(self, head: Text, body: Text, scroll_x: int, width: int, style: Style) -> Strip:
        console = self.app.console
        head_strip = Strip(list(head.render(console)), head.cell_len)
        body_strip = Strip(list(body.render(console)), body.cell_len)
        room = max(0, width - head_strip.cell_length)
        body_strip = body_strip.crop(scroll_x, scroll_x + room).extend_cell_length(room)
        segments = Segment.apply_style(list(head_strip) + list(body_strip), style)
        return Strip(segments, width).crop(0, width)
