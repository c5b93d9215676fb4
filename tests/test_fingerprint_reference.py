"""The library's ``dsm-rows-v1`` agrees with a second implementation written from the spec alone
(``tests/fingerprint_reference.py``) on generated tables of every type the spec covers."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.hashing.fingerprint import digest_batch, hash_values
from tests.fingerprint_reference import reference_digest, reference_value_hashes
from tests.strategies import arrow_types, schemas, tables
from tests.test_fingerprint_vectors import VALUE_VECTORS, vector_table


def test_the_reference_reproduces_the_pinned_vectors() -> None:
    table = vector_table()
    for name, expected in VALUE_VECTORS.items():
        assert [f"{h:016x}" for h in reference_value_hashes(table.column(name))] == expected, name


@settings(max_examples=150, deadline=None)
@given(schemas(arrow_types(max_leaves=5)).flatmap(tables))
def test_library_and_reference_agree_on_generated_tables(table: pa.Table) -> None:
    for name in table.column_names:
        column = table.column(name)
        assert [int(h) for h in hash_values(column)] == reference_value_hashes(column), name
    digest = digest_batch(table)
    assert (digest.rows, digest.unordered, digest.ordered) == reference_digest(table)


@settings(max_examples=40, deadline=None)
@given(schemas(arrow_types(max_leaves=4)).flatmap(tables), st.data())
def test_agreement_holds_for_slices(table: pa.Table, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, table.num_rows))
    part = table.slice(start, data.draw(st.integers(0, table.num_rows - start)))
    combined = part.combine_chunks()
    for name in combined.column_names:
        column = combined.column(name).chunk(0) if combined.column(name).num_chunks else combined.column(name)
        assert [int(h) for h in hash_values(column)] == reference_value_hashes(column), name
