"""Cutover benchmark: what a full ``dsm cutover`` costs over the bare copy it wraps, and how good its plan is.

Makes a text-heavy Parquet corpus (benchmarks/rewrite.py's generator), registers it as ``corpus`` with
``corpus@prod``, then alternates, each as a subprocess so start-up is included:

- ours: ``dsm cutover start corpus@prod --to DEST --format jsonl --run --retain 0`` (plan with its
  measurements, copy, deep verify, a shadow benchmark of 2 x ``--shadow-duration`` seconds and a 1,000-row
  sample, switch, complete), then the alias is put back for the next round;
- peer: ``dsm convert-format corpus@1 DEST --to jsonl`` (the copy alone, which already proves the rows).

The ratio ours/peer is the price of the evidence; the shadow's fixed seconds weigh less as the data grows.
It also prints, from the last cutover's journal, each stage's planned time beside the measured one.

    .venv/bin/python benchmarks/cutover.py                    # 0.3 GB, 2 rounds
    .venv/bin/python benchmarks/cutover.py --size 0.1 --runs 1
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import as_installed, peak_rss_mb, run_timed
from rewrite import make_corpus

ROOT = Path(__file__).resolve().parent.parent
DSM = str(ROOT / ".venv" / "bin" / "dsm")


def _dsm(*args: str) -> str:
    done = subprocess.run([DSM, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"dsm {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=float, default=0.3, help="corpus size in GB")
    parser.add_argument("--runs", type=int, default=2, help="rounds of (cutover, convert-format)")
    parser.add_argument("--shadow-duration", default="2", help="seconds of each side of the shadow benchmark")
    parser.add_argument("--work", default=str(ROOT / "bench-data" / "cutover-runs"), help="scratch folder")
    args = parser.parse_args()
    as_installed()

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    corpus = work / "corpus"
    make_corpus(corpus, int(args.size * 1e9))
    registry = str(work / "registry")
    _dsm("register", str(corpus), "--name", "corpus", "--registry", registry)
    _dsm("alias", "corpus", "prod", "1", "--registry", registry)
    total = sum(p.stat().st_size for p in corpus.glob("*.parquet"))

    ours, peer = [], []
    for round_ in range(args.runs):
        cutover = [
            DSM, "cutover", "start", "corpus@prod", "--to", str(work / f"cutover-{round_}"),
            "--format", "jsonl", "--run", "--retain", "0", "--shadow-duration", args.shadow_duration,
            "--registry", registry,
        ]  # fmt: skip
        ours.append(run_timed(cutover))
        _dsm("alias", "corpus", "prod", "1", "--registry", registry)
        convert = [
            DSM, "convert-format", "corpus@1", str(work / f"convert-{round_}"), "--to", "jsonl",
            "--name", "corpus-peer", "--registry", registry,
        ]  # fmt: skip
        peer.append(run_timed(convert))
    status = json.loads(_dsm("cutover", "status", "--registry", registry, "--json"))
    rss_cutover = peak_rss_mb([*cutover[:5], str(work / "cutover-rss"), *cutover[6:]])
    _dsm("alias", "corpus", "prod", "1", "--registry", registry)

    ratio = statistics.median(a / b for a, b in zip(ours, peer, strict=True))
    print(f"corpus: {total / 1e9:.2f} GB Parquet (zstd) -> JSONL, {args.runs} rounds")
    print("| job | wall (median) |\n|---|---|")
    print(f"| dsm cutover start --run (all six stages) | {statistics.median(ours):.2f} s |")
    print(f"| dsm convert-format (the copy alone) | {statistics.median(peer):.2f} s |")
    print(f"ratio cutover / convert-format: {ratio:.2f}x; cutover peak RSS {rss_cutover:.0f} MB")
    print("\n| stage | planned | measured |\n|---|---|---|")
    for row in status["plan_vs_actual"]:
        planned, actual = row["planned"], row["actual"]
        if row["unit"] == "bytes":
            print(f"| {row['item']} | {planned / 1e6:.0f} MB | {(actual or 0) / 1e6:.0f} MB |")
        else:
            print(f"| {row['item']} | {planned or 0:.1f} s | {actual or 0:.1f} s |")


if __name__ == "__main__":
    main()
