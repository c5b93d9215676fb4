"""The ray engine gives what the local engine gives, byte for byte, for every bulk job, on local disk and on
S3 (the moto server); and it survives what a cluster does: a worker that dies mid-unit, a transient
storage error, a driver killed with SIGKILL.

All of it runs on the session's one local Ray (``ray_cluster``, tests/ray_support.py); the tests that need
more Ray processes (two nodes, an external head) are in tests/test_ray_clusters.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dsm import _testing
from dsm.cli.app import app
from dsm.commands.cutover import start_cutover
from dsm.commands.register import register
from dsm.commands.rewrite import convert_format, reshard
from dsm.commands.verify import verify
from dsm.contract import Contract
from dsm.engine import EngineReport, UnitFailure, open_executor, run_units
from dsm.errors import CheckFailed, InputError, StorageError
from dsm.registry import open_registry
from dsm.storage import TEMP_MARKER, location

from .conftest import StorageRoot, write_parquet_shards
from .cutover_support import FAST
from .ray_support import RayCluster

pytest.importorskip("ray")

runner = CliRunner()
ENGINES = ("local", "ray")


# --- what a job left at a place: names and bytes ----------------------------------------------------------


def files_at(root: StorageRoot, folder: str) -> dict[str, str]:
    """Every file under ``root/folder``: relative name -> sha256 of its bytes (temporary files too)."""
    fs = root.fs()
    base = root.join(folder)
    prefix = base.split("://", 1)[-1].rstrip("/") + "/"
    found = {}
    for full in fs.find(base, withdirs=False):
        rel = full[len(prefix) :] if full.startswith(prefix) else full
        found[rel] = hashlib.sha256(fs.cat_file(full)).hexdigest()
    return found


def data_files(files: dict[str, str]) -> dict[str, str]:
    return {name: digest for name, digest in files.items() if not name.startswith("_")}


def comparable(contract: Contract, root: str) -> dict[str, Any]:
    """A contract as two engines must agree on it: everything but the time and the engine, with the
    engine's own folder in the location replaced by a placeholder."""
    data = contract.to_dict()
    data.pop("created", None)
    lineage = data.get("lineage") or {}
    lineage.pop("created", None)
    (lineage.get("parameters") or {}).pop("engine", None)
    data["location"] = data["location"].replace(root, "<root>")
    if isinstance(lineage.get("parameters", {}).get("source"), str):
        lineage["parameters"]["source"] = lineage["parameters"]["source"].replace(root, "<root>")
    return data


# --- the library, on both engines -------------------------------------------------------------------------


