"""dsm: register, verify, rewrite, benchmark and move ML datasets under YAML contracts.

The public API is the commands layer: ``dsm.verify(...)`` is ``dsm verify``.

>>> import dsm
>>> report = dsm.verify("web-text@prod")  # doctest: +SKIP
"""

from dsm.commands import (
    DatasetEntry,
    ShardReport,
    VerifyReport,
    alias,
    contract_schema,
    ls,
    register,
    show,
    verify,
)
from dsm.contract import Contract, DatasetFingerprint, Field, Lineage, Schema, Shard
from dsm.errors import (
    CheckFailed,
    ConflictError,
    ContractError,
    DatasetNotFound,
    DsmError,
    FormatError,
    InputError,
    SchemaError,
    StorageError,
)
from dsm.registry import AliasMove, Registry

__version__ = "0.1.0"

__all__ = [
    "AliasMove",
    "CheckFailed",
    "ConflictError",
    "Contract",
    "ContractError",
    "DatasetEntry",
    "DatasetFingerprint",
    "DatasetNotFound",
    "DsmError",
    "Field",
    "FormatError",
    "InputError",
    "Lineage",
    "Registry",
    "Schema",
    "SchemaError",
    "Shard",
    "ShardReport",
    "StorageError",
    "VerifyReport",
    "__version__",
    "alias",
    "contract_schema",
    "ls",
    "register",
    "show",
    "verify",
]
