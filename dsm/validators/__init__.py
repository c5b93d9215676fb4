"""Checks of data against a contract: physical identity (size, checksum), schema, rows (fingerprint), and
the compatibility of one contract's schema for readers of another.

Names load on first use: the byte checks run without Arrow, the row checks need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsm.validators.compatibility import FieldChange, compare_schemas
    from dsm.validators.physical import PhysicalCheck, check_physical
    from dsm.validators.rows import RowCheck, check_rows
    from dsm.validators.schema import schema_differences

_EXPORTS = {
    "PhysicalCheck": "dsm.validators.physical",
    "check_physical": "dsm.validators.physical",
    "RowCheck": "dsm.validators.rows",
    "check_rows": "dsm.validators.rows",
    "schema_differences": "dsm.validators.schema",
    "FieldChange": "dsm.validators.compatibility",
    "compare_schemas": "dsm.validators.compatibility",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsm.validators' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
