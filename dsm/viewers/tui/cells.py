"""Cells of the view model as rich text: one-line previews for the table, whole values for the detail pane.

Everything is rendered from :class:`dsm.inspect.view.CellView` (kind, summary, value, details, anomalies):
masked cells hold ``***`` and a length only, so nothing here can show a masked value. Colours are few and
carry meaning (a chat role, a masked field, an anomaly); ``NO_COLOR`` is honoured by Textual for the whole
screen.

>>> from dsm.inspect.view import CellView
>>> preview(CellView(field="t", kind="text", value="two\\nlines", summary="9 chars, 2 lines")).plain
'two⏎lines'
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from dsm.inspect.view import CellView, RowView

__all__ = [
    "ROLE_STYLES",
    "cell_body",
    "cell_heading",
    "preview",
    "row_text",
    "row_weight",
    "turn_style",
]

PREVIEW_CHARS = 240
"""Characters of a value a table cell keeps (the widest column shows fewer)."""

DETAIL_CHARS = 20_000
"""Characters of one text the detail pane shows; ``c`` copies the whole row."""

ROLE_STYLES = {
    "system": "#c792ea",
    "developer": "#c792ea",
    "user": "#82aaff",
    "assistant": "#c3e88d",
    "tool": "#ffcb6b",
    "function": "#ffcb6b",
}
"""Colours of chat turns by kind; a turn whose role is not a known speaker is bold red."""

MASKED_STYLE = "#f78c6c"
ANOMALY_STYLE = "bold #ff5370"


def turn_style(kind: str | None) -> str:
    return ROLE_STYLES.get(kind or "", ANOMALY_STYLE)


def _compact(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = str(value)
    return text[:PREVIEW_CHARS]


def preview(cell: CellView) -> Text:
    """One line for a table cell: the start of a text, a chat's turns, a media summary, a scalar."""
    if cell.masked:
        return Text(cell.summary, style=MASKED_STYLE)
    if cell.kind == "text" and isinstance(cell.value, str):
        line = cell.value[:PREVIEW_CHARS].replace("\r", "").replace("\n", "⏎")
        shown = Text(line)
    elif cell.kind in ("list", "struct", "json", "observation", "action") and cell.value is not None:
        shown = Text(_compact(cell.value) if cell.kind != "json" else _compact(cell.details.get("folded")))
    elif cell.kind == "null":
        shown = Text("null", style="dim")
    else:
        shown = Text(cell.summary[:PREVIEW_CHARS].replace("\n", "⏎"))
    if cell.anomalies:
        shown.stylize(ANOMALY_STYLE)
    return shown


def cell_heading(cell: CellView) -> Text:
    """The line that opens a cell in the detail pane: its name, its summary, its role, a masked mark."""
    line = Text()
    line.append(cell.field, style="bold")
    line.append("  ")
    if cell.masked:
        classification = cell.details.get("classification")
        line.append(cell.summary, style=MASKED_STYLE)
        line.append(f"  [{classification}, masked]" if classification else "  [masked]", style="dim")
        return line
    line.append(cell.summary)
    if cell.role and cell.kind not in ("scalar", "null"):
        line.append(f"  ({cell.role})", style="dim")
    return line


def _clipped(text: str, limit: int = DETAIL_CHARS) -> Text:
    if len(text) <= limit:
        return Text(text)
    out = Text(text[:limit])
    out.append(f"\n… {len(text) - limit:,} more chars (c copies the whole row)", style="dim")
    return out


def _turns(cell: CellView) -> RenderableType:
    parts: list[RenderableType] = []
    for number, turn in enumerate(cell.value or [], start=1):
        kind = turn.get("kind")
        style = turn_style(kind)
        content = str(turn.get("content") or "")
        label = Text()
        label.append(f"{turn.get('role') or '?'}", style=f"bold {style}")
        if turn.get("name"):
            label.append(f" ({turn['name']})", style=style)
        label.append(f"  turn {number} · {len(content):,} chars", style="dim")
        for mark in turn.get("marks") or ():
            label.append(f"  [{mark}]", style="dim" if kind in ROLE_STYLES else ANOMALY_STYLE)
        body = _clipped(content) if content else Text("(empty)", style="dim italic")
        parts.append(label)
        parts.append(Padding(body, (0, 0, 0, 2), style=""))
    return Group(*parts)


def _json(cell: CellView) -> RenderableType:
    from rich.json import JSON

    if not cell.details.get("valid", True):
        return _clipped(str(cell.value))
    folded = cell.details.get("folded", cell.value)
    return JSON.from_data(folded, indent=2)


def _facts(cell: CellView) -> Text:
    names = ("media_type", "width", "height", "duration", "sample_rate", "channels", "size", "path")
    facts = [f"{name} {cell.details[name]}" for name in names if cell.details.get(name) not in (None, "")]
    return Text(" · ".join(facts), style="dim")


def cell_body(cell: CellView) -> RenderableType | None:
    """What a cell shows below its heading in the detail pane (None for one-line cells)."""
    if cell.masked:
        return None
    if cell.kind == "text" and isinstance(cell.value, str):
        return _clipped(cell.value)
    if cell.kind == "messages" and isinstance(cell.value, list):
        return _turns(cell)
    if cell.kind == "json":
        return _json(cell)
    if cell.kind in ("image", "audio", "video", "binary", "media"):
        return _facts(cell)
    if cell.kind in ("list", "struct") or isinstance(cell.value, (list, dict)):
        return _clipped(json.dumps(cell.value, ensure_ascii=False, indent=None))
    return None


def anomaly_lines(anomalies: Iterable[str]) -> list[Text]:
    return [Text(f"! {a}", style=ANOMALY_STYLE) for a in anomalies]


def row_text(row: RowView) -> str:
    """The text ``/`` searches in a row: every summary, text and chat turn (masked cells: ``***`` only),
    lower-cased."""
    parts: list[str] = []
    for cell in row.cells:
        parts.append(cell.summary)
        if cell.masked:
            continue
        if isinstance(cell.value, str):
            parts.append(cell.value)
        elif cell.kind == "messages" and isinstance(cell.value, list):
            parts.extend(str(t.get("content") or "") for t in cell.value)
    return "\n".join(parts).lower()


def row_weight(row: RowView) -> int:
    """About how many bytes a row holds (texts and turns; 8 a list item), for the window's budget."""
    size = 64
    for cell in row.cells:
        value = cell.value
        if isinstance(value, str):
            size += len(value)
        elif cell.kind == "messages" and isinstance(value, list):
            size += sum(len(str(t.get("content") or "")) + 48 for t in value)
        elif isinstance(value, (list, dict)):
            size += 8 * len(value)
        size += 96 + len(cell.summary)
    return size
