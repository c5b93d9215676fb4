"""dsm: register, verify, rewrite, benchmark and move ML datasets under YAML contracts.

The public API is the commands layer: ``dsm.verify(...)`` is ``dsm verify``. Names load on first use.

>>> import dsm
>>> report = dsm.verify("web-text@prod")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dsm import _moved
from dsm._version import __version__
from dsm.errors import (
    CheckFailed,
    ConflictError,
    ContractError,
    DatasetNotFound,
    DsmError,
    FormatError,
    InputError,
    SchemaError,
    StateError,
    StorageError,
)

if TYPE_CHECKING:
    from dsm.commands.bench import BenchReport, bench
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
    from dsm.commands.diff import ContractDiff, diff, diff_rows
    from dsm.commands.footprint import FootprintReport, footprint
    from dsm.commands.inspect import (
        AuditLog,
        EpisodeReport,
        FindResult,
        LineageLog,
        audit,
        episodes,
        find,
        head,
        log,
        sample,
    )
    from dsm.commands.lifecycle import GcReport, StatusChange, deprecate, gc, retire
    from dsm.commands.policy import PolicyAudit, PolicyCheck, check_policy, set_policy, show_policy
    from dsm.commands.register import register
    from dsm.commands.rewrite import RewriteResult, convert_format, reshard
    from dsm.commands.storage_check import ReadinessReport, storage_check
    from dsm.commands.verify import ShardReport, VerifyReport, verify
    from dsm.contract import Contract, DatasetFingerprint, Field, Lineage, Schema, Shard
    from dsm.inspect.rowdiff import RowDiff
    from dsm.inspect.source import RowSource, open_rows
    from dsm.inspect.view import RowPage
    from dsm.read.dataset import Dataset, DatasetIterator, ReadReport, merge_states, open
    from dsm.registry import AliasMove, Registry

_moved.install()  # old module paths (dsm.dataset, dsm.fingerprint, ...) keep working for one release

_EXPORTS = {
    "DatasetEntry": "dsm.commands.catalog",
    "ShardReport": "dsm.commands.verify",
    "VerifyReport": "dsm.commands.verify",
    "alias": "dsm.commands.catalog",
    "contract_schema": "dsm.commands.catalog",
    "ls": "dsm.commands.catalog",
    "register": "dsm.commands.register",
    "show": "dsm.commands.catalog",
    "verify": "dsm.commands.verify",
    "RewriteResult": "dsm.commands.rewrite",
    "convert_format": "dsm.commands.rewrite",
    "reshard": "dsm.commands.rewrite",
    "BenchReport": "dsm.commands.bench",
    "bench": "dsm.commands.bench",
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
    "diff_rows": "dsm.commands.diff",
    "AuditLog": "dsm.commands.inspect",
    "EpisodeReport": "dsm.commands.inspect",
    "FindResult": "dsm.commands.inspect",
    "LineageLog": "dsm.commands.inspect",
    "audit": "dsm.commands.inspect",
    "episodes": "dsm.commands.inspect",
    "find": "dsm.commands.inspect",
    "head": "dsm.commands.inspect",
    "log": "dsm.commands.inspect",
    "sample": "dsm.commands.inspect",
    "RowDiff": "dsm.inspect.rowdiff",
    "RowPage": "dsm.inspect.view",
    "RowSource": "dsm.inspect.source",
    "open_rows": "dsm.inspect.source",
    "ReadinessReport": "dsm.commands.storage_check",
    "storage_check": "dsm.commands.storage_check",
    "FootprintReport": "dsm.commands.footprint",
    "footprint": "dsm.commands.footprint",
    "GcReport": "dsm.commands.lifecycle",
    "StatusChange": "dsm.commands.lifecycle",
    "deprecate": "dsm.commands.lifecycle",
    "gc": "dsm.commands.lifecycle",
    "retire": "dsm.commands.lifecycle",
    "PolicyAudit": "dsm.commands.policy",
    "PolicyCheck": "dsm.commands.policy",
    "check_policy": "dsm.commands.policy",
    "set_policy": "dsm.commands.policy",
    "show_policy": "dsm.commands.policy",
    "Contract": "dsm.contract",
    "DatasetFingerprint": "dsm.contract",
    "Field": "dsm.contract",
    "Lineage": "dsm.contract",
    "Schema": "dsm.contract",
    "Shard": "dsm.contract",
    "AliasMove": "dsm.registry",
    "Dataset": "dsm.read.dataset",
    "DatasetIterator": "dsm.read.dataset",
    "ReadReport": "dsm.read.dataset",
    "merge_states": "dsm.read.dataset",
    "open": "dsm.read.dataset",
    "Registry": "dsm.registry",
}

__all__ = [
    "CheckFailed",
    "ConflictError",
    "ContractError",
    "DatasetNotFound",
    "DsmError",
    "FormatError",
    "InputError",
    "SchemaError",
    "StateError",
    "StorageError",
    "__version__",
    *sorted(_EXPORTS),
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
