"""Web viewer benchmark: the rows API of ``dsm serve`` under 8 concurrent clients requesting random pages.

The corpus is the one of ``benchmarks/inspect.py`` (the generator of ``benchmarks/rewrite.py`` with texts of
300-1,200 bytes: about 1 GB of zstd Parquet in 128 MB shards, row groups of 16,384 rows, ~4.2 M rows), in the
page cache. A server is started as its own process on a free loopback port, then 8 client threads (keep-alive
connections, loopback only) ask ``/d/corpus@1/rows.json?offset=R&length=100`` at uniformly random offsets for
``--seconds`` (default 20), each request timed from send to last byte; the run is bounded by that time and
by ``--max-requests``. Each response is checked: 100 rows, the first one at the offset asked.

The peer, run alternately with dsm in the same session, is the least any viewer must do: a bare Starlette app
on uvicorn (the same stack) that opens each shard's footer once, reads the one row group that holds the
offset with pyarrow, slices 100 rows and returns them as JSON (no roles, masking, locations or rendering).

Reported: requests per second, latency p50/p99, the server's peak RSS (``VmHWM``) and its CPU seconds, for
each run, and the medians. Targets (the issue's): dsm's p99 under 150 ms and peak RSS under 400 MB.

    .venv/bin/python benchmarks/serve.py                     # 1 GB, 2 runs of 20 s each side
    .venv/bin/python benchmarks/serve.py --size 0.1 --seconds 5 --runs 1   # a quick run
"""

from __future__ import annotations

import os
import sys

# Like benchmarks/inspect.py: keep this folder off the import path (its inspect.py shadows the stdlib's).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import http.client  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402

_spec = importlib.util.spec_from_file_location("rewrite_benchmark", os.path.join(_HERE, "rewrite.py"))
if _spec is None or _spec.loader is None:
    raise SystemExit("benchmarks/rewrite.py (the corpus generator) is missing")
_rewrite = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _rewrite
_spec.loader.exec_module(_rewrite)
make_corpus = _rewrite.make_corpus

ROOT = Path(__file__).resolve().parent.parent
DSM = str(ROOT / ".venv" / "bin" / "dsm")
PYTHON = sys.executable
TEXT_BYTES = (300, 1200)
CLIENTS = 8
LENGTH = 100

PEER = r"""
import json, sys, bisect
import pyarrow.parquet as pq
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

files = sys.argv[2:]
footers = [pq.ParquetFile(f).metadata for f in files]
starts, groups = [], []
position = 0
for index, meta in enumerate(footers):
    for group in range(meta.num_row_groups):
        starts.append(position)
        groups.append((index, group))
        position += meta.row_group(group).num_rows


def rows(request):
    offset = int(request.query_params["offset"])
    length = int(request.query_params["length"])
    out = []
    while len(out) < length:
        at = bisect.bisect_right(starts, offset + len(out)) - 1
        index, group = groups[at]
        table = pq.ParquetFile(files[index]).read_row_group(group)
        first = offset + len(out) - starts[at]
        out += table.slice(first, length - len(out)).to_pylist()
    body = json.dumps({"rows": out}, default=str, ensure_ascii=False)
    return Response(body, media_type="application/json")


app = Starlette(routes=[Route("/rows.json", rows)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


@dataclass(frozen=True)
class Run:
    name: str
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    rss_mb: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def _proc_figures(pid: int) -> tuple[float, float]:
    """(peak RSS in MB, CPU seconds) of a live process, from /proc."""
    peak = 0.0
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return peak, (int(fields[11]) + int(fields[12])) / ticks


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(port: int, path: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode})")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", path)
            connection.getresponse().read()
            connection.close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not answer in 120 s")


def load(
    name: str, port: int, path: str, rows: int, seconds: float, max_requests: int, seed: int, pid: int
) -> Run:
    """8 clients for ``seconds``: random offsets, one keep-alive connection each."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client(number: int) -> None:
        rng = random.Random(seed * 100 + number)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.perf_counter() < stop_at:
            with lock:
                if len(latencies) + errors[0] >= max_requests:
                    break
            offset = rng.randrange(0, rows - LENGTH)
            started = time.perf_counter()
            try:
                connection.request("GET", f"{path}?offset={offset}&length={LENGTH}")
                answer = connection.getresponse()
                body = answer.read()
                took = time.perf_counter() - started
                ok = answer.status == 200 and _first_id(body) == offset
            except (OSError, http.client.HTTPException):
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                ok, took = False, 0.0
            with lock:
                if ok:
                    latencies.append(took)
                else:
                    errors[0] += 1
        connection.close()

    _, cpu_before = _proc_figures(pid)
    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    rss, cpu = _proc_figures(pid)
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    return Run(name, len(latencies), errors[0], elapsed, pct(0.5), pct(0.99), rss, cpu - cpu_before)


