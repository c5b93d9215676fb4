"""Small pieces the commands share: resolving references, the tool name, timestamps."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from dsm.contract import Contract
from dsm.registry import Registry

__all__ = ["now_utc", "open_registry", "provenance", "resolve", "tool_name"]


def tool_name() -> str:
    from dsm import __version__

    return f"dsm {__version__}"


def provenance(*, rows_hashed: bool) -> dict[str, str]:
    """What produced a command's result, for its JSON: the tool and, where rows were hashed, how this
    process and its local workers hashed them (with a one-line ``notice`` on the pure-Python path)."""
    shown = {"tool": tool_name()}
    if rows_hashed:
        from dsm.fingerprint_kernel import provenance as row_hashing

        shown.update(row_hashing())
    return shown


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def open_registry(
    registry: str | Registry | None, storage_options: Mapping[str, Any] | None = None
) -> Registry:
    if isinstance(registry, Registry):
        return registry
    return Registry(registry, storage_options=storage_options)


def resolve(
    ref: str | Contract, registry: str | Registry | None, storage_options: Mapping[str, Any] | None = None
) -> Contract:
    """The contract ``ref`` names (a name, ``NAME@N``, ``NAME@ALIAS``, a contract path, or a Contract)."""
    if isinstance(ref, Contract):
        return ref
    return open_registry(registry, storage_options).resolve(ref)