def every_job(root: StorageRoot, engine: str, registry: str) -> dict[str, Any]:
    """Every bulk job the ray engine runs, one after the other, on ``engine``; what each left behind."""
    opts = root.options or None
    here = f"{engine}"
    kw: dict[str, Any] = {"registry": registry, "storage_options": opts, "engine": engine}
    out: dict[str, Any] = {}
    source = register(root.join("src"), name="web", **kw)
    out["register"] = source
    out["verify"] = verify("web@1", deep=True, **kw)
    out["jsonl"] = convert_format("web@1", root.join(here, "jsonl"), format="jsonl", **kw)
    out["parquet"] = convert_format("web@2", root.join(here, "parquet"), format="parquet", **kw)
    out["count"] = reshard("web@1", root.join(here, "count"), num_shards=2, **kw)
    out["size"] = reshard("web@1", root.join(here, "size"), shard_size="300KB", **kw)
    spill = {"spill_dir": root.join(f"{here}-spill")} if engine == "ray" else {}
    out["shuffled"] = reshard(
        "web@1", root.join(here, "shuffled"), num_shards=3, shuffle=True, seed=7, **spill, **kw
    )
    open_registry(registry).set_alias("web", "prod", 1)
    out["cutover"] = start_cutover(
        "web@prod",
        to=root.join(here, "cutover"),
        num_shards=2,
        through="switch",
        **FAST,
        **kw,
    )
    return out


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_every_job_gives_the_same_files_and_contracts_on_both_engines(
    kind: str,
    ray_cluster: RayCluster,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sample_table: pa.Table,
) -> None:
    root = (
        StorageRoot(kind="local", url=str(tmp_path / "store"))
        if kind == "local"
        else request.getfixturevalue("s3_storage")
    )
    write_parquet_shards(
        StorageRoot(kind=root.kind, url=root.join("src"), options=root.options), sample_table, 3
    )
    runs = {engine: every_job(root, engine, str(tmp_path / f"registry-{engine}")) for engine in ENGINES}
    local, ray = runs["local"], runs["ray"]

    # register: the same contract (shards, checksums, fingerprints), the engine recorded
    assert comparable(local["register"], root.url) == comparable(ray["register"], root.url)
    assert ray["register"].lineage.parameters["engine"] == "ray"
    # verify --deep: the same report, apart from where it ran
    for report in (local["verify"], ray["verify"]):
        assert report.ok and report.fingerprint_match and report.summary == {"ok": 3}
    assert {**local["verify"].to_dict(), "engine": None} == {**ray["verify"].to_dict(), "engine": None}
    assert ray["verify"].engine.engine == "ray" and ray["verify"].engine.nodes == 1

    for job in ("jsonl", "parquet", "count", "size", "shuffled"):
        mine, theirs = local[job], ray[job]
        assert comparable(mine.contract, f"{root.url}/local") == comparable(
            theirs.contract, f"{root.url}/ray"
        )
        assert mine.contract.lineage.parameters["engine"] == "local"
        assert theirs.contract.lineage.parameters["engine"] == "ray"
        local_files, ray_files = files_at(root, f"local/{job}"), files_at(root, f"ray/{job}")
        assert data_files(local_files) == data_files(ray_files), job
        assert data_files(ray_files), job  # the job wrote data files, whose bytes were compared
        assert [name for name in ray_files if TEMP_MARKER in name] == [], job
        # Published: no journal and no claim left, on either engine (the folders hold the data files alone)
        assert not any(name.startswith("_dsm_rewrite") for name in [*local_files, *ray_files]), job
        assert theirs.engine is not None and theirs.engine.engine == "ray"
        assert theirs.engine.retries == 0 and theirs.engine.cpus == 2
    assert local["size"].shards == ray["size"].shards > 1
    assert ray["shuffled"].parameters["seed"] == 7
    # --spill-dir: the shuffle's pass-1 files went there, and are gone now that the version is published
    assert files_at(root, "ray-spill") == {}

    # a cutover through switch: the same target, byte for byte, and the alias moved on both
    for engine in ENGINES:
        report = runs[engine]["cutover"]
        assert report.ok and report.state.switched, (engine, report.state.phase, report.failed)
    assert data_files(files_at(root, "local/cutover")) == data_files(files_at(root, "ray/cutover"))
    targets = []
    for engine in ENGINES:
        target = comparable(open_registry(str(tmp_path / f"registry-{engine}")).resolve("web@prod"), root.url)
        assert target["metadata"].pop("cutover") == target["lineage"]["parameters"].pop("cutover")
        targets.append(target)  # the cutover's id (a time and a random part) is each run's own
    assert targets[0]["location"] == "<root>/local/cutover" and targets[1]["location"] == "<root>/ray/cutover"
    targets[0]["location"] = targets[1]["location"] = "<cutover>"
    assert targets[0] == targets[1]
    state = runs["ray"]["cutover"].state
    assert state.stage("copy").evidence["engine"]["engine"] == "ray"
    assert state.stage("verify").evidence["engine"]["engine"] == "ray"


