"""The exceptions dsm raises. Every one is a :class:`DsmError` and also the matching builtin.

::

    DsmError
    ├── InputError (ValueError)            bad usage or bad input; nothing was changed   -> exit 2
    │   ├── ContractError                  a contract that does not load or validate
    │   ├── DatasetNotFound (LookupError)  an unknown dataset, version, alias or file
    │   ├── FormatError                    a shard that cannot be decoded (names shard, line or field)
    │   ├── SchemaError                    a schema that does not fit (format, shards, contract)
    │   └── StateError                     a reader checkpoint that does not fit the iterator loading it
    ├── CheckFailed                        the data failed a check (fingerprint mismatch, gate)   -> exit 1
    │   └── StageCheckFailed               a cutover stage's check did not hold; carries its evidence
    └── StorageError (OSError)             storage or environment failure; safe to retry          -> exit 3
        └── ConflictError                  lost a race (version or alias written by someone else)

An interrupted command (``KeyboardInterrupt``) keeps what was done and exits 130. The CLI maps every one
to its exit code in exactly one place, the table beside ``dsm.cli.main``; ``exit_code`` on each class is
the same code, for Python callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "CheckFailed",
    "ConflictError",
    "ContractError",
    "DatasetNotFound",
    "DsmError",
    "FormatError",
    "InputError",
    "SchemaError",
    "StageCheckFailed",
    "StateError",
    "StorageError",
]


class DsmError(Exception):
    """Base of every error dsm raises on purpose."""

    exit_code: int = 2


class InputError(DsmError, ValueError):
    """Bad usage or bad input: nothing was changed."""

    exit_code = 2


class ContractError(InputError):
    """A contract file that does not parse, validate, or that this dsm cannot read."""


class DatasetNotFound(InputError, LookupError):
    """A dataset reference (name, version, alias or path) that does not resolve."""


class FormatError(InputError):
    """A shard that cannot be decoded; the message names the shard and the line, row or field."""


class SchemaError(InputError):
    """A schema that does not fit: shards disagree, a format cannot hold it, or data does not match."""


class StateError(InputError):
    """A reader checkpoint (``state_dict``) that does not fit: another dataset, seed, epoch or rank layout."""


class CheckFailed(DsmError):
    """The work was done but the data failed a check (a fingerprint mismatch, a gate)."""

    exit_code = 1


class StageCheckFailed(CheckFailed):
    """A cutover stage whose check did not hold (exit 1); ``evidence`` is what it found, for the journal."""

    def __init__(self, message: str, evidence: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.evidence = dict(evidence or {})


class StorageError(DsmError, OSError):
    """Storage or environment failure (unreachable, denied, out of space): safe to retry."""

    exit_code = 3


class ConflictError(StorageError):
    """Someone else wrote the same version or moved the same alias first: retry."""
