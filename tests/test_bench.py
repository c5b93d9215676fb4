"""dsm bench, the library: counts that must be exact, orders that must follow the seed, errors that must be
named, gates and knees computed from given figures. No assertion on how fast anything was, beyond sanity."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import dsm
from dsm.benchmark import sweep as bench_sweep
from dsm.benchmark.gates import compare_results, evaluate_gates
from dsm.benchmark.results import DatasetBench, Gates, Percentiles, WorkerResult, find_knee
from dsm.commands import bench as bench_module
from dsm.commands.bench import BenchReport, bench
from dsm.contract import Contract, Shard
from dsm.errors import DatasetNotFound, InputError
from dsm.formats import get_format
from dsm.units import parse_rate, parse_size, parse_workers

from .conftest import StorageRoot, write_parquet_shards

SHARDS = 3


@pytest.fixture
def table(sample_table: pa.Table) -> pa.Table:
    return sample_table.slice(0, 900)


@pytest.fixture
def parquet_ref(tmp_path: Path, table: pa.Table, registry_url: str) -> Contract:
    """900 rows in 3 Parquet shards of 3 row groups each, registered as ``web``."""
    folder = tmp_path / "parquet"
    folder.mkdir()
    per = table.num_rows // SHARDS
    for i in range(SHARDS):
        pq.write_table(table.slice(i * per, per), folder / f"part-{i:05d}.parquet", row_group_size=100)
    return dsm.register(str(folder), name="web", registry=registry_url)


@pytest.fixture
def jsonl_ref(tmp_path: Path, parquet_ref: Contract, registry_url: str) -> Contract:
    """The same rows as JSON Lines, written through the format layer and registered as ``web-jsonl``."""
    folder = tmp_path / "jsonl"
    folder.mkdir()
    fmt = get_format("jsonl")
    for shard in parquet_ref.shards:
        piece = pq.read_table(Path(parquet_ref.location) / shard.path)
        with (
            open(folder / shard.path.replace(".parquet", ".jsonl"), "wb") as handle,
            fmt.open_writer(handle, piece.schema) as writer,
        ):
            for batch in piece.to_batches():
                writer.write_batch(batch)
    return dsm.register(str(folder), name="web-jsonl", registry=registry_url, schema="web")


def check_sane(p: Percentiles, count: int | None = None) -> None:
    values = [p.p50, p.p90, p.p99, p.p999, p.max]
    assert all(v is not None and v >= 0 for v in values)
    assert values == sorted(values)  # type: ignore[type-var]
    if count is not None:
        assert p.count == count


# ---------------------------------------------------------------------------------------------- full passes


def test_full_pass_on_every_store_reads_every_byte_once(
    storage: StorageRoot, table: pa.Table, registry_url: str
) -> None:
    write_parquet_shards(storage, table, SHARDS)
    contract = dsm.register(storage.url, name="ds", registry=registry_url, storage_options=storage.options)
    report = bench("ds", registry=registry_url, storage_options=storage.options, block_size="16KiB")
    result = report.ref.results[0]
    assert result.bytes == contract.total_bytes
    assert result.rows == contract.total_rows == 900
    assert result.files == SHARDS
    assert result.requests == sum(math.ceil(s.bytes / 16384) for s in contract.shards)
    assert result.errors == 0 and result.retries == 0 and report.passed
    check_sane(result.latency_s, result.requests)
    check_sane(result.ttfb_s, SHARDS)
    assert result.bytes_per_s > 0 and result.rows_per_s > 0 and result.files_per_s > 0
    assert 0 <= result.first_done_s <= result.last_done_s
    prov = report.ref.provenance
    assert prov.filesystem["protocol"] == {"local": "file", "azure": "abfs"}.get(storage.kind, storage.kind)
    assert prov.fingerprint == contract.fingerprint.unordered  # type: ignore[union-attr]
    assert prov.caches["state"] == "warm"
    decoded = bench(
        "ds", registry=registry_url, storage_options=storage.options, mode="decode", pattern="random"
    )
    assert decoded.ref.results[0].rows == 900 and decoded.ref.results[0].errors == 0


def test_public_names_exist() -> None:
    assert all(hasattr(bench_module, name) for name in bench_module.__all__)
    assert dsm.bench is bench and dsm.BenchReport is BenchReport


def test_sweep_gives_one_result_per_worker_count_and_a_knee(parquet_ref: Contract, registry_url: str) -> None:
    report = bench("web", workers="4,1,2", registry=registry_url, block_size=4096)
    assert [r.workers for r in report.ref.results] == [1, 2, 4]
    for r in report.ref.results:
        assert r.bytes == parquet_ref.total_bytes and r.rows == 900 and r.files == SHARDS
        # more workers than shards: some workers find no work at once; the tail phase says so
        assert r.first_done_s <= r.last_done_s
    knee = report.ref.knee
    assert [(s.from_workers, s.to_workers) for s in knee.steps] == [(1, 2), (2, 4)]
    assert knee.metric == "rows_per_s" and knee.threshold == 0.1
    expected = find_knee([(r.workers, r.rows_per_s) for r in report.ref.results], 0.1)
    assert knee.workers == expected.workers


def test_random_pattern_is_seeded_and_still_reads_every_byte(
    parquet_ref: Contract, registry_url: str
) -> None:
    def order(report: BenchReport) -> tuple[list[int], dict[int, list[int]]]:
        samples = report.ref.results[0].samples
        assert samples is not None
        timings = samples.runs[0][0]
        offsets: dict[int, list[int]] = {}
        for shard, offset in zip(timings.req_shard.tolist(), timings.req_offset.tolist(), strict=True):
            offsets.setdefault(shard, []).append(offset)
        return timings.shard_index.tolist(), offsets

    first = bench("web", registry=registry_url, pattern="random", seed=11, block_size=4096)
    again = bench("web", registry=registry_url, pattern="random", seed=11, block_size=4096)
    sequential = bench("web", registry=registry_url, block_size=4096)
    assert order(first) == order(again)
    shards, offsets = order(first)
    assert shards == np.random.default_rng([11, 0]).permutation(SHARDS).tolist()
    assert order(sequential)[0] == [0, 1, 2]
    for index, seen in offsets.items():
        blocks = math.ceil(parquet_ref.shards[index].bytes / 4096)
        assert sorted(seen) == [k * 4096 for k in range(blocks)]  # every block once...
        assert seen != sorted(seen)  # ...in a shuffled order
    assert first.ref.results[0].bytes == parquet_ref.total_bytes


def test_decode_counts_rows_and_reads_fewer_bytes_for_fewer_columns(
    parquet_ref: Contract, registry_url: str
) -> None:
    everything = bench("web", registry=registry_url, mode="decode").ref.results[0]
    ids = bench("web", registry=registry_url, mode="decode", columns="id").ref.results[0]
    for r in (everything, ids):
        assert r.rows == 900 and r.files == SHARDS and r.errors == 0
        check_sane(r.latency_s)
    assert 0 < ids.bytes < everything.bytes  # the projection skips the other column chunks


def test_random_decode_reads_every_row_group_of_every_shard(parquet_ref: Contract, registry_url: str) -> None:
    report = bench("web", registry=registry_url, mode="decode", pattern="random", seed=3, workers=2)
    result = report.ref.results[0]
    assert result.rows == 900 and result.files == SHARDS
    assert result.requests == SHARDS * 3  # 300 rows per shard in row groups of 100: one batch each


def test_parquet_fragments_are_row_groups_in_the_order_asked(tmp_path: Path) -> None:
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"x": list(range(100))}), path, row_group_size=10)
    fmt = get_format("parquet")
    with open(path, "rb") as handle:
        assert fmt.fragment_count(handle, shard="groups.parquet") == 10
    with open(path, "rb") as handle:
        batches = list(fmt.iter_fragments(handle, [7, 2], shard="groups.parquet"))
    assert pa.Table.from_batches(batches).column("x").to_pylist() == list(range(70, 80)) + list(range(20, 30))
    with open(path, "rb") as handle, pytest.raises(InputError, match="no row group 10"):
        list(fmt.iter_fragments(handle, [10], shard="groups.parquet"))


def test_duration_runs_cycle_and_exclude_the_warmup(parquet_ref: Contract, registry_url: str) -> None:
    report = bench(
        "web", registry=registry_url, duration=0.3, workers=2, block_size=4096, warmup_requests=5, repeat=2
    )
    result = report.ref.results[0]
    assert len(result.repetitions) == 2
    assert result.warmup_requests_excluded == 10  # 5 per repetition
    assert all(r.warmup_requests_excluded == 5 for r in result.repetitions)
    assert result.bytes > parquet_ref.total_bytes  # 0.3 s is many passes over 450 KB
    assert all(0.2 < r.elapsed_s < 60 for r in result.repetitions)  # the deadline was kept (sanity)
    assert any("first 5 requests" in n for n in report.notes)


def test_default_warmup_is_a_tenth_of_the_duration_and_none_on_a_full_pass(
    parquet_ref: Contract, registry_url: str
) -> None:
    timed = bench("web", registry=registry_url, duration=0.2)
    assert timed.ref.provenance.arguments["warmup"] == pytest.approx(0.02)
    full = bench("web", registry=registry_url)
    assert full.ref.provenance.arguments["warmup"] == 0
    assert full.ref.results[0].warmup_requests_excluded == 0


def test_cold_drops_the_page_cache_of_local_files_and_says_so(
    parquet_ref: Contract, registry_url: str
) -> None:
    caches = bench("web", registry=registry_url, cold=True, repeat=2).ref.provenance.caches
    assert caches["cold_requested"] and caches["applied"] and caches["state"] == "cold"
    assert f"applied to {SHARDS} of {SHARDS} files" in caches["note"]


def test_cold_on_memory_store_is_reported_warm(table: pa.Table, registry_url: str) -> None:
    root = StorageRoot(kind="memory", url="memory://bench-cold")
    write_parquet_shards(root, table, 2)
    dsm.register(root.url, name="mem", registry=registry_url)
    caches = bench("mem", registry=registry_url, cold=True).ref.provenance.caches
    assert caches["state"] == "warm" and not caches["applied"]
    assert "memory://" in caches["note"] and "warm" in caches["note"]


# ---------------------------------------------------------------------------------------------- compare


def test_compare_parquet_with_jsonl_runs_both_interleaved(
    parquet_ref: Contract, jsonl_ref: Contract, registry_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    real = bench_sweep.execute_run

    def spy(spec: Any, **kwargs: Any) -> Any:
        order.append(f"{spec.shards[0].path.rsplit('.', 1)[1]}:{spec.workers}")
        return real(spec, **kwargs)

    monkeypatch.setattr(bench_sweep, "execute_run", spy)
    report = bench("web", compare="web-jsonl", registry=registry_url, mode="decode", workers="1,2", repeat=2)
    assert order == ["parquet:1", "jsonl:1", "parquet:2", "jsonl:2"] * 2
    assert report.other is not None and report.other.dataset == "web-jsonl@1"
    assert jsonl_ref.fingerprint == parquet_ref.fingerprint
    for a, b in zip(report.ref.results, report.other.results, strict=True):
        assert a.rows == b.rows == 1800  # two repetitions of 900 rows
    rows = {(c.workers, c.metric): c for c in report.comparison}
    rate = rows[(1, "rows_per_s")]
    assert rate.ratio == pytest.approx(rate.other / rate.ref)  # type: ignore[operator]
    assert {c.metric for c in report.comparison} >= {"bytes_per_s", "latency_p99_s", "ttfb_p50_s", "errors"}
    data = json.loads(json.dumps(report.to_dict()))
    assert data["compare"]["dataset"] == "web-jsonl@1" and data["compare"]["provenance"]["format"] == "jsonl"


def test_max_regression_fails_when_other_reads_nothing(
    parquet_ref: Contract, registry_url: str, tmp_path: Path
) -> None:
    gone = parquet_ref.evolve(
        name="web-gone",
        version=None,
        shards=tuple(Shard(path=f"gone-{i}.parquet", bytes=10, rows=1) for i in range(2)),
    )
    report = bench("web", compare=gone, registry=registry_url, max_regression=50, max_errors=None)
    (gate,) = report.gates
    assert gate.name == "max_regression" and gate.measured == pytest.approx(100.0) and not gate.passed
    assert not report.passed


# ---------------------------------------------------------------------------------------------- gates, knee


def fake(dataset: str, figures: dict[int, tuple[float, float, int]]) -> DatasetBench:
    """A DatasetBench with given (rows/s, p99 seconds, errors) per worker count; bytes/s = 100 x rows/s."""
    ttfb = Percentiles(p50=0.001, p90=0.001, p99=0.001, p999=0.001, max=0.001, count=1)
    results = []
    for workers, (rate, p99, errors) in sorted(figures.items()):
        latency = Percentiles(p50=0.001, p90=0.001, p99=p99, p999=p99, max=p99, count=1)
        results.append(
            WorkerResult(
                workers=workers,
                repetitions=(),
                elapsed_s=1.0,
                bytes=int(rate * 100),
                rows=int(rate),
                files=1,
                requests=1,
                bytes_per_s=rate * 100,
                rows_per_s=rate,
                files_per_s=1.0,
                latency_s=latency,
                ttfb_s=ttfb,
                errors=errors,
                retries=0,
                error_details=(),
                first_done_s=0.5,
                last_done_s=1.0,
                warmup_requests_excluded=0,
            )
        )
    knee = find_knee([(r.workers, r.rows_per_s) for r in results])
    provenance: Any = None
    return DatasetBench(dataset=dataset, provenance=provenance, results=tuple(results), knee=knee)


def test_gates_are_data_with_threshold_measured_and_verdict() -> None:
    ref = fake("old@1", {1: (1000.0, 0.01, 0), 4: (3000.0, 0.02, 0)})
    new = fake("new@1", {1: (950.0, 0.01, 0), 4: (2400.0, 0.05, 1)})
    gates = evaluate_gates(
        ref, new, Gates(min_throughput=200_000.0, max_p99=0.03, max_regression=10.0, max_errors=0)
    )
    verdicts = {(g.name, g.dataset, g.workers): (g.measured, g.passed) for g in gates}
    assert verdicts[("min_throughput", "new@1", 1)] == (95_000.0, False)
    assert verdicts[("min_throughput", "new@1", 4)] == (240_000.0, True)
    assert verdicts[("max_p99", "new@1", 4)] == (0.05, False)
    assert verdicts[("max_regression", "new@1", 1)][0] == pytest.approx(5.0)
    assert verdicts[("max_regression", "new@1", 1)][1] is True
    assert verdicts[("max_regression", "new@1", 4)][0] == pytest.approx(20.0)
    assert verdicts[("max_regression", "new@1", 4)][1] is False
    assert verdicts[("max_errors", "new@1", 4)] == (1.0, False)
    assert verdicts[("max_errors", "old@1", 4)] == (0.0, True)
    assert all(isinstance(g.to_dict()["threshold"], float) for g in gates)


def test_gates_read_ref_when_there_is_no_comparison() -> None:
    ref = fake("only@1", {2: (10.0, 0.5, 0)})
    (gate, _) = evaluate_gates(ref, None, Gates(max_p99=0.1))
    assert gate.dataset == "only@1" and gate.measured == 0.5 and not gate.passed
    with pytest.raises(InputError, match="compare"):
        evaluate_gates(ref, None, Gates(max_regression=5))


def test_compare_results_pairs_figures_by_worker_count() -> None:
    rows = compare_results(
        fake("a", {1: (100.0, 0.1, 0), 2: (200.0, 0.1, 0)}), fake("b", {2: (150.0, 0.2, 0)})
    )
    assert {r.workers for r in rows} == {2}
    by_metric = {r.metric: r for r in rows}
    assert by_metric["rows_per_s"].ratio == pytest.approx(0.75)
    assert by_metric["latency_p99_s"].ratio == pytest.approx(2.0)
    assert by_metric["errors"].ratio is None  # 0 errors in REF: no ratio


@pytest.mark.parametrize(
    ("points", "threshold", "knee"),
    [
        ([(1, 100.0), (2, 180.0), (4, 190.0)], 0.1, 2),
        ([(1, 100.0), (2, 105.0), (4, 300.0)], 0.1, 1),  # the first flat step is the knee
        ([(1, 100.0), (2, 200.0), (4, 400.0)], 0.1, None),  # still scaling
        ([(1, 100.0), (4, 120.0)], 0.1, 1),  # 1 -> 4 is two doublings: 9.5% per doubling
        ([(1, 100.0), (4, 125.0)], 0.1, None),  # 11.8% per doubling
        ([(2, 50.0)], 0.1, None),
    ],
)
def test_knee_definition(points: list[tuple[int, float]], threshold: float, knee: int | None) -> None:
    assert find_knee(points, threshold).workers == knee


def test_knee_gain_is_per_doubling() -> None:
    (step,) = find_knee([(1, 100.0), (4, 121.0)]).steps
    assert step.gain_per_doubling == pytest.approx(0.1)


def test_percentiles_are_nearest_rank() -> None:
    p = Percentiles.of_ns(np.arange(1, 1001, dtype=np.int64) * 1000)  # 1..1000 microseconds
    assert (p.p50, p.p90, p.p99, p.p999, p.max) == (0.0005, 0.0009, 0.00099, 0.000999, 0.001)
    assert Percentiles.of_ns(np.zeros(0, np.int64)).p99 is None


# ---------------------------------------------------------------------------------------------- bad input


def test_missing_shard_is_an_error_with_its_path_and_the_rest_is_measured(
    parquet_ref: Contract, registry_url: str
) -> None:
    broken = parquet_ref.evolve(
        shards=(*parquet_ref.shards, Shard(path="part-99999.parquet", bytes=100, rows=7))
    )
    report = bench(broken, registry=registry_url, workers=2)
    result = report.ref.results[0]
    assert result.errors == 1
    (error,) = result.error_details
    assert error.path.endswith("part-99999.parquet") and error.kind == "missing"
    assert result.bytes == parquet_ref.total_bytes and result.rows == 900 and result.files == SHARDS
    (failed,) = report.failed_gates
    assert failed.name == "max_errors" and failed.measured == 1
    assert bench(broken, registry=registry_url, max_errors=None).passed


def test_shard_deleted_between_plan_and_run_is_counted(
    parquet_ref: Contract, registry_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = bench_sweep.execute_run
    victim = Path(parquet_ref.location) / parquet_ref.shards[1].path

    def delete_then_run(spec: Any, **kwargs: Any) -> Any:
        victim.unlink(missing_ok=True)
        return real(spec, **kwargs)

    monkeypatch.setattr(bench_sweep, "execute_run", delete_then_run)
    for mode in ("bytes", "decode"):
        result = bench("web", registry=registry_url, mode=mode).ref.results[0]
        assert result.errors == 1 and result.error_details[0].path.endswith(parquet_ref.shards[1].path)
        assert result.files == SHARDS - 1 and result.rows == 600


def test_unknown_dataset(registry_url: str) -> None:
    with pytest.raises(DatasetNotFound):
        bench("nope", registry=registry_url)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"columns": ["id"]}, "needs --mode decode"),
        ({"mode": "decode", "block_size": "1MiB"}, "applies to --mode bytes"),
        ({"warmup": 1.0, "warmup_requests": 3}, "not both"),
        ({"duration": 1.0, "warmup": 2.0}, "shorter than the duration"),
        ({"max_regression": 5}, "--compare"),
        ({"workers": "0"}, "at least 1"),
        ({"workers": "1,two"}, "whole number"),
        ({"mode": "fast"}, "mode"),
        ({"pattern": "zigzag"}, "pattern"),
        ({"block_size": "8 parsecs"}, "not a size"),
        ({"min_throughput": "fast"}, "not a rate"),
        ({"raw": "timings.json"}, ".parquet"),
        ({"output": "report.pdf"}, ".html"),
        ({"knee_threshold": 0}, "more than 0"),
        ({"repeat": 0}, "at least 1"),
        ({"mode": "decode", "columns": "id,nope"}, "nope not in web@1"),
    ],
)
def test_bad_options_are_input_errors(
    parquet_ref: Contract, registry_url: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        bench("web", registry=registry_url, **kwargs)


def test_parsers() -> None:
    assert parse_size("8MiB") == 8 << 20 and parse_size("8M") == 8_000_000
    assert parse_size("200MB") == 200_000_000 and parse_size(4096) == 4096
    assert parse_rate("200MB/s") == parse_rate("200MB") == parse_rate(2e8) == 2e8
    assert parse_rate("1.5GiB/s") == 1.5 * (1 << 30)
    assert (
        parse_workers("8,1,2,2") == (1, 2, 8) and parse_workers(3) == (3,) and parse_workers([4, 2]) == (2, 4)
    )
    for bad in ("0", "", "1.5", "-1"):
        with pytest.raises(InputError):
            parse_workers(bad)


# ---------------------------------------------------------------------------------------------- files


def test_raw_timings_as_parquet_and_csv(parquet_ref: Contract, registry_url: str, tmp_path: Path) -> None:
    report = bench(
        "web",
        registry=registry_url,
        workers="1,2",
        block_size=4096,
        raw=str(tmp_path / "out" / "requests.parquet"),
    )
    table = pq.read_table(tmp_path / "out" / "requests.parquet")
    requests = table.filter(pc.equal(table["kind"], "request"))
    shards = table.filter(pc.equal(table["kind"], "shard"))
    assert requests.num_rows == sum(r.requests for r in report.ref.results)
    assert shards.num_rows == SHARDS * 2 and set(shards["status"].to_pylist()) == {"done"}
    assert sum(requests["bytes"].to_pylist()) == 2 * parquet_ref.total_bytes
    assert set(requests["workers"].to_pylist()) == {1, 2} and all(requests["measured"].to_pylist())
    assert min(requests["latency_s"].to_pylist()) >= 0
    bench("web", registry=registry_url, raw=str(tmp_path / "requests.csv"))
    assert pacsv.read_csv(tmp_path / "requests.csv").column_names == table.column_names


def test_html_report_is_self_contained(
    parquet_ref: Contract, jsonl_ref: Contract, registry_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    report = bench("web", compare="web-jsonl", registry=registry_url, workers="1,2", output=str(out))
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 6  # 2 throughput, 2x2 CDFs
    assert "<script" not in text and "<link" not in text and "https://" not in text
    assert "web@1 vs web-jsonl@1" in text and "time to first byte" in text
    knees = [b.knee.workers for b in (report.ref, report.other) if b is not None and b.knee.workers]
    for workers in knees:
        assert f"{workers} worker" in text


def test_report_json_shape(parquet_ref: Contract, registry_url: str) -> None:
    data = json.loads(json.dumps(bench("web", registry=registry_url, workers="1,2").to_dict()))
    assert data["dataset"] == "web@1" and data["compare"] is None and data["passed"] is True
    result = data["results"][0]
    for key in ("workers", "bytes_per_s", "rows_per_s", "files_per_s", "errors", "retries", "tail_s"):
        assert key in result
    assert set(result["latency_s"]) >= {"p50", "p90", "p99", "p999", "max"}
    assert set(result["ttfb_s"]) >= {"p50", "p90", "p99", "p999", "max"}
    prov = data["provenance"]
    for key in ("fingerprint", "location", "filesystem", "versions", "host", "cores", "python", "arguments"):
        assert prov[key] is not None
    assert {"dsm", "pyarrow", "fsspec"} <= set(prov["versions"])
    assert prov["arguments"]["workers"] == [1, 2] and prov["seed"] == 0


def test_worker_sweep_on_every_store(storage: StorageRoot, table: pa.Table, registry_url: str) -> None:
    write_parquet_shards(storage, table, SHARDS)
    contract = dsm.register(storage.url, name="ds", registry=registry_url, storage_options=storage.options)
    report = bench("ds", registry=registry_url, storage_options=storage.options, workers="1,2,4")
    assert [r.workers for r in report.ref.results] == [1, 2, 4]
    for result in report.ref.results:
        assert result.bytes == contract.total_bytes and result.files == SHARDS and result.errors == 0
        check_sane(result.latency_s, result.requests)
    assert report.ref.knee is not None
    assert [(s.from_workers, s.to_workers) for s in report.ref.knee.steps] == [(1, 2), (2, 4)]