def test_a_compressed_source_with_retyped_fields_gives_the_same_files_on_both_engines(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """gzip JSONL in; Parquet (zstd) and CSV (zstd) out, with fields each stores as another type
    (``timestamp[s]`` in Parquet, the dictionary as its values in JSONL and CSV); and a reshard
    that keeps the source's compression. Every file is the same bytes on both engines."""
    import datetime

    from dsm.contract import Schema

    from .trust_support import write_shards

    rows = 2_000
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "at": pa.array(
                [start + datetime.timedelta(seconds=7 * i) for i in range(rows)], pa.timestamp("s", "UTC")
            ),
            "day": pa.array(
                [start.date() + datetime.timedelta(days=i % 400) for i in range(rows)], pa.date32()
            ),
            "lang": pa.array(["en", "fr", "de"] * (rows // 3) + ["en"] * (rows % 3)).dictionary_encode(),
            "small": pa.array([i % 100 - 50 for i in range(rows)], pa.int8()),
            "text": pa.array([f'row {i}, "quoted" é' if i % 9 else None for i in range(rows)]),
        }
    )
    source = tmp_path / "src"
    paths = write_shards(source, table, "jsonl", 3, compression="gzip")
    assert all(p.name.endswith(".jsonl.gz") for p in paths)
    out: dict[str, dict[str, Any]] = {}
    for engine in ENGINES:
        registry = str(tmp_path / f"registry-{engine}")
        kw: dict[str, Any] = {"registry": registry, "engine": engine}
        register(str(source), name="ev", schema=Schema.from_arrow(table.schema), **kw)
        here = tmp_path / engine
        out[engine] = {
            "parquet": convert_format(
                "ev@1", str(here / "parquet"), format="parquet", format_options={"compression": "zstd"}, **kw
            ),
            "csv": convert_format(
                "ev@1", str(here / "csv"), format="csv", format_options={"compression": "zstd"}, **kw
            ),
            "reshard": reshard("ev@1", str(here / "reshard"), num_shards=2, **kw),
        }
    root = StorageRoot(kind="local", url=str(tmp_path))
    for job in ("parquet", "csv", "reshard"):
        mine, theirs = out["local"][job], out["ray"][job]
        assert comparable(mine.contract, f"{tmp_path}/local") == comparable(
            theirs.contract, f"{tmp_path}/ray"
        )
        local_files, ray_files = (
            data_files(files_at(root, f"local/{job}")),
            data_files(files_at(root, f"ray/{job}")),
        )
        assert local_files == ray_files and local_files, job
        assert theirs.engine is not None and theirs.engine.engine == "ray"
    stored = out["ray"]["parquet"].contract.schema.to_arrow()
    assert stored.field("at").type == pa.timestamp("ms", "UTC")
    assert all(name.endswith(".csv.zst") for name in data_files(files_at(root, "ray/csv")))
    assert all(name.endswith(".jsonl.gz") for name in data_files(files_at(root, "ray/reshard")))
    for engine in ENGINES:
        for job in ("parquet", "csv", "reshard"):
            ref = out[engine][job].contract.ref
            assert verify(ref, deep=True, registry=str(tmp_path / f"registry-{engine}")).ok, (engine, job)


# --- the executor ---------------------------------------------------------------------------------------


def _square(x: int) -> int:
    return x * x


def _fail_on(bad: int, error: type[Exception], x: int) -> int:
    if x == bad:
        raise error(f"unit {x} is bad")
    return x


def test_results_come_back_in_unit_order_with_progress_in_the_driver(ray_cluster: RayCluster) -> None:
    executor = open_executor("ray")
    seen: list[tuple[int, int, int]] = []
    results = run_units(
        _square, list(range(12)), executor=executor, on_done=lambda i, r: seen.append((i, r, os.getpid()))
    )
    assert results == [x * x for x in range(12)]
    assert sorted(i for i, _, _ in seen) == list(range(12)) and {p for _, _, p in seen} == {os.getpid()}
    report = executor.report()
    assert (report.engine, report.nodes, report.cpus, report.retries) == ("ray", 1, 2, 0)
    assert report.address == ray_cluster.address
    # in flight: twice the cluster's CPUs, or --workers; never a run's local default (I/O threads, cores)
    assert executor._window() == 4  # type: ignore[attr-defined]
    assert open_executor("ray", workers=3)._window() == 3  # type: ignore[attr-defined]


def test_a_data_failure_is_the_same_exception_and_is_not_retried(ray_cluster: RayCluster) -> None:
    executor = open_executor("ray")
    with pytest.raises(CheckFailed, match="unit 3 is bad"):
        run_units(partial(_fail_on, 3, CheckFailed), [1, 2, 3, 4], executor=executor)
    collected = run_units(
        partial(_fail_on, 2, InputError), [1, 2, 3], executor=executor, workers=1, on_error="collect"
    )
    assert collected[0] == 1 and collected[2] == 3
    failure = collected[1]
    assert isinstance(failure, UnitFailure) and type(failure.error) is InputError
    assert executor.report().retries == 0  # neither was tried again


_FLAKY = "DSM_TEST_FLAKY_DIR"


def _flaky(folder: str, x: int) -> int:
    """Fails with a StorageError on the first two attempts of each unit (counted in files, across the
    worker processes that run the attempts)."""
    marker = Path(folder) / f"unit-{x}"
    tries = int(marker.read_text()) if marker.exists() else 0
    marker.write_text(str(tries + 1))
    if tries < 2:
        raise StorageError(f"unit {x}: the store answered 503, try again")
    return x


def test_a_transient_storage_error_is_retried_and_counted(ray_cluster: RayCluster, tmp_path: Path) -> None:
    executor = open_executor("ray")
    assert run_units(partial(_flaky, str(tmp_path)), [5, 6], executor=executor) == [5, 6]
    assert executor.report().retries == 4  # two retries of each unit
    assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["3", "3"]


def test_memory_locations_and_ray_client_addresses_are_refused(
    ray_cluster: RayCluster, tmp_path: Path, sample_table: pa.Table
) -> None:
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "src", sample_table.slice(0, 200), 2)
    register(str(tmp_path / "src"), name="web", registry=registry)
    with pytest.raises(InputError, match=r"memory://.* Ray workers cannot reach"):
        reshard("web@1", "memory://dsm-ray-out", num_shards=1, registry=registry, engine="ray")
    with pytest.raises(InputError, match="Ray Client address"):
        open_executor("ray", ray_address="ray://head:10001")
    with pytest.raises(InputError, match="already connected to the Ray cluster"):
        verify("web@1", registry=registry, engine="ray", ray_address="127.0.0.1:1")


