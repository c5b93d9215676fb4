"""The library: one module per command; each function returns a result object and never prints."""

from dsm.commands.catalog import DatasetEntry, alias, contract_schema, ls, show
from dsm.commands.register import register, scan_source
from dsm.commands.verify import ShardReport, VerifyReport, verify

__all__ = [
    "DatasetEntry",
    "ShardReport",
    "VerifyReport",
    "alias",
    "contract_schema",
    "ls",
    "register",
    "scan_source",
    "show",
    "verify",
]
