"""The parts of ``dsm view`` that need no terminal: the rows window (what it reads, in which order, what it
keeps, how it searches; a generated test holds its promises over random scrolling) and the diff's marking
of changed characters."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError
from dsm.viewers.tui.window import RowWindow


def _rows(offset: int, count: int) -> Sequence[int]:
    return list(range(offset, offset + count))


def _drain(window: RowWindow[int]) -> list[int]:
    read = []
    while (block := window.next_block(timeout=0)) is not None:
        window.load(block)
        read.append(block)
    return read


def test_the_screen_s_blocks_are_read_first_then_their_neighbours() -> None:
    window = RowWindow(10_000, _rows, block_rows=100, prefetch=2)
    window.want(450, 520)
    assert _drain(window) == [4, 5, 6, 3, 7, 2]
    assert window.get(520) == 520 and window.get(250) == 250 and window.get(150) is None


def test_blocks_no_longer_near_the_screen_are_not_read() -> None:
    window = RowWindow(1_000_000, _rows, block_rows=100)
    window.want(0, 30)
    window.want(500_000, 500_030)  # jumped before anything was read
    assert _drain(window) == [5000, 5001, 4999]


def test_a_cursor_far_from_the_screen_adds_its_block_not_the_blocks_between() -> None:
    # a jump scrolls and moves the cursor one after the other: between the two, the cursor is a billion
    # rows from the screen, and the window must not walk the blocks in between
    window = RowWindow(1_000_000_000, _rows, block_rows=100)
    window.want(0, 30, cursor=999_999_999)
    assert _drain(window) == [9_999_999, 0, 1]
    window.want(999_999_970, 999_999_999, cursor=0)
    assert _drain(window) == [9_999_998]  # the screen was read with the cursor; its neighbour now


def test_the_window_keeps_at_most_its_budget_and_never_drops_the_screen() -> None:
    window = RowWindow(1_000_000, _rows, block_rows=10, prefetch=1, max_blocks=8)
    for top in range(0, 2_000, 10):
        window.want(top, top + 25)
        _drain(window)
        assert len(window._blocks) <= window.max_blocks
        assert window.ready(top, top + 25)
    heavy = RowWindow(1_000, _rows, block_rows=10, max_bytes=1_000, weight=lambda row: 100)
    for top in range(0, 500, 10):
        heavy.want(top, top + 5)
        _drain(heavy)
        assert heavy.held_bytes <= 2_000  # the budget, and at most the block on screen over it


def test_a_block_that_cannot_be_read_keeps_its_error_and_is_not_read_again() -> None:
    calls: list[int] = []

    def fetch(offset: int, count: int) -> Sequence[int]:
        calls.append(offset)
        if offset >= 200:
            raise FormatError("shard part-00002.parquet: cannot be decoded")
        return _rows(offset, count)

    window = RowWindow(300, fetch, block_rows=100, prefetch=0)
    window.want(250, 260)
    _drain(window)
    window.want(250, 260)
    _drain(window)
    assert calls == [200]
    assert window.error(250) == "shard part-00002.parquet: cannot be decoded" and window.ready(250, 260)


def test_search_wraps_around_the_rows_held_and_goes_both_ways() -> None:
    window = RowWindow(1_000, _rows, block_rows=100, prefetch=0)
    window.want(0, 10)
    _drain(window)
    window.want(500, 510)
    _drain(window)
    assert window.search(lambda r: r % 250 == 0, 10) == 500
    assert window.search(lambda r: r % 250 == 0, 500) == 0  # wrapped
    assert window.search(lambda r: r in (50, 550), 520, forward=False) == 50
    assert window.search(lambda r: r == 300, 0) is None  # not held: never read for a search


@settings(max_examples=60, deadline=None)
@given(
    total=st.integers(0, 5_000),
    block_rows=st.integers(1, 300),
    jumps=st.lists(st.tuples(st.integers(0, 6_000), st.integers(1, 80)), min_size=1, max_size=12),
)
@example(total=274, block_rows=1, jumps=[(264, 6), (268, 1)])  # a smaller screen after a taller one
def test_random_scrolling_reads_only_what_was_near_the_screen(
    total: int, block_rows: int, jumps: list[tuple[int, int]]
) -> None:
    window = RowWindow(total, _rows, block_rows=block_rows, prefetch=1, max_blocks=6)
    near: set[int] = set()
    for top, height in jumps:
        window.want(top, top + height)
        shown = 0
        if total:
            first = min(top, total - 1)
            last = min(top + height, total - 1)
            lo, hi = first // block_rows, last // block_rows
            near |= set(range(lo - 1, hi + 2))
            shown = hi - lo + 1
            _drain(window)
            assert window.ready(first, last)
            assert all(window.get(p) == p for p in range(first, last + 1))
        assert len(window._blocks) <= max(window.max_blocks, shown)  # the screen itself is never dropped
    assert set(window.history) <= near
    assert all(0 <= b * block_rows < max(total, 1) for b in window.history)


def test_changed_characters_are_marked_in_a_text_pair() -> None:
    from dsm.inspect.view import CellView
    from dsm.viewers.tui.diff import marked_pair

    old = CellView(field="t", kind="text", value="row 7: word word", summary="")
    new = CellView(field="t", kind="text", value="row 7: WORD word", summary="")
    left, right = marked_pair(old, new)
    assert left.plain == "row 7: word word" and right.plain == "row 7: WORD word"
    marked = [right.plain[s.start : s.end] for s in right.spans if "on" in str(s.style)]
    assert marked == ["WORD"]