def test_locations_cross_as_urls_and_their_options_through_the_environment(
    ray_cluster: RayCluster, s3_storage: StorageRoot
) -> None:
    import ray
    import ray.cloudpickle

    from dsm.engine.ray import _collecting, _worker_environment

    executor = open_executor("ray")
    run_units(_square, [1], executor=executor)  # connected: Location's serializer is registered
    loc = location(s3_storage.url, s3_storage.options)
    found: dict[str, Any] = {}
    _collecting.found = found
    try:
        payload = ray.cloudpickle.dumps(partial(_fail_on, 0, InputError, loc))  # type: ignore[arg-type]
    finally:
        _collecting.found = None
    for secret in (s3_storage.options["key"], s3_storage.options["secret"]):
        assert secret.encode() not in payload  # no option, no filesystem object in what crosses
    assert s3_storage.url.encode() in payload
    env = _worker_environment(found)
    keyed = json.loads(env["DSM_STORAGE_OPTIONS"])
    assert keyed[s3_storage.url]["secret"] == s3_storage.options["secret"]  # the workers' environment


# --- failures on the cluster: a worker dies, the driver is killed ---------------------------------------


@pytest.fixture
def registered(tmp_path: Path, sample_table: pa.Table) -> Iterator[tuple[str, Path]]:
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "src", sample_table, 3)
    register(str(tmp_path / "src"), name="web", registry=registry)
    yield registry, tmp_path


def test_a_worker_that_dies_mid_unit_is_retried_and_the_bytes_are_the_same(
    ray_cluster: RayCluster, registered: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, tmp = registered
    clean = reshard("web@1", str(tmp / "clean"), num_shards=4, registry=registry, engine="local")
    monkeypatch.setattr(_testing, "_ARMED", ("exit", "part-00001-of-00004.parquet"))
    executor = open_executor("ray")
    retried = reshard("web@1", str(tmp / "retried"), num_shards=4, registry=registry, engine=executor)
    monkeypatch.setattr(_testing, "_ARMED", None)
    assert executor.report().retries == 1  # exactly the one unit, once
    assert [s.checksum for s in retried.contract.shards] == [s.checksum for s in clean.contract.shards]
    clean_files = {p.name: p.read_bytes() for p in (tmp / "clean").iterdir() if p.is_file()}
    retried_files = {p.name: p.read_bytes() for p in (tmp / "retried").iterdir() if p.is_file()}
    assert clean_files == retried_files  # the data files alone: a published rewrite leaves no journal
    assert not (tmp / "retried" / "_dsm_rewrite").exists()
    assert not [p for p in (tmp / "retried").rglob("*") if TEMP_MARKER in p.name]  # the dead attempt's too


def test_a_corrupt_shard_is_named_the_same_on_both_engines_and_not_retried(
    ray_cluster: RayCluster, registered: tuple[str, Path]
) -> None:
    """A data failure is no transient error: Ray runs its unit once, and the shard is named as locally."""
    registry, tmp = registered
    shard = sorted((tmp / "src").glob("*.parquet"))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the same size: only the bytes' checksum can tell
    shard.write_bytes(bytes(data))
    seen: dict[str, tuple[dict[str, Any], str]] = {}
    for engine in ENGINES:
        executor = open_executor(engine)
        report = verify("web@1", deep=True, registry=registry, engine=executor)
        assert not report.ok and [s.path for s in report.failures] == [shard.name]
        with pytest.raises(CheckFailed) as failed:
            reshard("web@1", str(tmp / f"out-{engine}"), num_shards=2, registry=registry, engine=executor)
        assert executor.report().retries == 0, engine
        assert not (tmp / f"out-{engine}").exists() or not any((tmp / f"out-{engine}").glob("part-*"))
        seen[engine] = ({**report.to_dict(), "engine": None}, str(failed.value))
    assert seen["local"] == seen["ray"]
    assert shard.name in seen["ray"][1] and "nothing was written" in seen["ray"][1]


def _dsm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsm", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=240,
    )


