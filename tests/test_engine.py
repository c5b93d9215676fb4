"""The local executor: units in threads or forked processes, results in unit order, progress through one
callback, error policies; the same results in every mode and worker count."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from dsm.engine import MODES, LocalExecutor, UnitFailure, map_units, run_units
from dsm.engine.base import workers_idle


def _square_and_where(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"unit {x} is bad")
    return x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_back_in_unit_order_whatever_the_mode_and_workers(mode: Any, workers: int) -> None:
    done: list[int] = []
    lock = threading.Lock()

    def on_done(index: int, result: tuple[int, int]) -> None:
        with lock:
            done.append(index)

    results = map_units(_square_and_where, list(range(10)), workers=workers, mode=mode, on_done=on_done)
    assert [r[0] for r in results] == [x * x for x in range(10)]
    assert sorted(done) == list(range(10))  # one callback per unit, in the caller's process
    pids = {pid for _, pid in results}
    if mode == "process" and workers > 1:
        assert os.getpid() not in pids  # the work ran in forked workers
    else:
        assert pids == {os.getpid()}


@pytest.mark.parametrize("mode", MODES)
def test_raise_stops_at_the_first_failure_and_collect_keeps_it_in_place(mode: Any) -> None:
    with pytest.raises(ValueError, match="unit 3 is bad"):
        map_units(_fail_on_three, [1, 2, 3, 4], workers=2, mode=mode)
    results = run_units(_fail_on_three, [1, 2, 3, 4], workers=2, mode=mode, on_error="collect")
    assert results[:2] == [1, 2] and results[3] == 4
    failure = results[2]
    assert isinstance(failure, UnitFailure) and failure.index == 2
    assert isinstance(failure.error, ValueError)


def test_threads_may_run_closures_processes_need_picklable_units() -> None:
    offset = 5
    assert map_units(lambda x: x + offset, [1, 2], workers=2) == [6, 7]
    with pytest.raises(Exception, match=r"pickle|Pickl"):
        LocalExecutor(workers=2, mode="process").run(lambda x: x + offset, [1, 2])


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of thread, process"):
        LocalExecutor(mode="ray").run(abs, [1])  # type: ignore[arg-type]


# --- choosing an engine by name -------------------------------------------------------------------------


def test_an_engine_is_chosen_by_name_then_dsm_engine_then_local(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsm.engine import ENGINES, engine_name, open_executor
    from dsm.errors import InputError

    monkeypatch.delenv("DSM_ENGINE", raising=False)
    assert tuple(ENGINES) == ("local", "ray")
    assert engine_name(None) == "local" and engine_name("RAY") == "ray"
    monkeypatch.setenv("DSM_ENGINE", "ray")
    assert engine_name(None) == "ray" and engine_name("local") == "local"
    monkeypatch.setenv("DSM_ENGINE", "spark")
    with pytest.raises(InputError, match=r"unknown engine 'spark' \(from DSM_ENGINE\): one of local, ray"):
        engine_name(None)
    with pytest.raises(InputError, match="unknown engine 'dask': one of local, ray"):
        open_executor("dask")
    local = open_executor("local", workers=3)
    assert isinstance(local, LocalExecutor) and local.report().cpus == 3
    assert open_executor(local) is local  # an executor passed in is used as it is
    with pytest.raises(InputError, match="--ray-address only applies with --engine ray"):
        open_executor("local", ray_address="10.0.0.1:6379")


def test_a_missing_extra_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, sample_table: Any
) -> None:
    import sys

    from typer.testing import CliRunner

    from dsm.cli.app import app
    from dsm.engine import open_executor
    from dsm.errors import InputError

    from .conftest import write_parquet_shards

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as when it is not installed
    monkeypatch.delitem(sys.modules, "dsm.engine.ray", raising=False)
    with pytest.raises(
        InputError, match=r"the ray engine needs ray, which is not installed: pip install 'dsm\[ray\]'"
    ):
        open_executor("ray")
    write_parquet_shards(tmp_path / "src", sample_table.slice(0, 100), 1)
    result = CliRunner().invoke(
        app,
        [
            "register",
            str(tmp_path / "src"),
            "--name",
            "web",
            "--registry",
            str(tmp_path / "r"),
            "--engine",
            "ray",
        ],
    )
    assert result.exit_code == 2 and "pip install 'dsm[ray]'" in result.stderr
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_a_unit_is_told_when_another_worker_has_no_unit_left() -> None:
    """Two workers, three units: while a unit waits to start, no worker is idle; once the last has started
    and another has finished, the units still running are told (and only in threads)."""
    seen: dict[str, bool] = {}
    first_done, last_started, second_done = threading.Event(), threading.Event(), threading.Event()

    def unit(name: str) -> str:
        if name == "a":
            seen["a, b running, c waiting"] = workers_idle()
            first_done.set()  # a finishes: c starts on its worker
        elif name == "b":
            assert last_started.wait(5)
            seen["b, c running, none waiting"] = workers_idle()
            second_done.set()  # b finishes: its worker has nothing left
        else:
            last_started.set()
            assert second_done.wait(5)
            for _ in range(500):  # b's worker counts b as finished just after b returns
                if workers_idle():
                    break
                threading.Event().wait(0.01)
            seen["c alone"] = workers_idle()
        return name

    assert LocalExecutor(workers=2).run(unit, ["a", "b", "c"]) == ["a", "b", "c"]
    assert seen == {"a, b running, c waiting": False, "b, c running, none waiting": False, "c alone": True}
    assert not workers_idle()  # outside an executor
    assert LocalExecutor(workers=1).run(lambda _: workers_idle(), [1, 2]) == [False, False]
    assert LocalExecutor(workers=2, mode="process").run(_idle, [1, 2, 3]) == [False, False, False]


def _idle(_: int) -> bool:
    return workers_idle()
