"""``checked_ahead``: each item's check runs on a helper thread while the next item is produced, and what a
reader sees is what the plain loop ``for item in items: yield check(item)`` gives, failures included and in
the same place."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.formats._common import checked_ahead


class Bad(Exception):
    pass


def _items(count: int, fail_at: int | None) -> Iterator[int]:
    for i in range(count):
        if i == fail_at:
            raise Bad(f"produce {i}")
        yield i


def _check(bad: set[int]) -> Callable[[int], pa.RecordBatch]:
    def check(i: int) -> pa.RecordBatch:
        if i in bad:
            raise Bad(f"check {i}")
        return pa.record_batch({"x": [i]})

    return check


def _run(iterator: Iterator[pa.RecordBatch]) -> tuple[list[int], str | None]:
    seen: list[int] = []
    try:
        for batch in iterator:
            seen.append(batch.column(0)[0].as_py())
    except Bad as exc:
        return seen, str(exc)
    return seen, None


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 12),
    fail_at=st.none() | st.integers(0, 12),
    bad=st.sets(st.integers(0, 12), max_size=3),
    ahead=st.integers(1, 4),
)
def test_the_same_items_and_the_same_failure_as_the_plain_loop(
    count: int, fail_at: int | None, bad: set[int], ahead: int
) -> None:
    def plain() -> Iterator[pa.RecordBatch]:
        check = _check(bad)
        for item in _items(count, fail_at):
            yield check(item)

    assert _run(checked_ahead(_items(count, fail_at), _check(bad), ahead=ahead)) == _run(plain())


def test_the_next_item_is_produced_while_the_check_of_the_one_before_runs() -> None:
    """The check of item 0 waits until item 1 has been produced: it can only finish if both overlap."""
    produced_one = threading.Event()

    def items() -> Iterator[int]:
        yield 0
        produced_one.set()
        yield 1

    def check(i: int) -> pa.RecordBatch:
        if i == 0:
            assert produced_one.wait(timeout=30), "item 1 was not produced while item 0 was checked"
        return pa.record_batch({"x": [i]})

    assert _run(checked_ahead(items(), check)) == ([0, 1], None)


def test_with_ahead_that_many_checks_run_at_once() -> None:
    """Three checks that each wait for the other two to start: they finish only if all run together."""
    started = threading.Barrier(3, timeout=30)

    def check(i: int) -> pa.RecordBatch:
        started.wait()
        return pa.record_batch({"x": [i]})

    assert _run(checked_ahead(iter(range(3)), check, ahead=3)) == ([0, 1, 2], None)


@pytest.mark.parametrize("ahead", [1, 3])
def test_a_forked_child_goes_on_checking_in_its_own_thread(ahead: int) -> None:
    iterator = checked_ahead(iter(range(6)), _check({4}), ahead=ahead)
    first = next(iterator)
    assert first.column(0)[0].as_py() == 0
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit status is what is checked
        rest = _run(iterator)
        os._exit(0 if rest == ([1, 2, 3], "check 4") else 1)
    _, status = os.waitpid(child, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert _run(iterator) == ([1, 2, 3], "check 4")


def test_closing_early_stops_cleanly() -> None:
    iterator = checked_ahead(iter(range(100)), _check(set()))
    assert next(iterator).column(0)[0].as_py() == 0
    iterator.close()  # type: ignore[attr-defined]
    with pytest.raises(StopIteration):
        next(iterator)


@pytest.mark.parametrize("how", ["close", "collect"])
def test_closing_early_or_being_collected_never_waits_for_a_check_in_hand(how: str) -> None:
    """A generator closed early, by its reader or by the garbage collector, must not wait for its helper
    threads: the collector runs wherever an allocation triggers it, in any thread, even inside threading's
    own bookkeeping while that holds the lock a thread join takes (a wait there deadlocked a test run).
    Here the check in hand cannot end before the close returns, so a close that waits never returns."""
    release = threading.Event()
    running = threading.Event()

    def check(i: int) -> pa.RecordBatch:
        if i == 1:
            running.set()
            release.wait(timeout=60)
        return pa.record_batch({"x": [i]})

    def items() -> Iterator[int]:
        yield from range(3)

    iterator = checked_ahead(items(), check)
    assert next(iterator).column(0)[0].as_py() == 0
    assert running.wait(timeout=30)

    def drop() -> None:
        nonlocal iterator
        if how == "close":
            iterator.close()  # type: ignore[attr-defined]
            return
        cycle: list[object] = [iterator]
        cycle.append(cycle)  # only the cyclic collector can free it
        del iterator, cycle
        gc.collect()

    closer = threading.Thread(target=drop, daemon=True)
    closer.start()
    closer.join(timeout=30)
    stuck = closer.is_alive()
    release.set()
    assert not stuck, f"{how}: the generator waited for the check it was running"
