"""``dsm bench``: parse options, call :func:`dsm.commands.bench.bench`, render tables or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from dsm.cli import checks_failed
from dsm.cli.options import JsonOpt, RefArg, RegistryOpt, StorageOpt, storage_options
from dsm.cli.render import console, err_console, print_json, progress_for, seconds, si

if TYPE_CHECKING:  # the library loads Arrow; it is imported when the command runs, not when the CLI loads
    from dsm.commands import bench as bench_lib

__all__ = ["add_to", "bench"]

_EPILOG = """Examples:

  dsm bench web-text@prod

  dsm bench web-text@prod --workers 1,2,4,8 --mode decode --output report.html

  dsm bench web-text@prod --duration 30 --pattern random --cold --raw requests.parquet

  dsm bench web-text@prod --compare web-text@next --workers 8 --repeat 3 --max-regression 10 --json

Exit codes: 0 every gate held, 1 a gate failed (or a read failed), 2 bad input, 3 storage failure.
See docs/bench.md for what each figure means."""


def bench(
    ref: RefArg,
    compare: Annotated[
        str | None,
        typer.Option("--compare", help="A second dataset to run interleaved with REF, side by side."),
    ] = None,
    workers: Annotated[
        str, typer.Option("--workers", help="Reader threads, or a sweep such as 1,2,4,8.")
    ] = "1",
    duration: Annotated[
        float | None,
        typer.Option("--duration", help="Seconds per run (cycling over the shards); default one full pass."),
    ] = None,
    pattern: Annotated[
        str,
        typer.Option("--pattern", help="sequential (contract order) or random (seeded shards and offsets)."),
    ] = "sequential",
    mode: Annotated[
        str,
        typer.Option("--mode", help="bytes (raw reads in blocks) or decode (record batches via the format)."),
    ] = "bytes",
    columns: Annotated[
        str | None,
        typer.Option("--columns", help="Decode only these columns (comma-separated; --mode decode)."),
    ] = None,
    cold: Annotated[
        bool,
        typer.Option("--cold", help="Drop each local file's page cache before each run (posix_fadvise)."),
    ] = False,
    block_size: Annotated[
        str | None,
        typer.Option("--block-size", help="Bytes per read in bytes mode, e.g. 1MiB (default 8MiB)."),
    ] = None,
    warmup: Annotated[
        float | None,
        typer.Option(
            "--warmup", help="Seconds excluded at the start of each run (default 10% of --duration)."
        ),
    ] = None,
    warmup_requests: Annotated[
        int | None,
        typer.Option("--warmup-requests", help="Exclude the first N requests of each run instead."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random pattern.")] = 0,
    repeat: Annotated[int, typer.Option("--repeat", help="Runs per worker count (and per dataset).")] = 1,
    knee_threshold: Annotated[
        float, typer.Option("--knee-threshold", help="The knee: where doubling workers gains less than this.")
    ] = 0.1,
    retries: Annotated[
        int, typer.Option("--retries", help="Retries of a failed read before it is an error.")
    ] = 2,
    min_throughput: Annotated[
        str | None, typer.Option("--min-throughput", help="Gate: bytes/s at least this, e.g. 200MB/s.")
    ] = None,
    max_p99: Annotated[
        float | None, typer.Option("--max-p99", help="Gate: request latency p99 in seconds.")
    ] = None,
    max_regression: Annotated[
        float | None,
        typer.Option("--max-regression", help="Gate: OTHER's throughput drop vs REF, in percent."),
    ] = None,
    max_errors: Annotated[
        int, typer.Option("--max-errors", help="Gate: failed reads allowed at each worker count.")
    ] = 0,
    output: Annotated[
        str | None, typer.Option("--output", help="Write a self-contained HTML report with plots.")
    ] = None,
    raw: Annotated[
        str | None, typer.Option("--raw", help="Write every request's timing (.parquet or .csv).")
    ] = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Measure how a dataset reads (throughput, latency, time to first byte, knee); compare two."""
    from dsm.commands import bench as bench_lib

    report = bench_lib.bench(
        ref,
        compare=compare,
        workers=workers,
        duration=duration,
        pattern=pattern,
        mode=mode,
        columns=columns,
        cold=cold,
        block_size=block_size,
        warmup=warmup,
        warmup_requests=warmup_requests,
        seed=seed,
        repeat=repeat,
        knee_threshold=knee_threshold,
        retries=retries,
        min_throughput=min_throughput,
        max_p99=max_p99,
        max_regression=max_regression,
        max_errors=max_errors,
        output=output,
        raw=raw,
        registry=registry,
        storage_options=storage_options(storage_option) if storage_option else None,
        progress=progress_for(json_output),
    )
    if json_output:
        print_json(report.to_dict())
    else:
        _render(report)
    for path, what in ((output, "HTML report"), (raw, "request timings")):
        if path:
            err_console.print(f"wrote {what} to {path}", highlight=False, soft_wrap=True)
    if not report.passed:
        checks_failed()


def _plural(workers: int) -> str:
    return "1 worker" if workers == 1 else f"{workers} workers"


