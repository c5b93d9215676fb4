"""Slots a null struct hides are not data: their two shapes (a value, as pyarrow builds them; a null, as
dsm's JSONL reader does) are the same rows to the fingerprint and to the Parquet writer, and a null that
no parent hides in a field declared non-nullable is refused, never stored as a placeholder.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsm
from dsm.arrow_types import masked_nulls_filled, whole
from dsm.errors import SchemaError
from dsm.formats import get_format
from dsm.hashing import fingerprint_kernel
from dsm.hashing.fingerprint import digest_batch
from tests.arrow_strategies import any_types, arrays
from tests.independent import comparable
from tests.strategies import arrow_types, nulls_under_null_parents, schemas, tables
from tests.trust_support import check_published, register_table, write_shards

_REQUIRED = pa.field("a", pa.bool_(), nullable=False)
_STRUCT = pa.struct([_REQUIRED])


def _hidden_null_struct() -> pa.Table:
    """The first failure seen: ``{"a": null}`` read from JSONL as ``struct<a: bool not null>``."""
    column = pa.StructArray.from_arrays(
        [pa.array([None], pa.bool_())], fields=[_REQUIRED], mask=pa.array([True])
    )
    return pa.Table.from_arrays([column], schema=pa.schema([pa.field("a", _STRUCT)]))


def _holds_nan(array: pa.Array) -> bool:
    """Whether a float anywhere in ``array`` (hidden slots too) is NaN."""
    kind = array.type
    if pa.types.is_floating(kind):
        return bool(pc.any(pc.is_nan(array)).as_py())
    if pa.types.is_dictionary(kind):
        return _holds_nan(array.dictionary)
    if pa.types.is_struct(kind):
        return any(_holds_nan(array.field(i)) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _holds_nan(array.keys) or _holds_nan(array.items)
    if kind.num_fields:  # the list types
        return _holds_nan(array.values)
    return False


def _parquet_rows(table: pa.Table, **options: object) -> list[dict[str, object]]:
    return _parquet_table(table, **options).to_pylist()


def _parquet_table(table: pa.Table, **options: object) -> pa.Table:
    fmt = get_format("parquet", **options)
    sink = io.BytesIO()
    with fmt.open_writer(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=2):
            writer.write_batch(batch)
    read = pq.read_table(io.BytesIO(sink.getvalue()))
    assert read.schema.equals(fmt.storage(table.schema).schema, check_metadata=False)
    return read


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_both_shapes_of_a_hidden_slot_are_the_same_rows(data: st.DataObject) -> None:
    schema = data.draw(schemas(arrow_types(max_leaves=4), max_fields=3))
    table = data.draw(tables(schema, max_rows=8))
    other = pa.Table.from_arrays(
        [nulls_under_null_parents(c.combine_chunks()) for c in table.columns], schema=schema
    )
    # Arrow compares a struct's children only where the struct is valid; it holds NaN unequal to itself
    assert other.equals(table) or any(_holds_nan(c.combine_chunks()) for c in table.columns)
    for mode in ("python", "compiled") if fingerprint_kernel.enabled() else ("python",):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(fingerprint_kernel.ENV_VAR, mode)
            assert digest_batch(other) == digest_batch(table), mode
    storage = get_format("parquet").storage(schema)
    if not storage.problems:
        written, other_written = (
            _parquet_table(table, row_group_size=3),
            _parquet_table(other, row_group_size=3),
        )
        assert comparable(other_written) == comparable(written)
        assert digest_batch(other_written) == digest_batch(table)  # stored types keep every value


def test_a_hidden_null_in_a_required_field_is_written_to_parquet() -> None:
    assert _parquet_rows(_hidden_null_struct(), row_group_size=1, compression="zstd") == [{"a": None}]


def test_jsonl_with_a_null_struct_converts_to_parquet_and_verifies(tmp_path: Path) -> None:
    """The generated case that found the class: ``{"a": null}`` as ``struct<a: bool not null>``."""
    table = _hidden_null_struct()
    registry = str(tmp_path / "registry")
    write_shards(tmp_path / "source", table, "jsonl", 1)
    contract = register_table(tmp_path / "source", "jsonl", table.schema, registry, "src")
    options = {"row_group_size": 1, "compression": "zstd"}
    result = dsm.convert_format(
        contract.ref, str(tmp_path / "out"), format="parquet", registry=registry, format_options=options
    )
    check_published(result.contract, table, registry, ordered=True)


@pytest.mark.parametrize(
    ("column", "path"),
    [
        (pa.StructArray.from_arrays([pa.array([True, None])], fields=[_REQUIRED]), "c.a"),
        (
            pa.StructArray.from_arrays(
                [pa.array([{"a": True}, None], _STRUCT)],
                fields=[pa.field("in", _STRUCT, nullable=False)],
            ),
            "c.in",
        ),
        (pa.array([[True, None]], pa.list_(pa.field("item", pa.bool_(), nullable=False))), "c[]"),
    ],
)
def test_a_null_no_parent_hides_in_a_required_field_is_refused(column: pa.Array, path: str) -> None:
    """By every writer that holds the type (pyarrow's Parquet writer would store the second case, a null
    struct of filled leaves, as ``{"a": false}``; its Arrow IPC writer stores every case as it is), and
    by the Arrow IPC reader, in a file pyarrow wrote."""
    batch = pa.record_batch([column], names=["c"])
    message = re.escape(f'field "{path}" is declared non-nullable but holds a null')
    with pytest.raises(SchemaError, match=message):
        masked_nulls_filled(batch)
    for name in ("parquet", "arrow", "jsonl"):
        with (
            pytest.raises(SchemaError, match=message),
            get_format(name).open_writer(io.BytesIO(), batch.schema) as w,
        ):
            w.write_batch(batch)
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, batch.schema) as ipc_writer:
        ipc_writer.write_batch(batch)
    with pytest.raises(SchemaError, match=f"shard s.arrow {message}"):
        list(get_format("arrow").iter_batches(io.BytesIO(sink.getvalue()), shard="s.arrow"))


def test_an_arrow_file_whose_required_field_holds_a_null_is_refused_at_register(tmp_path: Path) -> None:
    """The file contradicts its own schema: no fingerprint is taken of it, and nothing is published."""
    column = pa.array([[True, None]], pa.list_(pa.field("item", pa.bool_(), nullable=False)))
    batch = pa.record_batch([column], names=["c"])
    (tmp_path / "data").mkdir()
    with pa.ipc.new_file(tmp_path / "data" / "part-0.arrow", batch.schema) as writer:
        writer.write_batch(batch)
    from typer.testing import CliRunner

    from dsm.cli.app import app

    registry = str(tmp_path / "registry")
    result = CliRunner().invoke(
        app, ["register", str(tmp_path / "data"), "--name", "n", "--registry", registry]
    )
    assert result.exit_code == 2, result.output
    assert 'part-0.arrow field "c[]" is declared non-nullable but holds a null' in result.output, (
        result.output
    )
    assert not [p for p in (tmp_path / "registry").rglob("*") if p.is_file()]  # no contract was written


@settings(max_examples=300, deadline=None)
@given(kind=arrow_types(max_leaves=4))
def test_a_placeholder_is_of_the_type_it_stands_in(kind: pa.DataType) -> None:
    """What fills a hidden slot is one value of exactly the declared type: an ordered dictionary's
    placeholder was unordered, and the struct holding it refused it (found by the test above)."""
    from dsm.arrow_types import _placeholder

    value = _placeholder(kind)
    assert len(value) == 1 and value.type.equals(kind), (value.type, kind)
    value.validate(full=True)


def _same_values(a: pa.Array, b: pa.Array) -> bool:
    """Whether ``a`` and ``b`` hold the same values: Arrow's equality, or where it says no (it calls NaN
    unequal to itself), the same values printed in full (NaN as nan; dates out of Python's range too)."""
    every = {"window": 1 << 30, "container_window": 1 << 30}
    return a.equals(b) or a.to_string(**every) == b.to_string(**every)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), type_=any_types(), chunks=st.integers(0, 3))
def test_a_chunked_column_is_one_array_of_its_values_and_a_single_chunk_is_not_copied(
    data: st.DataObject, type_: pa.DataType, chunks: int
) -> None:
    column = pa.chunked_array([data.draw(arrays(type_)) for _ in range(chunks)], type=type_)
    one = whole(column)
    assert isinstance(one, pa.Array) and one.type == type_
    assert _same_values(one, column.combine_chunks())
    if chunks == 1:
        addresses = [[b and b.address for b in a.buffers()] for a in (one, column.chunk(0))]
        assert addresses[0] == addresses[1]
    assert whole(one) is one
