"""Generated datasets through every pair of formats and layouts (issue 10, "Must show").

Hypothesis draws a schema, rows, a source format with its options and shard count, a target format and a
rewrite (convert-format, or reshard by shard count or rows per shard, shuffled or not). Every run either
publishes a version that ``verify --deep`` passes, that re-registers to the same fingerprint and whose
files, read without dsm, hold the source's rows; or it is refused with an input error (exit 2) and no data
file at the destination.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, assume, event, given, reject, settings
from hypothesis import strategies as st

import dsm
from dsm.errors import InputError, SchemaError
from dsm.formats import get_format
from tests.strategies import arrow_types, leaf_types, schemas, tables
from tests.trust_support import FORMATS, check_published, check_refused, register_table, write_shards

_OPTIONS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "parquet": st.fixed_dictionaries(
        {
            "row_group_size": st.sampled_from([1, 3, 1000]),
            "compression": st.sampled_from(["zstd", "snappy", None]),
        }
    ),
    "arrow": st.fixed_dictionaries({"compression": st.sampled_from([None, "lz4", "zstd"])}),
    "jsonl": st.fixed_dictionaries({"compression": st.sampled_from([None, "gzip", "zstd"])}),
    "csv": st.fixed_dictionaries({"compression": st.sampled_from([None, "gzip", "bz2"])}),
    "webdataset": st.fixed_dictionaries({"compression": st.sampled_from([None, "gzip"])}),
}

_TAR_SCHEMA = st.lists(
    st.sampled_from(["txt", "json", "jpg", "cls"]), min_size=1, max_size=3, unique=True
).map(
    lambda names: pa.schema(
        [pa.field("__key__", pa.string(), nullable=False)]
        + [pa.field(n, pa.string() if n in ("txt", "json", "cls") else pa.binary()) for n in names]
    )
)


@st.composite
def _source(draw: st.DrawFn) -> tuple[str, dict[str, Any], pa.Table]:
    fmt = draw(st.sampled_from(FORMATS))
    if fmt == "webdataset":
        schema = draw(_TAR_SCHEMA)
        table = draw(tables(schema, max_rows=10))
        keys = pa.array([f"s{i:04d}" for i in range(table.num_rows)], pa.string())
        first = table.schema.names[1]  # a sample needs a member: the first one is never null
        filled = pa.array(
            [
                v if v is not None else ("x" if pa.types.is_string(table.schema.field(first).type) else b"x")
                for v in table.column(first).to_pylist()
            ],
            table.schema.field(first).type,
        )
        table = table.set_column(0, table.schema.field(0), keys).set_column(1, table.schema.field(1), filled)
    else:
        types = arrow_types(max_leaves=3) if fmt != "csv" else leaf_types()
        schema = draw(schemas(types, max_fields=3))
        schema = (
            get_format(fmt).storage(schema).schema if not get_format(fmt).storage(schema).problems else None
        )
        assume(schema is not None)
        table = draw(tables(schema, max_rows=10))
    return fmt, draw(_OPTIONS[fmt]), table


@st.composite
def _rewrite(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["convert", "num_shards", "rows_per_shard"]))
    if kind == "convert":
        return {"operation": "convert"}
    shuffle = draw(st.booleans())
    out: dict[str, Any] = {"operation": "reshard", "shuffle": shuffle}
    if shuffle:
        out["seed"] = draw(st.integers(0, 3))
    if kind == "num_shards":
        out["num_shards"] = draw(st.integers(1, 4))
    else:
        out["rows_per_shard"] = draw(st.integers(1, 7))
    return out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
@given(
    source=_source(),
    shards=st.integers(1, 3),
    target=st.sampled_from(FORMATS),
    target_options=st.data(),
    rewrite=_rewrite(),
)
def test_generated_datasets_through_every_pair(
    source: tuple[str, dict[str, Any], pa.Table],
    shards: int,
    target: str,
    target_options: st.DataObject,
    rewrite: dict[str, Any],
) -> None:
    fmt, options, table = source
    write_options = target_options.draw(_OPTIONS[target])
    assume(rewrite.get("num_shards", 1) <= max(1, table.num_rows))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        registry = str(root / "registry")
        try:
            write_shards(root / "source", table, fmt, shards, **options)
        except SchemaError:  # values the source format cannot write (the case of the target, below)
            reject()
        contract = register_table(root / "source", fmt, table.schema, registry, "src")
        dest = root / "out"
        parameters = {k: v for k, v in rewrite.items() if k != "operation"}
        try:
            if rewrite["operation"] == "convert":
                result = dsm.convert_format(
                    contract.ref, str(dest), format=target, registry=registry, format_options=write_options
                )
            else:
                result = dsm.reshard(
                    contract.ref,
                    str(dest),
                    format=target,
                    registry=registry,
                    format_options=write_options,
                    **parameters,
                )
        except InputError as exc:
            event(f"refused: {type(exc).__name__}")
            check_refused(exc, dest)
            return
        event(f"published {fmt} -> {target}")
        expected = get_format(target).storage(contract.schema.to_arrow())
        rows = (
            pa.Table.from_batches(
                [expected.convert(b) for b in table.combine_chunks().to_batches()], schema=expected.schema
            )
            if table.num_rows
            else expected.schema.empty_table()
        )
        check_published(result.contract, rows, registry, ordered=not rewrite.get("shuffle"))
