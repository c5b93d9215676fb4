"""``dsm view`` benchmark through Textual's Pilot on a text-heavy Parquet corpus (page cache).

Makes the corpus with the generator of ``benchmarks/rewrite.py`` (id, url, a text of 300-1,200 bytes, three
numeric fields and a timestamp; zstd, 128 MB shards, row groups of 16,384 rows: about 4.2 M rows a GB) at each
size asked, registers it and reads every file once (page cache). Then, each session a fresh process (so that
peak RSS is its own), run alternately with its peer, at a 120x40 terminal:

1. time to the first full screen: from creating the app (the contract read, the source opened) until every
   row on screen and the detail pane are drawn; target under 1.0 s. Importing the modules is given apart.
2. page-down latency: 20 jumps spread evenly over the dataset, 10 PgDn presses after each (200 in all);
   each press timed until every row on screen is drawn; p50 and p99, target p99 under 100 ms.
3. jump to the last row (End, from the middle): until the last screen is drawn; target under 200 ms.
4. peak RSS of the process; target under 300 MB, the same for the small and the large corpus.

The peer is the smallest viewer Textual offers: its ``DataTable`` holding 256 rows around the position, from
the row group that holds them read with pyarrow (``read_row_group``), rebuilt on a jump; its page-down moves
within rows already in memory (it reads nothing more, so it is a floor, not a viewer of the whole dataset).

    .venv/bin/python benchmarks/view.py                    # 0.3 and 1.0 GB under bench-data/view
    .venv/bin/python benchmarks/view.py --sizes 0.1 --runs 1   # a quick run
"""

from __future__ import annotations

import os
import sys

# benchmarks/inspect.py is named like the standard library's ``inspect``: this folder must not be on the
# import path, or ``import asyncio`` (which imports ``inspect``) would import that script.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
DSM = str(ROOT / ".venv" / "bin" / "dsm")
TEXT_BYTES = (300, 1200)
SIZE = (120, 40)
JUMPS, PRESSES = 20, 10


def _corpus_maker() -> Any:
    spec = importlib.util.spec_from_file_location("rewrite_benchmark", HERE / "rewrite.py")
    if spec is None or spec.loader is None:
        raise SystemExit("benchmarks/rewrite.py (the corpus generator) is missing")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.make_corpus


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _until(pilot: Any, ready: Any) -> None:
    for _ in range(1_000_000):
        if ready():
            return
        await pilot.pause()
    raise SystemExit("the screen never finished")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ----------------------------------------------------------------------------------------- dsm view


