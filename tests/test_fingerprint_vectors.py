"""dsm-rows-v1 pinned: fixed tables give fixed digests forever. A failure here means the algorithm changed,
which requires a new algorithm name, never an edit of these values."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest

from dsm.fingerprint import ALGORITHM, RowDigest, digest_batch, hash_values


def vector_table() -> pa.Table:
    return pa.table(
        {
            "i64": pa.array([0, -1, 2**63 - 1, None], pa.int64()),
            "u8": pa.array([0, 255, None, 7], pa.uint8()),
            "f64": pa.array([0.0, -0.0, float("nan"), float("inf")], pa.float64()),
            "b": pa.array([True, False, None, True]),
            "s": pa.array(["", "héllo", "日本語🙂", None]),
            "bin": pa.array([b"", b"\x00\xff", None, b"abc"], pa.binary()),
            "d": pa.array([0, 19000, None, -1], pa.date32()),
            "ts": pa.array([0, 1_700_000_000_123_456_789, None, -1], pa.timestamp("ns", "UTC")),
            "dec": pa.array(
                [decimal.Decimal("1.50"), decimal.Decimal("-0.01"), None, decimal.Decimal("0")],
                pa.decimal128(10, 2),
            ),
            "l": pa.array([[1, 2], [], None, [None]], pa.list_(pa.int64())),
            "st": pa.array(
                [{"x": 1, "y": "a"}, None, {"x": None, "y": None}, {"x": 2, "y": "b"}],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
            "m": pa.array([[("a", 1), ("b", 2)], [], None, [("z", None)]], pa.map_(pa.string(), pa.int64())),
        }
    )


VALUE_VECTORS = {
    "i64": ["201a3d99548b4ff1", "e80bfb7077080f7e", "d9d99756cecae067", "9e3779b97f4a7c15"],
    "u8": ["201a3d99548b4ff1", "e8cfff4a36a85eec", "9e3779b97f4a7c15", "51906f5ab5d188bd"],
    "f64": ["7764a6895dd850e3", "00f1a83ffb992296", "196deb2f4314505d", "d5e43c190beb23e2"],
    "b": ["d6bd531e0cc5b426", "425bd8b665c8f40d", "9e3779b97f4a7c15", "d6bd531e0cc5b426"],
    "s": ["1c26b4e34cebfd95", "efa00ee86a220064", "1f4622322dcc67c0", "9e3779b97f4a7c15"],
    "bin": ["807988ca94409b66", "d3c96a158c5315b3", "9e3779b97f4a7c15", "1ab694e69d31f81b"],
    "d": ["501ff0c9e9b89147", "08a3523724d09e49", "9e3779b97f4a7c15", "5c8b0d462d84af67"],
    "ts": ["ff7979a49dbf3443", "0d9c48200c928910", "9e3779b97f4a7c15", "f76694fd70c1b6f4"],
    "dec": ["4653aab926e8073d", "140741d78d813a13", "9e3779b97f4a7c15", "17df76ae8c01be88"],
    "l": ["196708be5c7d627d", "db310e8131216051", "9e3779b97f4a7c15", "a7bddde2f0772f5e"],
    "st": ["f4a295207bd7e1bd", "9e3779b97f4a7c15", "005bb04c64864830", "2b0921bf5fdb2a50"],
    "m": ["1473a24c79df0ba3", "b4cd29cdd5cb90a6", "9e3779b97f4a7c15", "15f36c084468c8c3"],
}
TABLE_UNORDERED = "720261ba1505d49e3ba6e08fa114f920"
TABLE_ORDERED = "0c7727b7900161171afc8cd63b1deeda"


def test_algorithm_name_is_pinned() -> None:
    assert ALGORITHM == "dsm-rows-v1"


@pytest.mark.parametrize("column", sorted(VALUE_VECTORS))
def test_value_hashes_are_pinned(column: str) -> None:
    hashes = [f"{int(h):016x}" for h in hash_values(vector_table().column(column))]
    assert hashes == VALUE_VECTORS[column]


def test_table_digest_is_pinned() -> None:
    digest = digest_batch(vector_table())
    assert (digest.rows, digest.unordered, digest.ordered) == (4, TABLE_UNORDERED, TABLE_ORDERED)


def test_empty_digest_is_zero() -> None:
    empty = digest_batch(vector_table().slice(0, 0))
    assert empty.unordered == "0" * 32 and empty.ordered == "0" * 32


def test_unordered_ignores_order_and_ordered_does_not() -> None:
    table = vector_table()
    reversed_ = table.take([3, 2, 1, 0])
    a, b = digest_batch(table), digest_batch(reversed_)
    assert a.unordered == b.unordered
    assert a.ordered != b.ordered


@pytest.mark.parametrize("split", [0, 1, 2, 3, 4])
def test_shards_combine_to_the_whole(split: int) -> None:
    table = vector_table()
    whole = digest_batch(table)
    parts = digest_batch(table.slice(0, split)) + digest_batch(table.slice(split))
    assert parts == whole
    back = RowDigest.from_hex(rows=whole.rows, unordered=whole.unordered, ordered=whole.ordered)
    assert back == whole


def test_column_order_does_not_matter_but_names_do() -> None:
    table = vector_table()
    shuffled = table.select(list(reversed(table.column_names)))
    assert digest_batch(shuffled) == digest_batch(table)
    renamed = table.rename_columns([f"x_{n}" for n in table.column_names])
    assert digest_batch(renamed).unordered != digest_batch(table).unordered


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (pa.array([5], pa.int32()), pa.array([5], pa.int64())),
        (pa.array([1.5], pa.float32()), pa.array([1.5], pa.float64())),
        (pa.array(["a", None]).dictionary_encode(), pa.array(["a", None])),
        (pa.array(["a"], pa.large_string()), pa.array(["a"], pa.string())),
        (pa.array([1], pa.timestamp("s", "UTC")), pa.array([10**9], pa.timestamp("ns", "Asia/Tokyo"))),
        (pa.array([86_400_000], pa.date64()), pa.array([1], pa.date32())),
        (pa.array([1000], pa.time32("ms")), pa.array([10**6], pa.time64("us"))),
        (
            pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2)),
            pa.array([decimal.Decimal("1.5000")], pa.decimal256(40, 4)),
        ),
        (
            pa.array([[("b", 2), ("a", 1)]], pa.map_(pa.string(), pa.int64())),
            pa.array([[("a", 1), ("b", 2)]], pa.map_(pa.string(), pa.int64())),
        ),
        (pa.array([float("nan")]), pa.array([np.float64(np.nan) * -1])),
    ],
)
def test_representation_does_not_change_a_value(left: pa.Array, right: pa.Array) -> None:
    assert np.array_equal(hash_values(left), hash_values(right))


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (pa.array([0.0]), pa.array([-0.0])),
        (pa.array([1], pa.int64()), pa.array([1.0])),
        (pa.array(["a"]), pa.array([b"a"])),
        (pa.array([None], pa.string()), pa.array([""])),
        (pa.array([[1, 2]]), pa.array([[2, 1]])),
        (pa.array([[]], pa.list_(pa.int64())), pa.array([None], pa.list_(pa.int64()))),
        (pa.array([1], pa.timestamp("s")), pa.array([1], pa.timestamp("s", "UTC"))),
        (pa.array([2**64 - 1], pa.uint64()), pa.array([-1], pa.int64())),
    ],
)
def test_different_values_hash_differently(left: pa.Array, right: pa.Array) -> None:
    assert not np.array_equal(hash_values(left), hash_values(right))


def test_sliced_arrays_hash_like_fresh_ones() -> None:
    table = vector_table()
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        assert np.array_equal(hash_values(column.slice(1, 2)), hash_values(column)[1:3]), name


def test_large_batch_matches_sum_of_small_batches() -> None:
    rng = np.random.default_rng(1)
    n = 50_000
    table = pa.table({"x": rng.integers(0, 1 << 40, n), "s": [f"row {i}" for i in range(n)]})
    whole = digest_batch(table)
    pieces = RowDigest.combine(digest_batch(b) for b in table.to_batches(max_chunksize=777))
    assert whole == pieces
