"""The HTML report of ``dsm bench``: one self-contained page, plots as inline SVG (no script, no network)."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dsm.benchmark.options import HTML_EXTENSIONS, check_output, write_output
from dsm.benchmark.results import figure_label
from dsm.units import format_count, format_rate, format_seconds

if TYPE_CHECKING:
    from dsm.benchmark.results import BenchReport, DatasetBench, WorkerResult

__all__ = ["render_html", "write_html"]

_PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
_DATASET_COLORS = ("#2563eb", "#dc2626")
_CDF_POINTS = 400


def _workers(count: int) -> str:
    return f"{count} worker" if count == 1 else f"{count} workers"


# ---------------------------------------------------------------------------------------------- charts


@dataclass(frozen=True)
class _Series:
    name: str
    color: str
    points: Sequence[tuple[float, float]]
    markers: bool = True
    steps: bool = False


@dataclass(frozen=True)
class _Mark:
    x: float
    label: str
    color: str


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / max(1, ticks)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _chart(
    *,
    title: str,
    series: Sequence[_Series],
    x_label: str,
    y_label: str,
    x_log: int | None,
    x_format: Callable[[float], str],
    y_format: Callable[[float], str],
    x_ticks: Sequence[float] | None = None,
    y_max: float | None = None,
    marks: Sequence[_Mark] = (),
    notes: Sequence[tuple[str, str]] = (),
    width: int = 560,
    height: int = 320,
) -> str:
    """An SVG line chart. ``x_log`` is the log base of the x axis (2 or 10) or None for linear."""
    left, right, top, bottom = 72, 16, 50, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for s in series for x, _ in s.points if (x_log is None or x > 0)]
    ys = [y for s in series for _, y in s.points]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{width / 2}" y="20" text-anchor="middle" class="title">{html.escape(title)}</text>',
    ]
    if not xs or not ys:
        out.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="muted">no data</text></svg>'
        )
        return "".join(out)

    def tx(value: float) -> float:
        return math.log(value, x_log) if x_log else value

    x_lo, x_hi = tx(min(xs)), tx(max(xs))
    if x_log == 10:
        x_lo, x_hi = math.floor(x_lo), math.ceil(x_hi)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    top_y = y_max if y_max is not None else max(ys) * 1.08 or 1.0
    y_step = _nice_step(top_y)
    top_y = math.ceil(top_y / y_step - 1e-9) * y_step if y_max is None else top_y

    def px(value: float) -> float:
        return left + (tx(value) - x_lo) / (x_hi - x_lo) * plot_w

    def py(value: float) -> float:
        return top + plot_h - (value / top_y) * plot_h

    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="plot"/>')
    # y grid and labels
    step_count = round(top_y / y_step)
    for k in range(step_count + 1):
        value = k * y_step
        y = py(value)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{y_format(value)}</text>'
        )
    # x grid and labels
    if x_ticks is None:
        if x_log == 10:
            x_ticks = [10.0**e for e in range(int(x_lo), int(x_hi) + 1)]
        else:
            step = _nice_step(x_hi - x_lo)
            x_ticks = [x_lo + k * step for k in range(int((x_hi - x_lo) / step) + 1)]
    for value in x_ticks:
        x = px(value)
        if x < left - 0.5 or x > left + plot_w + 0.5:
            continue
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" class="grid"/>')
        label = x_format(value)
        out.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{label}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle" class="axis">'
        f"{html.escape(x_label)}</text>"
    )
    out.append(
        f'<text x="14" y="{top + plot_h / 2}" text-anchor="middle" class="axis" '
        f'transform="rotate(-90 14 {top + plot_h / 2})">{html.escape(y_label)}</text>'
    )
    # vertical marks (the knee)
    for i, mark in enumerate(marks):
        x = px(mark.x)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" stroke="{mark.color}" '
            'stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
        anchor = "start" if x < left + plot_w * 0.7 else "end"
        dx = 5 if anchor == "start" else -5
        out.append(
            f'<text x="{x + dx:.1f}" y="{top + 14 + 14 * i}" text-anchor="{anchor}" class="mark" '
            f'fill="{mark.color}">{html.escape(mark.label)}</text>'
        )
    for j, (text, color) in enumerate(notes):  # e.g. "no knee up to 4 workers"
        y = top + 14 + 14 * (len(marks) + j)
        out.append(f'<text x="{left + 8}" y="{y}" class="mark" fill="{color}">{html.escape(text)}</text>')
    # series
    for s in series:
        pts = [(px(x), py(y)) for x, y in s.points if (x_log is None or x > 0)]
        if not pts:
            continue
        if s.steps:  # an empirical CDF: flat until the next observed value, then up
            stepped = [(pts[0][0], py(0.0))]
            for (x0, y0), (x1, _) in itertools.pairwise(pts):
                stepped += [(x0, y0), (x1, y0)]
            stepped.append(pts[-1])
            pts_line = stepped
        else:
            pts_line = pts
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts_line)
        out.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>')
        if s.markers:
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{s.color}"/>' for x, y in pts]
    # legend: one row under the title, outside the plot so it never hides a line
    legend_x = float(left)
    for s in series:
        out.append(f'<rect x="{legend_x:.1f}" y="{top - 12}" width="14" height="4" fill="{s.color}"/>')
        out.append(f'<text x="{legend_x + 19:.1f}" y="{top - 7}" class="legend">{html.escape(s.name)}</text>')
        legend_x += 19 + 7 * len(s.name) + 18
    out.append("</svg>")
    return "".join(out)


def _cdf_points(values_ns: np.ndarray) -> list[tuple[float, float]]:
    if values_ns.size == 0:
        return []
    ordered = np.sort(values_ns) / 1e9
    n = ordered.size
    index = np.unique(np.linspace(0, n - 1, min(n, _CDF_POINTS)).astype(np.int64))
    return [(float(ordered[i]), float((i + 1) / n)) for i in index.tolist()]


def _throughput_charts(report: BenchReport) -> str:
    benches = [b for b in (report.ref, report.other) if b is not None]
    counts = sorted({r.workers for b in benches for r in b.results})
    charts = []
    for metric, label, fmt in (
        ("rows_per_s", "rows/s", format_count),
        ("bytes_per_s", "bytes/s", format_rate),
    ):
        series, marks, notes = [], [], []
        for i, b in enumerate(benches):
            color = _DATASET_COLORS[i]
            points = [(float(r.workers), r.metric(metric)) for r in b.results]
            series.append(_Series(b.dataset, color, points))
            if b.knee.workers is not None:
                marks.append(
                    _Mark(float(b.knee.workers), f"knee {b.dataset}: {_workers(b.knee.workers)}", color)
                )
            elif len(b.results) > 1:
                notes.append((f"{b.dataset}: no knee up to {_workers(b.results[-1].workers)}", color))
        charts.append(
            _chart(
                title=f"{label} against readers",
                series=series,
                x_label="workers (threads)",
                y_label=label,
                x_log=2,
                x_ticks=[float(c) for c in counts],
                x_format=lambda v: f"{v:g}",
                y_format=fmt,
                marks=marks,
                notes=notes,
            )
        )
    return "".join(f'<div class="chart">{c}</div>' for c in charts)


def _cdf_charts(report: BenchReport, which: str) -> str:
    charts = []
    for b in (report.ref, report.other):
        if b is None:
            continue
        series = []
        for i, r in enumerate(b.results):
            if r.samples is None:
                continue
            values = r.samples.latency_ns if which == "latency" else r.samples.ttfb_ns
            series.append(
                _Series(
                    _workers(r.workers),
                    _PALETTE[i % len(_PALETTE)],
                    _cdf_points(values),
                    markers=False,
                    steps=True,
                )
            )
        title = "request latency" if which == "latency" else "time to first byte (per shard)"
        charts.append(
            _chart(
                title=f"{b.dataset}: {title}, CDF",
                series=series,
                x_label="seconds (log scale)",
                y_label="fraction of " + ("requests" if which == "latency" else "shards"),
                x_log=10,
                x_format=format_seconds,
                y_format=lambda v: f"{v:.0%}",
                y_max=1.0,
            )
        )
    return "".join(f'<div class="chart">{c}</div>' for c in charts)


# ---------------------------------------------------------------------------------------------- tables


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], classes: Sequence[str] | None = None
) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _figures_table(b: DatasetBench) -> str:
    def row(r: WorkerResult) -> list[str]:
        return [
            str(r.workers),
            format_rate(r.bytes_per_s),
            format_count(r.rows_per_s) + "/s",
            format_count(r.files_per_s) + "/s",
            format_seconds(r.latency_s.p50),
            format_seconds(r.latency_s.p90),
            format_seconds(r.latency_s.p99),
            format_seconds(r.latency_s.p999),
            format_seconds(r.latency_s.max),
            format_seconds(r.ttfb_s.p50),
            format_seconds(r.ttfb_s.p99),
            str(r.errors),
            str(r.retries),
            format_seconds(r.first_done_s),
            format_seconds(r.last_done_s),
        ]

    headers = [
        "workers",
        "bytes/s",
        "rows/s",
        "files/s",
        "lat p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "ttfb p50",
        "ttfb p99",
        "errors",
        "retries",
        "first done",
        "last done",
    ]
    knee = b.knee
    classes = ["knee" if r.workers == knee.workers else "" for r in b.results]
    errors = [e for r in b.results for e in r.error_details]
    error_html = ""
    if errors:
        error_html = "<h4>errors</h4>" + _table(
            ["shard", "kind", "message"], [[e.path, e.kind, e.message] for e in errors[:20]]
        )
    return (
        f"<h3>{html.escape(b.dataset)}</h3>"
        + _table(headers, [row(r) for r in b.results], classes)
        + f'<p class="muted">knee: {html.escape(knee.note)}</p>'
        + error_html
    )


def _show(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if metric in ("errors", "retries"):
        return f"{value:g}"
    if metric == "bytes_per_s":
        return format_rate(value)
    if metric.endswith("_per_s"):
        return format_count(value) + "/s"
    return format_seconds(value)


def _comparison_table(report: BenchReport) -> str:
    """One row per figure; for each worker count, REF, OTHER and the ratio side by side."""
    if report.other is None:
        return ""
    counts = sorted({c.workers for c in report.comparison})
    metrics = list(dict.fromkeys(c.metric for c in report.comparison))
    cell = {(c.workers, c.metric): c for c in report.comparison}
    ref, other = html.escape(report.ref.dataset), html.escape(report.other.dataset)
    top = "<th></th>" + "".join(f'<th colspan="3">{_workers(n)}</th>' for n in counts)
    sub = "<th>figure</th>" + f"<th>{ref}</th><th>{other}</th><th>ratio</th>" * len(counts)
    body = []
    for metric in metrics:
        cells = [f"<td>{html.escape(figure_label(metric))}</td>"]
        for n in counts:
            c = cell.get((n, metric))
            if c is None:
                cells.append("<td></td>" * 3)
                continue
            ratio = "-" if c.ratio is None else f"{c.ratio:.3f}"
            cells.append(
                f"<td>{html.escape(_show(metric, c.ref))}</td><td>{html.escape(_show(metric, c.other))}</td>"
                f"<td class='ratio'>{ratio}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<h2>{ref} vs {other}</h2>"
        + '<p class="muted">ratio = OTHER / REF; runs alternated REF, OTHER, REF, OTHER...</p>'
        + f"<table><thead><tr>{top}</tr><tr>{sub}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _gates_table(report: BenchReport) -> str:
    if not report.gates:
        return ""
    rows = []
    classes = []
    for g in report.gates:
        measured = "-" if g.measured is None else f"{g.measured:.6g}"
        rows.append(
            [
                g.name,
                g.dataset,
                str(g.workers),
                f"{g.threshold:.6g}",
                measured,
                "pass" if g.passed else "FAIL",
            ]
        )
        classes.append("" if g.passed else "fail")
    return "<h2>gates</h2>" + _table(
        ["gate", "dataset", "workers", "threshold", "measured", "verdict"], rows, classes
    )


def _provenance(b: DatasetBench) -> str:
    p = b.provenance.to_dict()
    rows = []
    for key, value in p.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items() if v is not None)
        rows.append([key, value])
    return f"<h3>{html.escape(b.dataset)}</h3>" + '<div class="kv">' + _table(["", "value"], rows) + "</div>"


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1200px;
color:#111827;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}h4{margin:10px 0 4px}
.muted{color:#6b7280}.charts{display:flex;flex-wrap:wrap;gap:12px}
.chart{border:1px solid #e5e7eb;border-radius:6px;background:#fff}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0}
th,td{border:1px solid #e5e7eb;padding:3px 7px;text-align:right}th{background:#f3f4f6}
td:first-child,th:first-child{text-align:left}.kv td,.kv th{text-align:left}
td.ratio{font-weight:600;background:#f9fafb}
tr.knee td{background:#eff6ff;font-weight:600}tr.fail td{background:#fef2f2;color:#991b1b}
.verdict{display:inline-block;padding:2px 10px;border-radius:4px;font-weight:700;color:#fff}
.pass{background:#16a34a}.failed{background:#dc2626}
svg .title{font-size:13px;font-weight:600;fill:#111827}svg .tick{font-size:10.5px;fill:#4b5563}
svg .axis{font-size:11.5px;fill:#374151}svg .legend{font-size:11.5px;fill:#111827}
svg .mark{font-size:11px;font-weight:600}
svg .plot{fill:#fff;stroke:#9ca3af}svg .grid{stroke:#eef0f3;stroke-width:1}svg .muted{fill:#6b7280}
"""


