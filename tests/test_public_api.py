"""The public API (`import dsm`) is what ``__all__`` says, and every name in it exists."""

from __future__ import annotations

import importlib

import pytest

import dsm

PUBLIC_MODULES = [
    "dsm",
    "dsm.contract",
    "dsm.errors",
    "dsm.registry",
    "dsm.storage",
    "dsm.object_store",
    "dsm.fingerprint",
    "dsm.formats",
    "dsm.engine",
    "dsm.validators",
    "dsm.inspect",
    "dsm.inspect.source",
    "dsm.inspect.view",
    "dsm.inspect.rowdiff",
    "dsm.commands.inspect",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"


def test_commands_are_exported_at_top_level() -> None:
    for name in ("register", "verify", "ls", "show", "alias", "head", "sample", "find", "log", "diff_rows"):
        assert callable(getattr(dsm, name))


def test_errors_inherit_builtins() -> None:
    assert issubclass(dsm.ContractError, ValueError)
    assert issubclass(dsm.DatasetNotFound, LookupError)
    assert issubclass(dsm.StorageError, OSError)
    assert (
        dsm.InputError.exit_code == 2 and dsm.StorageError.exit_code == 3 and dsm.CheckFailed.exit_code == 1
    )