def test_a_driver_killed_mid_job_resumes_from_the_journal_with_the_same_bytes(
    ray_cluster: RayCluster, registered: tuple[str, Path]
) -> None:
    registry, tmp = registered
    clean = reshard("web@1", str(tmp / "clean"), num_shards=6, registry=registry, engine="local")
    job = ["reshard", "web@1", str(tmp / "out"), "--num-shards", "6", "--registry", registry]
    job += ["--engine", "ray", "--json"]
    killed = _dsm(*job, "--ray-address", ray_cluster.address, env={"DSM_TEST_KILL_AT": "units:2"})
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL, as kill -9 does
    journaled = list((tmp / "out" / "_dsm_rewrite").glob("_unit-*.json"))
    assert 2 <= len(journaled) < 6
    # Run again without an address: dsm starts a Ray of its own for the command (its files in a folder of
    # the test's own, so that nothing else on the machine finds it), and resumes.
    own = tempfile.mkdtemp(prefix="dsm-rayk-")  # short: Ray's socket paths must fit 107 bytes
    again = _dsm(*job, "--workers", "2", env={"RAY_ADDRESS": "", "RAY_TMPDIR": own})
    assert again.returncode == 0, again.stderr[-2000:]
    result = json.loads(again.stdout)
    assert result["units_resumed"] >= 2 and result["units_written"] + result["units_resumed"] == 6
    engine = result["engine"]
    assert (engine["engine"], engine["address"], engine["nodes"], engine["cpus"]) == ("ray", "local", 1, 2)
    assert engine["startup_seconds"] > 0
    assert [s["checksum"] for s in result["contract"]["shards"]] == [
        s.checksum for s in clean.contract.shards
    ]
    for shard in clean.contract.shards:
        assert (tmp / "out" / shard.path).read_bytes() == (tmp / "clean" / shard.path).read_bytes()
    assert not [p for p in (tmp / "out").rglob("*") if TEMP_MARKER in p.name]


# --- the CLI --------------------------------------------------------------------------------------------


