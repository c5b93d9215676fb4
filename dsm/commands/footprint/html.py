"""The HTML report of ``dsm footprint``: one self-contained page, plots as inline SVG (no script)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsm.units import format_bytes, format_money

if TYPE_CHECKING:
    from dsm.commands.footprint.report import FootprintReport

__all__ = ["render_html"]

_COLOURS = {
    "stored once": "#2563eb",
    "shared by versions": "#16a34a",
    "extra copies": "#d97706",
    "unreferenced": "#dc2626",
    "stored": "#2563eb",
    "logical": "#9ca3af",
    "physical": "#2563eb",
    "raw (with copies)": "#7c3aed",
}
_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#111827;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}.muted{color:#6b7280}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0}
th,td{border:1px solid #e5e7eb;padding:3px 7px;text-align:right}th{background:#f3f4f6}
td:first-child,th:first-child{text-align:left}tr.dead td{color:#991b1b}
svg text{font-size:11.5px;fill:#111827}svg .muted{fill:#6b7280}
"""


def _bars(title: str, rows: Sequence[tuple[str, Sequence[tuple[str, float]]]], *, stacked: bool) -> str:
    """A horizontal bar chart: one bar (stacked) or one group of bars per row; values in bytes."""
    label_w, bar_w, row_h = 190, 640, 22
    per_row = 1 if stacked else max((len(parts) for _, parts in rows), default=1)
    height = 40 + len(rows) * (row_h * per_row + 8) + 28
    totals = [
        sum(v for _, v in parts) if stacked else max((v for _, v in parts), default=0) for _, parts in rows
    ]
    top = max(totals, default=0) or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 120}" height="{height}">',
        f'<text x="0" y="16" font-weight="600">{html.escape(title)}</text>',
    ]
    y = 32
    legend: dict[str, str] = {}
    for (label, parts), total in zip(rows, totals, strict=True):
        out.append(f'<text x="0" y="{y + 15}">{html.escape(label)}</text>')
        x = float(label_w)
        for i, (kind, value) in enumerate(parts):
            colour = _COLOURS.get(kind, "#4b5563")
            legend[kind] = colour
            width = bar_w * value / top
            bar_y = y if stacked else y + i * row_h
            start = x if stacked else label_w
            out.append(
                f'<rect x="{start:.1f}" y="{bar_y}" width="{max(width, 0):.1f}" height="{row_h - 4}" '
                f'fill="{colour}"><title>{html.escape(kind)}: {format_bytes(value)}</title></rect>'
            )
            if not stacked:
                at = start + width + 4
                out.append(f'<text x="{at:.1f}" y="{bar_y + 13}" class="muted">{format_bytes(value)}</text>')
            if stacked:
                x += width
        if stacked:
            out.append(f'<text x="{x + 4:.1f}" y="{y + 13}" class="muted">{format_bytes(total)}</text>')
        y += row_h * per_row + 8
    x = 0.0
    for kind, colour in legend.items():
        out.append(f'<rect x="{x}" y="{y + 6}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 16}" y="{y + 16}">{html.escape(kind)}</text>')
        x += 24 + 7 * len(kind)
    out.append("</svg>")
    return "".join(out)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        f'<tr class="{classes[i] if i < len(classes) else ""}">'
        + "".join(f"<td>{html.escape(c)}</td>" for c in row)
        + "</tr>"
        for i, row in enumerate(rows)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(report: FootprintReport) -> str:
    """The report as one HTML page that needs nothing else to open."""
    money = report.currency
    once = report.physical_bytes - report.shared_bytes - report.copy_bytes - report.unreferenced_bytes
    summary = _bars(
        "stored bytes",
        [
            (
                "all datasets",
                [
                    ("stored once", max(once, 0)),
                    ("shared by versions", report.shared_bytes),
                    ("extra copies", report.copy_bytes),
                    ("unreferenced", report.unreferenced_bytes),
                ],
            )
        ],
        stacked=True,
    )
    versions = _bars(
        "per version: stored and logical bytes",
        [
            (
                f"{v.ref}{' (' + v.status + ')' if v.status != 'active' else ''}",
                [
                    ("stored", v.stored_bytes),
                    ("logical", float(v.logical_bytes or 0)),
                ],
            )
            for v in report.versions
        ],
        stacked=False,
    )
    classes = _bars(
        "per store and storage class: physical and raw bytes",
        [
            (f"{c.store} {c.storage_class}", [("physical", c.bytes), ("raw (with copies)", c.raw_bytes)])
            for c in report.classes
        ],
        stacked=False,
    )
    version_rows = [
        [
            v.ref,
            v.status,
            ", ".join(v.aliases) or "-",
            "yes" if v.live else "no",
            f"{v.rows:,}" if v.rows is not None else "-",
            format_bytes(v.logical_bytes),
            format_bytes(v.stored_bytes),
            format_bytes(v.shared_bytes),
            format_bytes(v.copy_bytes),
            str(v.missing),
        ]
        for v in report.versions
    ]
    class_rows = [
        [
            c.store,
            c.storage_class,
            str(c.files),
            format_bytes(c.bytes),
            f"{c.copies:g}",
            format_bytes(c.raw_bytes),
            f"{c.price_per_gb_month:g}",
            format_money(c.monthly_cost, money),
        ]
        for c in report.classes
    ]
    cutover_rows = [
        [
            c.id,
            f"{c.dataset}@{c.alias}",
            c.phase,
            format_bytes(c.extra_bytes),
            c.extra_source,
            c.complete_after or "-",
            format_money(c.cost_until_complete, money) if c.cost_until_complete is not None else "-",
        ]
        for c in report.cutovers
    ]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>dsm footprint</title><style>{_CSS}</style></head><body>",
        f"<h1>dsm footprint: {html.escape(', '.join(report.datasets))}</h1>",
        f'<p class="muted">prices: {html.escape(report.prices)}; storage classes: '
        f"{html.escape(report.storage_classes)}</p>",
        _table(
            ["physical", "raw", "amplification", "shared", "extra copies", "unreferenced", "per month"],
            [
                [
                    format_bytes(report.physical_bytes),
                    format_bytes(report.raw_bytes),
                    f"{report.amplification:.2f}x",
                    format_bytes(report.shared_bytes),
                    format_bytes(report.copy_bytes),
                    format_bytes(report.unreferenced_bytes),
                    format_money(report.monthly_cost, money),
                ]
            ],
        ),
        summary,
        "<h2>versions</h2>",
        versions,
        _table(
            [
                "version",
                "status",
                "aliases",
                "live",
                "rows",
                "logical",
                "stored",
                "shared",
                "copies",
                "missing",
            ],
            version_rows,
            ["" if v.live else "dead" for v in report.versions],
        ),
        "<h2>stores and storage classes</h2>",
        classes,
        _table(
            ["store", "class", "files", "physical", "copies", "raw", "per GB-month", "per month"], class_rows
        ),
    ]
    if report.cutovers:
        parts += [
            "<h2>open cutovers</h2>",
            _table(
                ["cutover", "alias", "phase", "extra", "from", "complete after", "until complete"],
                cutover_rows,
            ),
        ]
    if report.notes:
        parts.append(
            "<h2>notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in report.notes) + "</ul>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