def _first_id(body: bytes) -> int | None:
    """The ``id`` of the first row of a response (either server's shape): the page must be the one asked."""
    data = json.loads(body)
    rows = data["rows"]
    if len(rows) != LENGTH:
        return None
    first = rows[0]
    if "cells" in first:
        return int(first["cells"]["id"]["value"])
    return int(first["id"])


def start_dsm(registry: Path, cache: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            DSM,
            "serve",
            "--registry",
            str(registry),
            "--cache-dir",
            str(cache),
            "--port",
            str(port),
            "--no-access-log",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start_peer(files: list[Path], port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PYTHON, "-c", PEER, str(port), *map(str, files)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def one(name: str, start: object, path: str, rows: int, args: argparse.Namespace, seed: int) -> Run:
    port = _free_port()
    process = start(port)  # type: ignore[operator]
    try:
        _wait(port, f"{path}?offset=0&length={LENGTH}", process)
        # A short warm-up (footers, imports), not counted: the figures are of a server that has started.
        load(name, port, path, rows, 1.0, 50, seed + 1000, process.pid)
        return load(name, port, path, rows, args.seconds, args.max_requests, seed, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=1.0, help="corpus size in GB (default 1.0)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of load per run (default 20)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each side, alternating (default 2)")
    parser.add_argument("--max-requests", type=int, default=200_000, help="a bound on requests per run")
    parser.add_argument("--data", default=str(ROOT / "bench-data" / "inspect"), help="shared with inspect.py")
    args = parser.parse_args()
    data = Path(args.data)
    corpus, registry, cache = (
        data / f"corpus-{args.size}",
        data / f"serve-registry-{args.size}",
        data / "serve-cache",
    )
    if not corpus.exists():
        make_corpus(corpus, int(args.size * 1e9), text_bytes=TEXT_BYTES)
    if not registry.exists():
        subprocess.run(
            [DSM, "register", str(corpus), "--name", "corpus", "--key", "id", "--registry", str(registry)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    files = sorted(corpus.glob("*.parquet"))
    for path in files:
        with open(path, "rb") as handle:
            while handle.read(8 << 20):
                pass  # into the page cache
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in files)
    size = sum(p.stat().st_size for p in files)
    print(f"corpus: {len(files)} Parquet shards, {size / 1e9:.2f} GB, {rows:,} rows; load {os.getloadavg()}")
    ours: list[Run] = []
    peers: list[Run] = []
    for i in range(args.runs):
        sides = [
            ("dsm", lambda port: start_dsm(registry, cache, port), "/d/corpus@1/rows.json", ours),
            ("peer", lambda port: start_peer(files, port), "/rows.json", peers),
        ]
        for name, start, path, runs in sides if i % 2 == 0 else reversed(sides):
            run = one(name, start, path, rows, args, seed=i)
            runs.append(run)
            print(
                f"  {name}: {run.requests:,} requests in {run.seconds:.1f} s ({run.rate:.1f}/s), "
                f"p50 {run.p50_ms:.1f} ms, p99 {run.p99_ms:.1f} ms, errors {run.errors}, "
                f"peak RSS {run.rss_mb:.0f} MB, CPU {run.cpu_s:.1f} s; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}\n")

    def med(runs: list[Run], attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in runs)

    print("| server | requests/s | p50 | p99 | peak RSS | CPU s per 1,000 requests | errors |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in (("`dsm serve` rows API", ours), ("peer: bare Starlette + pyarrow row group", peers)):
        cpu = statistics.median(r.cpu_s / max(r.requests, 1) * 1000 for r in runs)
        print(
            f"| {name} | {med(runs, 'rate'):.1f} | {med(runs, 'p50_ms'):.0f} ms "
            f"| {med(runs, 'p99_ms'):.0f} ms "
            f"| {med(runs, 'rss_mb'):.0f} MB | {cpu:.1f} | {sum(r.errors for r in runs)} |"
        )
    ratio = statistics.median(a.p99_ms / b.p99_ms for a, b in zip(ours, peers, strict=True))
    print(f"\np99 dsm / peer (median of pairs): {ratio:.2f}x; targets: dsm p99 < 150 ms, peak RSS < 400 MB")


if __name__ == "__main__":
    main()