def test_the_cli_runs_on_ray_and_says_so(ray_cluster: RayCluster, registered: tuple[str, Path]) -> None:
    registry, tmp = registered
    args = ["--registry", registry, "--engine", "ray"]
    shown = runner.invoke(app, ["verify", "web@1", "--deep", *args], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert f"ran on ray at {ray_cluster.address}: 1 node(s), 2 CPUs, 0 retries" in shown.stdout
    done = runner.invoke(
        app,
        ["reshard", "web@1", str(tmp / "cli"), "--num-shards", "2", "--json", *args],
        catch_exceptions=False,
    )
    assert done.exit_code == 0, done.output
    engine = json.loads(done.stdout)["engine"]
    assert {k: engine[k] for k in ("engine", "address", "nodes", "cpus", "retries")} == {
        "engine": "ray",
        "address": ray_cluster.address,
        "nodes": 1,
        "cpus": 2,
        "retries": 0,
    }
    registered_line = runner.invoke(
        app, ["register", str(tmp / "cli"), "--name", "again", *args], catch_exceptions=False
    )
    assert "ran on ray at" in registered_line.stdout


class Recorder:
    """A Progress that keeps what it was told."""

    def __init__(self) -> None:
        self.total = 0
        self.advanced = 0

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        self.total = total_bytes

    def advance(self, nbytes: int) -> None:
        self.advanced += nbytes

    def finish(self) -> None:
        pass


@pytest.mark.parametrize("engine", ENGINES)
def test_progress_reaches_the_total_on_both_engines(
    engine: str, ray_cluster: RayCluster, registered: tuple[str, Path]
) -> None:
    registry, tmp = registered
    jobs: list[Callable[[Recorder], Any]] = [
        lambda p: verify("web@1", deep=True, registry=registry, engine=engine, progress=p),
        lambda p: reshard(
            "web@1", str(tmp / f"p-{engine}"), num_shards=2, registry=registry, engine=engine, progress=p
        ),
        lambda p: reshard(
            "web@1",
            str(tmp / f"s-{engine}"),
            num_shards=2,
            shuffle=True,
            registry=registry,
            engine=engine,
            progress=p,
        ),
    ]
    for job in jobs:
        recorder = Recorder()
        job(recorder)
        assert recorder.total > 0 and abs(recorder.advanced - recorder.total) <= 3  # rounding of parts


def test_an_engine_report_says_where_the_units_ran() -> None:
    report = EngineReport(engine="ray", address="10.0.0.5:6379", nodes=3, cpus=48, retries=1)
    assert report.to_dict() == {
        "engine": "ray",
        "address": "10.0.0.5:6379",
        "nodes": 3,
        "cpus": 48,
        "retries": 1,
        "startup_seconds": 0.0,
    }


# --- generated: the executor's contract and what crosses to a worker -----------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=12),
    lambda inner: st.dictionaries(st.text("abcdefgh_", min_size=1, max_size=6), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=25, deadline=None)
@given(
    # Option names s3fs takes (a name it does not take is refused on the driver, before any unit runs),
    # with any JSON values.
    options=st.dictionaries(
        st.sampled_from(["requester_pays", "version_aware", "cache_regions", "default_fill_cache"]),
        _json_values,
    ),
    own=st.dictionaries(st.sampled_from(["x_own", "s3"]), st.dictionaries(st.just("x_own"), st.integers())),
)
def test_a_location_opened_in_a_worker_has_the_drivers_options(
    options: dict[str, Any], own: dict[str, Any]
) -> None:
    """Whatever options a location has on the driver, a worker that applies the run's environment opens the
    same URL with exactly the same options, whatever its own DSM_STORAGE_OPTIONS held."""
    from dsm.engine import ray as engine

    url = "s3://dsm-generated/data"
    driver = location(url, {"s3": {"endpoint_url": "http://127.0.0.1:9", **options}})
    env = engine._worker_environment({driver.url: driver.options})
    saved = {name: os.environ.get(name) for name in (*env, "DSM_STORAGE_OPTIONS")}
    os.environ["DSM_STORAGE_OPTIONS"] = json.dumps(own)  # the worker's own settings
    try:
        engine._applied.update(key=None, saved={})
        engine._apply_environment(f"run-{id(options)}", env)
        worker = engine._open_location(engine._location_settings(driver))
        assert worker.url == driver.url and worker.options == driver.options
    finally:
        engine._applied.update(key=None, saved={})
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _append_to(done: list[int]) -> Callable[[int, Any], None]:
    return lambda index, _: done.append(index)


def _maybe_fail(failing: frozenset[int], x: int) -> int:
    if x in failing:
        raise CheckFailed(f"unit {x} failed")
    return x * 3


@settings(max_examples=12, deadline=None)
@given(
    units=st.lists(st.integers(0, 50), min_size=0, max_size=12),
    failing=st.frozensets(st.integers(0, 50), max_size=3),
    workers=st.sampled_from([None, 1, 3]),
)
def test_ray_and_local_executors_keep_one_contract(
    ray_cluster: RayCluster, units: list[int], failing: frozenset[int], workers: int | None
) -> None:
    """Results in unit order, failures in their unit's place under collect, the same on both engines."""
    fn = partial(_maybe_fail, failing)
    outcomes = []
    for engine in ENGINES:
        done: list[int] = []
        results = run_units(
            fn,
            units,
            workers=workers,
            on_error="collect",
            on_done=_append_to(done),
            executor=open_executor(engine),
        )
        shown = [(r.index, type(r.error), str(r.error)) if isinstance(r, UnitFailure) else r for r in results]
        outcomes.append((shown, sorted(done)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == [i for i, x in enumerate(units) if x not in failing]
