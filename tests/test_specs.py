"""The typed specs round-trip through the formats they are stored in, key for key: a reader's order and
state (``dsm-iterator-state/1``), a rewrite's spec and a cutover's spec (the journal's ``created`` record)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.commands.cutover import start_cutover
from dsm.commands.cutover.spec import CutoverSpec
from dsm.errors import InputError, StateError
from dsm.read.state import ORDER_ARGUMENTS, IteratorState, ReadOrder, SkippedRows
from dsm.rewrite.spec import RewriteSpec

from .cutover_support import FAST, journal_records, make_dataset


@st.composite
def orders(draw: st.DrawFn) -> ReadOrder:
    world = draw(st.integers(1, 64))
    return ReadOrder(
        shuffle=draw(st.booleans()),
        seed=draw(st.integers(-(2**63), 2**64)),
        epoch=draw(st.integers(0, 10**6)),
        block_rows=draw(st.integers(1, 1 << 20)),
        rank=draw(st.integers(0, world - 1)),
        world_size=world,
        drop_last=draw(st.booleans()),
    )


@st.composite
def states(draw: st.DrawFn) -> IteratorState:
    bounds = sorted(draw(st.lists(st.integers(0, 10**9), min_size=0, max_size=8, unique=True)))
    ranges = tuple(zip(bounds[::2], bounds[1::2], strict=False))
    skipped = tuple(
        SkippedRows(shard=f"part-{i}.parquet", start=a, stop=b, row=a, error="bad bytes")
        for i, (a, b) in enumerate(ranges[:2])
    )
    return IteratorState(
        dataset={"ref": "web@3", "fingerprint": "xxh3-128:" + "ab" * 16, "rows": 10**9},
        order=draw(orders()),
        batch_size=draw(st.integers(1, 1 << 16)),
        on_error=draw(st.sampled_from(["raise", "skip"])),
        ranges=ranges,
        cursor=draw(st.integers(0, 10)),
        position=draw(st.none() | st.integers(0, 10**9)),
        seeks=tuple(
            {"shard": "part-0.parquet", "row": r, "fragment": 0} for r in draw(st.lists(st.integers(0, 99)))
        ),
        skipped=skipped,
    )


@settings(max_examples=60, deadline=None)
@given(orders())
def test_a_read_order_round_trips_in_state_key_order(order: ReadOrder) -> None:
    data = order.to_dict()
    assert list(data) == list(ORDER_ARGUMENTS)
    assert ReadOrder.from_dict(json.loads(json.dumps(data))) == order


@settings(max_examples=60, deadline=None)
@given(states())
def test_an_iterator_state_round_trips_through_json(state: IteratorState) -> None:
    data = json.loads(json.dumps(state.to_dict()))
    assert data["format"] == "dsm-iterator-state/1"
    assert list(data) == [
        "format", "dataset", "order", "batch_size", "on_error", "ranges", "cursor", "position", "seeks",
        "skipped",
    ]  # fmt: skip
    assert IteratorState.from_dict(data) == state


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"world_size": 0}, "world_size must be a whole number of at least 1"),
        ({"seed": 1.5}, "seed must be a whole number"),
        ({"epoch": -1}, "epoch must be at least 0"),
        ({"rank": 2, "world_size": 2}, "rank must be in 0..1 for world_size 2"),
        ({"block_rows": True}, "block_rows must be a whole number of at least 1"),
    ],
)
def test_a_read_order_that_is_not_one_is_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        ReadOrder(**arguments)  # type: ignore[arg-type]
    with pytest.raises(StateError, match=f"iterator state order: {message}"):
        ReadOrder.from_dict({**ReadOrder().to_dict(), **arguments})


layouts = st.one_of(
    st.fixed_dictionaries({"num_shards": st.integers(1, 512)}),
    st.fixed_dictionaries({"rows_per_shard": st.integers(1, 10**7)}),
    st.fixed_dictionaries({"shard_size": st.sampled_from(["256MB", "1GiB", 4096])}),
)


@settings(max_examples=60, deadline=None)
@given(
    layouts,
    st.booleans(),
    st.none() | st.integers(0, 2**32),
    st.sampled_from([None, "parquet", "jsonl", "csv"]),
    st.none() | st.sampled_from(["zstd", "snappy", "gzip"]),
    st.none() | st.fixed_dictionaries({"use_dictionary": st.booleans()}),
)
def test_a_rewrite_spec_round_trips_through_a_cutover_journal(
    layout: dict[str, object],
    shuffle: bool,
    seed: int | None,
    fmt: str | None,
    codec: str | None,
    extra: object,
) -> None:
    if seed is not None and not shuffle:
        with pytest.raises(InputError, match="--seed only applies with --shuffle"):
            RewriteSpec.reshard(**layout, shuffle=shuffle, seed=seed)  # type: ignore[arg-type]
        return
    spec = RewriteSpec.reshard(
        **layout,
        shuffle=shuffle,
        seed=seed,
        format=fmt,
        compression=codec,
        format_options=extra,  # type: ignore[arg-type]
    )
    assert spec.seed == ((0 if seed is None else seed) if shuffle else None)
    recorded = json.loads(json.dumps(spec.to_dict()))
    assert RewriteSpec.from_dict(recorded, operation="reshard", format=fmt) == spec
    converted = RewriteSpec.convert(format=fmt, compression=codec, format_options=extra)  # type: ignore[arg-type]
    assert list(converted.to_dict()) == [
        "compression",
        "compression_level",
        "row_group_size",
        "format_options",
    ]
    assert RewriteSpec.from_dict(converted.to_dict(), operation="convert-format", format=fmt) == converted


def test_a_write_option_given_twice_is_refused_when_the_spec_is_made() -> None:
    with pytest.raises(InputError, match="compression is given twice"):
        RewriteSpec.convert(format="parquet", compression="zstd", format_options={"compression": "snappy"})


def test_the_cutover_spec_is_the_created_record_key_for_key(tmp_path: Path, sample_table: pa.Table) -> None:
    registry, _ = make_dataset(tmp_path, sample_table.slice(0, 300))
    report = start_cutover(
        "web@prod", to=str(tmp_path / "out"), num_shards=3, shuffle=True, max_regression=5, registry=registry,
        **FAST,
    )  # fmt: skip
    created = journal_records(registry, "web", report.id)[0]
    assert created["event"] == "created"
    spec = CutoverSpec.from_dict(created["spec"])
    assert spec.to_dict() == created["spec"]
    assert json.dumps(spec.to_dict()) == json.dumps(created["spec"])  # the same key order too
    assert spec.rewrite.seed == 0 and spec.gates.max_regression == 5.0 and spec.format == "parquet"
