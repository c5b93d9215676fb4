"""Checks of data against a contract: physical identity (size, checksum), schema, rows (fingerprint)."""

from dsm.validators.physical import PhysicalCheck, check_physical
from dsm.validators.rows import RowCheck, check_rows
from dsm.validators.schema import schema_differences

__all__ = ["PhysicalCheck", "RowCheck", "check_physical", "check_rows", "schema_differences"]
