"""The library: one module per command; each function returns a result object and never prints.

Names load on first use, so a command imports only what it needs (``dsm verify`` starts without Arrow).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsm.commands.catalog import DatasetEntry, alias, contract_schema, ls, show
    from dsm.commands.cutover import (
        CutoverPlan,
        CutoverReport,
        cutover_status,
        list_cutovers,
        plan_cutover,
        resume_cutover,
        rollback_cutover,
        run_cutover,
        start_cutover,
    )
    from dsm.commands.diff import ContractDiff, diff
    from dsm.commands.register import register, scan_source
    from dsm.commands.rewrite import RewriteResult, convert_format, reshard
    from dsm.commands.verify import ShardReport, VerifyReport, verify

_EXPORTS = {
    "DatasetEntry": "dsm.commands.catalog",
    "alias": "dsm.commands.catalog",
    "contract_schema": "dsm.commands.catalog",
    "ls": "dsm.commands.catalog",
    "show": "dsm.commands.catalog",
    "CutoverPlan": "dsm.commands.cutover",
    "CutoverReport": "dsm.commands.cutover",
    "cutover_status": "dsm.commands.cutover",
    "list_cutovers": "dsm.commands.cutover",
    "plan_cutover": "dsm.commands.cutover",
    "resume_cutover": "dsm.commands.cutover",
    "rollback_cutover": "dsm.commands.cutover",
    "run_cutover": "dsm.commands.cutover",
    "start_cutover": "dsm.commands.cutover",
    "ContractDiff": "dsm.commands.diff",
    "diff": "dsm.commands.diff",
    "register": "dsm.commands.register",
    "scan_source": "dsm.commands.register",
    "RewriteResult": "dsm.commands.rewrite",
    "convert_format": "dsm.commands.rewrite",
    "reshard": "dsm.commands.rewrite",
    "ShardReport": "dsm.commands.verify",
    "VerifyReport": "dsm.commands.verify",
    "verify": "dsm.commands.verify",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsm.commands' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
