"""Differences between the schema a contract names and the schema found in data."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["schema_differences"]


def schema_differences(expected: pa.Schema, actual: pa.Schema) -> list[str]:
    """One message per field that is missing, extra, or of another type; ``[]`` when they agree.

    Field order and nullability annotations are not compared: readers select fields by name, and a
    non-nullable field's data is checked by value when rows are read.
    """
    problems = []
    actual_fields = {f.name: f for f in actual}
    for field in expected:
        found = actual_fields.get(field.name)
        if found is None:
            problems.append(f"field {field.name!r} is missing")
        elif not found.type.equals(field.type):
            problems.append(f"field {field.name!r} is {found.type}, the contract says {field.type}")
    expected_names = set(expected.names)
    for name in actual.names:
        if name not in expected_names:
            problems.append(f"field {name!r} is not in the contract")
    return problems