def _dur(value: float | None) -> str:
    return seconds(value).replace(" ", "")


def _figure_rows(r: bench_lib.WorkerResult) -> list[tuple[str, str]]:
    lat, ttfb = r.latency_s, r.ttfb_s
    return [
        ("bytes/s", si(r.bytes_per_s, "B")),
        ("rows/s", si(r.rows_per_s)),
        ("files/s", si(r.files_per_s)),
        ("requests", f"{r.requests:,}"),
        ("errors", f"[bold red]{r.errors}[/]" if r.errors else "0"),
        ("retries", str(r.retries)),
        ("latency p50", _dur(lat.p50)),
        ("latency p90", _dur(lat.p90)),
        ("latency p99", _dur(lat.p99)),
        ("latency p99.9", _dur(lat.p999)),
        ("latency max", _dur(lat.max)),
        ("ttfb p50", _dur(ttfb.p50)),
        ("ttfb p90", _dur(ttfb.p90)),
        ("ttfb p99", _dur(ttfb.p99)),
        ("ttfb p99.9", _dur(ttfb.p999)),
        ("ttfb max", _dur(ttfb.max)),
        ("first done", _dur(r.first_done_s)),
        ("last done", _dur(r.last_done_s)),
    ]


def _figures(bench_: bench_lib.DatasetBench) -> None:
    """One column per worker count, one row per figure (fits a terminal for sweeps of up to ~6 counts)."""
    prov = bench_.provenance
    title = (
        f"{bench_.dataset}: {prov.format}, {prov.shards} shards at {prov.location} "
        f"({prov.filesystem.get('protocol')}), caches {prov.caches.get('state')}"
    )
    console.print(f"[bold]{title}[/]", highlight=False)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("workers")
    columns = []
    for r in bench_.results:
        knee = " (knee)" if r.workers == bench_.knee.workers else ""
        table.add_column(f"{r.workers}{knee}", justify="right")
        columns.append(_figure_rows(r))
    for i, (label, _) in enumerate(columns[0] if columns else []):
        table.add_row(label, *(column[i][1] for column in columns))
    console.print(table)
    console.print(f"knee ({bench_.knee.metric.replace('_per_s', '/s')}): {bench_.knee.note}", highlight=False)
    _errors(bench_)


def _errors(bench_: bench_lib.DatasetBench) -> None:
    for r in bench_.results:
        for e in r.error_details[:5]:
            console.print(
                f"[red]error[/] ({r.workers} workers) {e.path}: {e.kind}: {e.message}", highlight=False
            )


def _comparison(report: bench_lib.BenchReport) -> None:
    other = report.other
    if other is None:
        return
    counts = sorted({c.workers for c in report.comparison})
    for count in counts:
        console.print(
            f"[bold]{_plural(count)}: {report.ref.dataset} vs {other.dataset}[/] (ratio = other / ref)",
            highlight=False,
        )
        table = Table(box=box.SIMPLE_HEAD)
        table.add_column("figure")
        table.add_column(report.ref.dataset, justify="right")
        table.add_column(other.dataset, justify="right")
        table.add_column("ratio", justify="right")
        for c in report.comparison:
            if c.workers != count:
                continue
            if c.metric == "bytes_per_s":
                a, b = si(c.ref, "B/s"), si(c.other, "B/s")
            elif c.metric.endswith("per_s"):
                a, b = si(c.ref, "/s"), si(c.other, "/s")
            elif c.metric in ("errors", "retries"):
                a, b = si(c.ref), si(c.other)
            else:
                a, b = _dur(c.ref), _dur(c.other)
            table.add_row(_label(c.metric), a, b, "-" if c.ratio is None else f"{c.ratio:.3f}")
        console.print(table)


def _render(report: bench_lib.BenchReport) -> None:
    if report.other is None:
        _figures(report.ref)
    else:
        _comparison(report)
        for bench_ in (report.ref, report.other):
            if len(bench_.results) > 1:
                unit = report.metric.replace("_per_s", "/s")
                console.print(f"knee of {bench_.dataset} ({unit}): {bench_.knee.note}", highlight=False)
            _errors(bench_)
    for note in report.notes:
        console.print(f"  {note}", highlight=False)
    console.print(f"  caches: {report.ref.provenance.caches.get('note')}", highlight=False)
    failed = report.failed_gates
    if failed:
        for g in failed:
            measured = "nothing" if g.measured is None else f"{g.measured:.6g}"
            console.print(
                f"[bold red]FAIL[/] {g.name} {g.dataset} at {_plural(g.workers)}: measured {measured}, "
                f"threshold {g.threshold:.6g} ({g.detail})",
                highlight=False,
            )
        console.print(f"[bold red]FAILED[/] {len(failed)} of {len(report.gates)} gate checks")
    elif report.gates:
        console.print(f"[bold green]OK[/] all {len(report.gates)} gate checks held")


def _label(metric: str) -> str:
    from dsm.benchmark.results import figure_label

    return figure_label(metric)


def add_to(app: typer.Typer) -> None:
    app.command(epilog=_EPILOG)(bench)
