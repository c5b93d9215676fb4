"""The public names of the platform modules (readiness, footprint, lifecycle, policy) exist, are exported."""

from __future__ import annotations

import importlib

import pytest

import dsm

MODULES = [
    "dsm.policy",
    "dsm.storage.canonical",
    "dsm.storage.readiness",
    "dsm.storage.local",
    "dsm.validators.pii",
    "dsm.commands.storage_check",
    "dsm.commands.footprint",
    "dsm.commands.lifecycle",
    "dsm.commands.policy",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"


def test_top_level_api() -> None:
    for name in ("storage_check", "footprint", "deprecate", "retire", "gc", "check_policy", "set_policy"):
        assert callable(getattr(dsm, name)) and name in dsm.__all__
    from dsm.storage import canonical_location, canonical_url, is_within

    assert callable(canonical_location) and callable(canonical_url) and callable(is_within)
