"""The per-schema answers that writers and converters keep (``SchemaMemo``) are always the answer for the
schema asked about, never one kept for a look-alike: schemas that differ only in one field's nullability,
one field's type (nested or flat, a dictionary, the null type) or the schema's metadata are asked about in
random order, and every answer is compared with the one computed afresh."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.arrow_types import _columns_to_fill, _fill_plan
from dsm.formats._storage import _columns_to_convert, _convert_plan
from dsm.schema_memo import SchemaMemo

from .arrow_strategies import arrow_types

_NAMES = st.text("abcxyz", min_size=1, max_size=3)


@st.composite
def _fields(draw: st.DrawFn) -> pa.Field:
    kind = draw(arrow_types() | st.sampled_from([pa.dictionary(pa.int32(), pa.string()), pa.null()]))
    if pa.types.is_struct(kind) and draw(st.booleans()):  # a non-nullable field below a nullable parent
        kind = pa.struct([f.with_nullable(False) for f in kind])
    return pa.field(draw(_NAMES), kind, nullable=pa.types.is_null(kind) or draw(st.booleans()))


@st.composite
def _look_alikes(draw: st.DrawFn) -> list[pa.Schema]:
    """A schema and variants of it that differ in one detail each."""
    fields = draw(st.lists(_fields(), min_size=1, max_size=5, unique_by=lambda f: f.name))
    schemas = [pa.schema(fields)]
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(fields) - 1))
        changed = list(fields)
        how = draw(st.sampled_from(["nullable", "type", "metadata"]))
        if how == "nullable" and not pa.types.is_null(changed[i].type):
            changed[i] = changed[i].with_nullable(not changed[i].nullable)
        elif how == "type":
            kind = draw(_fields()).type
            changed[i] = (
                changed[i].with_type(kind).with_nullable(changed[i].nullable or pa.types.is_null(kind))
            )
        schema = pa.schema(changed)
        schemas.append(schema.with_metadata({"k": "v"}) if how == "metadata" else schema)
    return schemas


@settings(max_examples=300, deadline=None)
@given(schemas=_look_alikes(), picks=st.lists(st.integers(0, 20), min_size=1, max_size=30))
def test_every_answer_is_the_one_for_the_schema_asked_about(
    schemas: list[pa.Schema], picks: list[int]
) -> None:
    for pick in picks:
        schema = schemas[pick % len(schemas)]
        other = schemas[(pick // 2) % len(schemas)]
        assert _columns_to_fill(schema) == _fill_plan(schema)
        if len(other) == len(schema):
            assert _columns_to_convert(schema, other) == _convert_plan(schema, other)


def test_a_memo_keeps_only_the_last_few_schemas() -> None:
    calls: list[pa.Schema] = []
    memo = SchemaMemo(lambda s: calls.append(s) or len(calls), kept=2)
    a, b, c = (pa.schema([(name, pa.int64())]) for name in "abc")
    # kept in the order first asked: c pushes out a, the older of the two, though a was asked for last
    assert [memo(a), memo(b), memo(a), memo(c), memo(b), memo(a)] == [1, 2, 1, 3, 2, 4]
    assert len(calls) == 4