def render_html(report: BenchReport) -> str:
    """The report as one HTML page that needs nothing else to open (no script, no fonts, no network)."""
    names = report.ref.dataset + (f" vs {report.other.dataset}" if report.other is not None else "")
    verdict = (
        '<span class="verdict pass">all gates passed</span>'
        if report.passed
        else f'<span class="verdict failed">{len(report.failed_gates)} gate check(s) failed</span>'
    )
    caches = report.ref.provenance.caches
    started = report.ref.provenance.started
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>dsm bench: {html.escape(names)}</title><style>{_CSS}</style></head><body>",
        f"<h1>dsm bench: {html.escape(names)}</h1>",
        f'<p class="muted">{html.escape(report.mode)} mode, {html.escape(report.pattern)} order; '
        f"caches {html.escape(str(caches.get('state')))}; started {html.escape(started)}; "
        f"knee and regression use {html.escape(report.metric.replace('_per_s', '/s'))}</p>",
        f"<p>{verdict}</p>",
        "<h2>throughput against readers</h2>",
        f'<div class="charts">{_throughput_charts(report)}</div>',
        "<h2>latency distributions</h2>",
        '<p class="muted">request latency: one block read (bytes mode) or one record batch (decode mode); '
        "time to first byte: from opening a shard to its first block or batch</p>",
        f'<div class="charts">{_cdf_charts(report, "latency")}{_cdf_charts(report, "ttfb")}</div>',
        "<h2>figures</h2>",
        _figures_table(report.ref),
        _figures_table(report.other) if report.other is not None else "",
        _comparison_table(report),
        _gates_table(report),
        "<h2>notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in report.notes) + "</ul>",
        "<h2>provenance</h2>",
        _provenance(report.ref),
        _provenance(report.other) if report.other is not None else "",
        "</body></html>",
    ]
    return "\n".join(parts)


def write_html(report: BenchReport, path: str, *, storage_options: Mapping[str, Any] | None = None) -> None:
    """Write the self-contained HTML report (inline SVG plots, no network needed) to ``path``, atomically."""
    check_output(path, HTML_EXTENSIONS, "output")
    write_output(path, render_html(report).encode("utf-8"), storage_options)
