"""dsm-rows-v1 pinned for the values dsm 0.1.0 hashed against the spec (docs/fingerprint.md, section 8):
decimals of more than 28 digits, maps whose fields are not named key and value; and list views."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from dsm.hashing.fingerprint import digest_batch, hash_values
from tests.test_fingerprint_vectors import VALUE_VECTORS


def errata_table() -> pa.Table:
    """Values dsm 0.1.0 hashed against the spec (docs/fingerprint.md, section 8), and list views."""
    d = decimal.Decimal
    return pa.table(
        {
            "dec38": pa.array(
                [
                    d("1234567890123456789012345678.0123456789"),
                    d("1234567890123456789012345678.0123456788"),
                    d("-9999999999999999999999999999.9999999999"),
                    None,
                ],
                pa.decimal128(38, 10),
            ),
            "dec76": pa.array(
                [d("9" * 76), d("9" * 75 + "8"), d("-1" + "0" * 75), d("0")], pa.decimal256(76, 0)
            ),
            "named_map": pa.array(
                [[("a", 1)], [], None, [("b", None), ("a", 2)]],
                pa.map_(pa.field("k", pa.string(), nullable=False), pa.field("v", pa.int64())),
            ),
            "lv": pa.array([[1, 2], [], None, [None]], pa.list_view(pa.int64())),
        }
    )


ERRATA_VECTORS = {
    "dec38": ["9a0da3f1665f01c7", "6b36e81ffd4670a2", "a32e00442d005c80", "9e3779b97f4a7c15"],
    "dec76": ["e66f4d1cec227b6d", "183956d43dbae2dd", "e0c1f0a7f643d4d5", "17df76ae8c01be88"],
    # The same values as the default-named map of VALUE_VECTORS' kind: names do not change a map.
    "named_map": ["062059cd405ad690", "b4cd29cdd5cb90a6", "9e3779b97f4a7c15", "a00f9d0b27e3209b"],
    # A list view hashes as the list of the same values ("l" of vector_table).
    "lv": ["196708be5c7d627d", "db310e8131216051", "9e3779b97f4a7c15", "a7bddde2f0772f5e"],
}
ERRATA_UNORDERED = "86341e4f8d114c843bfc053f9bd9d07f"
ERRATA_ORDERED = "0440a49e7215fe21104da3f3c7af0e23"


@pytest.mark.parametrize("column", sorted(ERRATA_VECTORS))
def test_errata_value_hashes_are_pinned(column: str) -> None:
    hashes = [f"{int(h):016x}" for h in hash_values(errata_table().column(column))]
    assert hashes == ERRATA_VECTORS[column]


def test_errata_table_digest_is_pinned() -> None:
    digest = digest_batch(errata_table())
    assert (digest.rows, digest.unordered, digest.ordered) == (4, ERRATA_UNORDERED, ERRATA_ORDERED)


def test_decimals_differing_beyond_28_digits_hash_differently() -> None:
    hashes = hash_values(errata_table().column("dec38"))
    assert hashes[0] != hashes[1]
    assert VALUE_VECTORS["l"] == ERRATA_VECTORS["lv"]
