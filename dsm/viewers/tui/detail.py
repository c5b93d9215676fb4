"""The detail pane: the selected row whole, cell by cell, by role.

Texts wrap; a chat is a thread of turns coloured by speaker, system and tool turns marked, each with its
length; JSON is shown folded (deep levels and long lists as ``{... 5 keys}``); audio and video as their
header facts; images as their description and, where pictures are on, a picture drawn by
:mod:`dsm.viewers.tui.pictures` from bytes read in a worker thread (never for a masked field: the layer
refuses them). Anomalies are listed under their cell in red.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from dsm.errors import DsmError
from dsm.inspect.view import RowView, plain
from dsm.viewers.tui import pictures
from dsm.viewers.tui.cells import anomaly_lines, cell_body, cell_heading

__all__ = ["DetailPane", "episode_line", "row_renderable"]

_PICTURE_KINDS = ("image",)


def episode_line(summary: Any) -> Text:
    """One line for an episode summary: its id, steps, rows, return, where it ends, its anomalies."""
    end = f"ends at step {summary.terminal_step}" if summary.terminal_step is not None else "never ends"
    line = Text(
        f"episode {plain(summary.episode)}: {summary.length:,} steps (rows {summary.first_position:,}-"
        f"{summary.last_position:,}), return {plain(summary.total_reward)}, {end}"
    )
    for anomaly in summary.anomalies:
        line.append(f"\n  ! {anomaly}", style="bold red")
    return line


def row_renderable(row: RowView, *, episode: Any = None, pictures_on: bool = False) -> RenderableType:
    """Everything the pane shows of ``row`` but its pictures."""
    parts: list[RenderableType] = [
        Text(f"row {row.position:,}", style="bold") + Text(f" · {row.location.describe()}", style="dim")
    ]
    if episode is not None:
        parts.append(episode_line(episode))
    for cell in row.cells:
        parts.append(Text(""))
        parts.append(cell_heading(cell))
        body = cell_body(cell)
        if body is not None:
            parts.append(body)
        if pictures_on and cell.kind in _PICTURE_KINDS and not cell.masked and cell.value is None:
            parts.append(Text("  (picture below)", style="dim"))
        parts.extend(anomaly_lines(cell.anomalies))
    return Group(*parts)


class DetailPane(VerticalScroll):
    """The selected row. ``media(position, field)`` reads an image's bytes (in a worker thread)."""

    DEFAULT_CSS = """
    DetailPane { background: $surface; padding: 0 1; }
    DetailPane > #detail-pictures { height: auto; }
    DetailPane .picture { height: 10; width: auto; max-width: 64; margin: 0 0 1 2; }
    DetailPane .picture-label { color: $text-muted; }
    """

    def __init__(
        self,
        media: Callable[[int, str], bytes],
        *,
        images: str = "auto",
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._media = media
        self.images = images
        self.position: int | None = None
        self.pictures_pending = 0
        self._shown: tuple[int, Any] | None = None

    def compose(self) -> Any:
        yield Static(Text("…", style="dim"), id="detail-body")
        yield Vertical(id="detail-pictures")

    def show_row(self, row: RowView | None, *, episode: Any = None, note: str | None = None) -> None:
        """Show ``row`` (None: ``note``, e.g. that it is being read)."""
        body = self.query_one("#detail-body", Static)
        if row is None:
            body.update(Text(note or "…", style="dim"))
            self.position = None
            self._shown = None
            self._clear_pictures()
            return
        key = (row.position, episode)
        if self._shown == key:
            return
        moved = self.position != row.position
        self._shown = key
        self.position = row.position
        wanted = self._picture_fields(row)
        body.update(row_renderable(row, episode=episode, pictures_on=bool(wanted)))
        if moved:
            self.scroll_home(animate=False)
            self._clear_pictures()
            if wanted:
                self.pictures_pending += 1
                self._load_pictures(row.position, wanted)

    def _picture_fields(self, row: RowView) -> list[str]:
        if self.images == "none":
            return []
        return [c.field for c in row.cells if c.kind in _PICTURE_KINDS and not c.masked and c.value is None]

    def _clear_pictures(self) -> None:
        self.query_one("#detail-pictures", Vertical).remove_children()

    @work(thread=True, group="pictures", exit_on_error=False)
    def _load_pictures(self, position: int, fields: Sequence[str]) -> None:
        drawn: list[tuple[str, object | None, str | None]] = []
        try:
            for field in fields:
                if position != self.position:
                    break  # the cursor moved on: read nothing more for this row
                try:
                    drawn.append((field, pictures.decode(self._media(position, field)), None))
                except (DsmError, OSError) as exc:
                    drawn.append((field, None, str(exc)))
        finally:
            self.app.call_from_thread(self._mount_pictures, position, drawn)

    def _mount_pictures(self, position: int, drawn: list[tuple[str, object | None, str | None]]) -> None:
        self.pictures_pending -= 1
        if position != self.position:
            return
        box = self.query_one("#detail-pictures", Vertical)
        box.remove_children()
        for field, image, why in drawn:
            box.mount(Static(Text(f"{field}:", style="bold"), classes="picture-label"))
            if image is None:
                box.mount(Static(Text(f"  no picture: {why}", style="dim"), classes="picture-label"))
            else:
                box.mount(pictures.picture(image, self.images))
