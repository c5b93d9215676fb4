"""Cells as the rows page shows them: long values cut, and the cut said.

The inspect layer gives whole values (:class:`dsm.inspect.CellView`); a page of 100 rows shows each cell in a
table, so text longer than :data:`CELL_CHARS` characters and lists longer than :data:`CELL_ITEMS` items are
cut. A cut cell keeps everything else the layer said and gains ``"truncated": {"chars": N}`` (or ``items``):
the whole value is on the row's own page and in its JSON, as the Hugging Face viewer's ``/rows`` does with
``truncated_cells``.

>>> cut_cell({"kind": "text", "value": "x" * 500, "summary": "500 chars"}, chars=10)["truncated"]
{'chars': 500, 'shown': 10}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CELL_CHARS", "CELL_ITEMS", "MEDIA_KINDS", "cut_cell", "cut_page_rows", "is_media"]

CELL_CHARS = 300
CELL_ITEMS = 20
MEDIA_KINDS = ("image", "audio", "video")


def _cut_text(text: str, chars: int) -> tuple[str, dict[str, int] | None]:
    if len(text) <= chars:
        return text, None
    return text[:chars], {"chars": len(text), "shown": chars}


def cut_cell(cell: Mapping[str, Any], *, chars: int = CELL_CHARS, items: int = CELL_ITEMS) -> dict[str, Any]:
    """A copy of a cell's dict (``CellView.to_dict()``) with its value cut to ``chars`` characters or
    ``items`` items; ``truncated`` says how much there was."""
    value = cell.get("value")
    details = cell.get("details") or {}
    if (
        cell.get("masked")
        or value is None
        or isinstance(value, (bool, int, float))
        or (isinstance(value, str) and len(value) <= chars)
    ) and "folded" not in details:
        return dict(cell)  # nothing to cut (the common case: scalars and short text)
    out = dict(cell)
    cut: dict[str, int] | None = None
    if isinstance(value, str):
        out["value"], cut = _cut_text(value, chars)
    elif cell.get("kind") == "messages" and isinstance(value, list):
        turns, total = [], 0
        for turn in value[:items]:
            content = turn.get("content")
            if isinstance(content, str) and len(content) > chars:
                turn = dict(turn, content=content[:chars])
                total += 1
            turns.append(turn)
        out["value"] = turns
        if len(value) > items or total:
            cut = {"items": len(value), "shown": min(len(value), items)}
            if total:
                cut["turns_cut"] = total
    elif isinstance(value, list) and len(value) > items:
        out["value"] = value[:items]
        cut = {"items": len(value), "shown": items}
    elif isinstance(value, dict):
        text_len = len(repr(value))
        if text_len > chars * 4:
            out["value"] = None
            cut = {"chars": text_len, "shown": 0}
    folded = details.get("folded")
    if folded is not None and len(repr(folded)) > chars * 4:
        out["details"] = {k: v for k, v in details.items() if k != "folded"}
    if cut is not None:
        out["truncated"] = cut
    return out


def cut_page_rows(rows: list[dict[str, Any]], **limits: int) -> list[dict[str, Any]]:
    """The rows of ``RowPage.to_dict()`` with every cell cut (see :func:`cut_cell`)."""
    return [
        dict(row, cells={name: cut_cell(cell, **limits) for name, cell in row["cells"].items()})
        for row in rows
    ]


def is_media(cell: Mapping[str, Any], field: Mapping[str, Any]) -> str | None:
    """``image``, ``audio`` or ``video`` when the cell's bytes can be played or shown by a browser."""
    if cell.get("masked") or cell.get("kind") == "null":
        return None
    kind = cell.get("kind")
    if kind in MEDIA_KINDS:
        return str(kind)
    media_type = (cell.get("details") or {}).get("media_type") or field.get("media_type")
    if isinstance(media_type, str):
        major = media_type.split("/", 1)[0]
        if major in MEDIA_KINDS:
            return major
    return None