def session_dsm(registry: str, cache: str) -> dict[str, Any]:
    started = time.perf_counter()
    import dsm.viewers.tui.app  # noqa: F401  (what make_app would import: timed apart)
    from dsm.viewers.tui import make_app

    imported = time.perf_counter() - started

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        app = make_app("corpus", registry=registry, cache_dir=cache, images="none")
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, app.screen_ready)
            first = time.perf_counter() - t0
            total = app.source.num_rows
            latencies = []
            for jump in range(JUMPS):
                app.table.go(int(jump * (total - 1) / JUMPS))
                await _until(pilot, app.screen_ready)
                for _ in range(PRESSES):
                    t = time.perf_counter()
                    await pilot.press("pagedown")
                    await _until(pilot, app.screen_ready)
                    latencies.append(time.perf_counter() - t)
            app.table.go(total // 2)
            await _until(pilot, app.screen_ready)
            t = time.perf_counter()
            await pilot.press("end")
            await _until(pilot, lambda: app.table.cursor == total - 1 and app.screen_ready())
            last = time.perf_counter() - t
            held = app.window.held_rows
        return {"first": first, "pagedown": latencies, "end": last, "rows": total, "held_rows": held}

    out = asyncio.run(run())
    return out | {"import": imported, "rss_mb": _peak_rss_mb()}


# ------------------------------------------------------------------------------------ the peer


def session_peer(folder: str) -> dict[str, Any]:
    started = time.perf_counter()
    import pyarrow.parquet as pq
    from textual.app import App
    from textual.widgets import DataTable

    imported = time.perf_counter() - started
    files = sorted(Path(folder).glob("*.parquet"))
    groups = []  # (file, row group, first position, rows)
    position = 0
    for path in files:
        meta = pq.ParquetFile(path).metadata
        for g in range(meta.num_row_groups):
            groups.append((path, g, position, meta.row_group(g).num_rows))
            position += meta.row_group(g).num_rows
    total = position

    class Peer(App[None]):
        def compose(self) -> Any:
            yield DataTable(id="t")

        def show(self, index: int, at: int = 0) -> None:
            path, group, _, _ = groups[index]
            rows = pq.ParquetFile(path).read_row_group(group).slice(at, 256).to_pylist()
            table = self.query_one(DataTable)
            table.clear(columns=True)
            table.add_columns(*rows[0].keys())
            table.add_rows([[str(v)[:60] for v in row.values()] for row in rows])

    def group_of(position: int) -> int:
        return next(i for i, (_, _, first, n) in enumerate(groups) if first <= position < first + n)

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        app = Peer()
        async with app.run_test(size=SIZE) as pilot:
            app.show(0)
            await pilot.pause()
            first = time.perf_counter() - t0
            latencies = []
            for jump in range(JUMPS):
                position = int(jump * (total - 1) / JUMPS)
                index = group_of(position)
                app.show(index, position - groups[index][2])
                await pilot.pause()
                for _ in range(PRESSES):
                    t = time.perf_counter()
                    await pilot.press("pagedown")
                    await pilot.pause()
                    latencies.append(time.perf_counter() - t)
            t = time.perf_counter()
            app.show(len(groups) - 1, max(0, groups[-1][3] - 256))
            app.query_one(DataTable).move_cursor(row=min(255, groups[-1][3] - 1))
            await pilot.pause()
            last = time.perf_counter() - t
        return {"first": first, "pagedown": latencies, "end": last, "rows": total}

    out = asyncio.run(run())
    return out | {"import": imported, "rss_mb": _peak_rss_mb()}


# ----------------------------------------------------------------------------------------- driver


def child(kind: str, data: Path) -> dict[str, Any]:
    arguments = [sys.executable, __file__, "--child", kind, "--data", str(data)]
    done = subprocess.run(arguments, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} session failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def prepare(data: Path, size: float) -> None:
    corpus = data / "corpus"
    if not corpus.exists():
        _corpus_maker()(corpus, int(size * 1e9), text_bytes=TEXT_BYTES)
    registry = data / "registry"
    if not registry.exists():
        command = [DSM, "register", str(corpus), "--name", "corpus", "--key", "id"]
        subprocess.run([*command, "--registry", str(registry)], check=True, stdout=subprocess.DEVNULL)
    for path in corpus.glob("*.parquet"):
        with open(path, "rb") as handle:
            while handle.read(8 << 20):
                pass  # into the page cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.3,1.0", help="corpus sizes in GB (default 0.3,1.0)")
    parser.add_argument("--runs", type=int, default=3, help="sessions of each viewer per size (default 3)")
    parser.add_argument("--data", default=str(ROOT / "bench-data" / "view"))
    parser.add_argument("--child", choices=["dsm", "peer"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        data = Path(args.data)
        out = (
            session_dsm(str(data / "registry"), str(data / "cache"))
            if args.child == "dsm"
            else session_peer(str(data / "corpus"))
        )
        print(json.dumps(out))
        return
    rows = []
    for size in [float(s) for s in args.sizes.split(",")]:
        data = Path(args.data) / f"corpus-{size}"
        prepare(data, size)
        print(f"{size} GB corpus ready; load {os.getloadavg()}", flush=True)
        ours, peers = [], []
        for _ in range(args.runs):
            ours.append(child("dsm", data))
            peers.append(child("peer", data))
        rows.append((size, ours, peers, os.getloadavg()))
    print(f"\nload after: {os.getloadavg()}\n")
    print(
        "| corpus | viewer | first full screen | PgDn p50 | PgDn p99 | End (last row) | peak RSS | imports |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size, ours, peers, _ in rows:
        for name, runs in (("dsm view", ours), ("peer: DataTable of a row group", peers)):
            presses = [x for r in runs for x in r["pagedown"]]
            print(
                f"| {size} GB, {runs[0]['rows']:,} rows | {name} "
                f"| {statistics.median(r['first'] for r in runs):.3f} s "
                f"| {percentile(presses, 0.5) * 1000:.1f} ms | {percentile(presses, 0.99) * 1000:.1f} ms "
                f"| {statistics.median(r['end'] for r in runs) * 1000:.0f} ms "
                f"| {max(r['rss_mb'] for r in runs):.0f} MB "
                f"| {statistics.median(r['import'] for r in runs):.2f} s |"
            )
    print("\n(medians of sessions; PgDn percentiles over every press of every session; RSS the highest)")


if __name__ == "__main__":
    main()
