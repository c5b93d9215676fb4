"""The local executor: units in threads or forked processes, results in unit order, progress through one
callback, error policies; the same results in every mode and worker count."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from dsm.engine import MODES, LocalExecutor, UnitFailure, map_units, run_units


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
