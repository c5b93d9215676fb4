"""Module paths that moved in the restructure of 0.1, kept importable for one release.

``import dsm.fingerprint`` (and ``from dsm.dataset import Dataset``, ...) still works: ``import dsm``
installs a finder that answers for each old path with a module forwarding every name to its new home, and
each name taken from it raises a :class:`DeprecationWarning` saying where it lives now. The old paths have
no file of their own, so that version control sees each move as a rename.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["MOVED", "REMOVED_IN", "forwarding", "install"]

REMOVED_IN = "dsm 0.3"

_CUTOVER = "dsm.commands.cutover"
_SHIM = "dsm._moved"

MOVED: Mapping[str, str | Mapping[str, str]] = {
    "dsm.fingerprint": "dsm.hashing.fingerprint",
    "dsm.checksum": "dsm.hashing.checksum",
    "dsm.digest": "dsm.hashing.rowdigest",
    "dsm.order": "dsm.read.order",
    "dsm.cache": "dsm.read.cache",
    "dsm.dataset": "dsm.read.dataset",
    "dsm.torch": "dsm.read.torch",
    "dsm.reader": "dsm.shards",
    "dsm.rewrite.permutation": "dsm.hashing.permutation",
    "dsm.object_store": {
        "AzureBlobStore": "dsm.storage.azure",
        "GenericStore": "dsm.storage.stores",
        "MeasuredObject": "dsm.shards",
        "MemoryStore": "dsm.storage.memory",
        "NonAtomicWriteWarning": "dsm.storage.stores",
        "ObjectStore": "dsm.storage.stores",
        "RequestStats": "dsm.storage.stores",
        "S3Store": "dsm.storage.s3",
        "ServerChecksum": "dsm.storage.stores",
        "measure_object": "dsm.shards",
        "register_store": "dsm.storage.stores",
        "request_stats": "dsm.storage.stores",
        "s3_full_object_checksum": "dsm.storage.s3",
        "server_checksum": "dsm.storage.stores",
        "store_for": "dsm.storage.stores",
    },
    "dsm.commands._common": {
        "now_utc": "dsm.units:utc_now_text",
        "open_registry": "dsm.registry",
        "resolve": "dsm.registry",
        "tool_name": "dsm._version",
    },
    "dsm.commands._bench_runner": {
        "CacheDrop": "dsm.benchmark.host",
        "ErrorRecord": "dsm.benchmark.runner",
        "RunSpec": "dsm.benchmark.runner",
        "RunTimings": "dsm.benchmark.runner",
        "drop_caches": "dsm.benchmark.host",
        "execute_run": "dsm.benchmark.runner",
        "prime_decoder": "dsm.benchmark.host",
        "process_read_bytes": "dsm.benchmark.host",
    },
    "dsm.commands._bench_results": {
        **{
            name: "dsm.benchmark.results"
            for name in (
                "BenchReport",
                "ComparisonRow",
                "DatasetBench",
                "GateResult",
                "Gates",
                "Knee",
                "KneeStep",
                "Percentiles",
                "Provenance",
                "Repetition",
                "WorkerResult",
                "find_knee",
            )
        },
        "compare_results": "dsm.benchmark.gates",
        "evaluate_gates": "dsm.benchmark.gates",
    },
    "dsm.commands._bench_html": {
        "figure_label": "dsm.benchmark.results",
        "format_count": "dsm.units",
        "format_rate": "dsm.units",
        "format_seconds": "dsm.units",
        "render_html": "dsm.benchmark.html",
    },
    "dsm.commands._cutover_stages": {
        "CutoverPlan": f"{_CUTOVER}.plan",
        "StageCheckFailed": "dsm.errors",
        "StageContext": f"{_CUTOVER}.stages",
        "checksums_digest": f"{_CUTOVER}.stages",
        "compute_plan": f"{_CUTOVER}.plan",
        "discard_target": f"{_CUTOVER}.stages",
    },
    "dsm.cutover": {
        "DEFAULT_LEASE_SECONDS": f"{_CUTOVER}.lease",
        "JOURNAL_FORMAT": f"{_CUTOVER}.journal",
        "STAGES": f"{_CUTOVER}.state",
        "CutoverJournal": f"{_CUTOVER}.journal",
        "CutoverState": f"{_CUTOVER}.state",
        "Lease": f"{_CUTOVER}.lease",
        "LeaseInfo": f"{_CUTOVER}.lease",
        "Owner": f"{_CUTOVER}.journal",
        "StageState": f"{_CUTOVER}.state",
        "current_owner": f"{_CUTOVER}.journal",
        "derive_state": f"{_CUTOVER}.state",
        "parse_duration": "dsm.units",
    },
    "dsm.cutover.journal": f"{_CUTOVER}.journal",
    "dsm.cutover.lease": f"{_CUTOVER}.lease",
    "dsm.cutover.state": f"{_CUTOVER}.state",
    "dsm.cutover.prices": f"{_CUTOVER}.prices",
    "dsm.cutover.estimate": f"{_CUTOVER}.estimate",
    "dsm.cutover.sample": {
        "RowMismatch": f"{_CUTOVER}.shadow",
        "SampleComparison": f"{_CUTOVER}.shadow",
        "SampleSpeeds": f"{_CUTOVER}.speed",
        "compare_sample": f"{_CUTOVER}.shadow",
        "measure_sample": f"{_CUTOVER}.speed",
        "read_rows": f"{_CUTOVER}.shadow",
        "sample_runs": f"{_CUTOVER}.shadow",
    },
    "dsm.cutover.killpoints": {"KILL_ENV": "dsm._testing", "kill_point": "dsm._testing"},
}
"""Old module path -> its new module, or ``{name: new module}`` for a module whose names went to several
homes (``"module:attribute"`` where the name changed too)."""

EXTRA: Mapping[str, Mapping[str, str]] = {
    "dsm.dataset": {
        "ORDER_ARGUMENTS": "dsm.read.state",
        "READ_BATCH_BYTES": "dsm.read.iterator",
        "SkippedRows": "dsm.read.state",
    },
}
"""Names an old module had beyond its ``__all__`` that tests and callers reach (settings they patch)."""


def _take(module: str, name: str, home: str) -> Any:
    """``name`` from its new ``home`` (``"module"`` or ``"module:attribute"``), warning where it moved."""
    target, _, attribute = home.partition(":")
    attribute = attribute or name
    warnings.warn(
        f"{module}.{name} moved to {target}.{attribute}; import it from there "
        f"(the old path works until {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(target), attribute)


def forwarding(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that moved out of a module that stays: each name of ``moved``
    (``{name: new module}``) is taken from its new home, with a :class:`DeprecationWarning`."""

    def __getattr__(name: str) -> Any:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return _take(module, name, home)

    return __getattr__


def _homes(old: str) -> dict[str, str]:
    target = MOVED[old]
    if isinstance(target, str):
        module = importlib.import_module(target)
        names: Sequence[str] = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
        return {name: target for name in names}
    return dict(target)


class _ForwardingModule(types.ModuleType):
    """An old path's module: names are read from, and set on, their new home. A name set through the old
    path (``monkeypatch.setattr(dsm.dataset, ...)``) and then deleted there gets back the home's value it
    replaced (what ``monkeypatch`` undoes)."""

    _dsm_homes: dict[str, str]

    def _home_of(self, name: str) -> tuple[types.ModuleType, str] | None:
        home = self.__dict__.get("_dsm_homes", {}).get(name)
        if home is None:
            return None
        target, _, attribute = home.partition(":")
        return importlib.import_module(target), attribute or name

    def __setattr__(self, name: str, value: Any) -> None:
        found = self._home_of(name)
        if found is None:
            super().__setattr__(name, value)
            return
        module, attribute = found
        warnings.warn(
            f"{self.__name__}.{name} moved to {module.__name__}.{attribute}; set it there "
            f"(the old path works until {REMOVED_IN})",
            DeprecationWarning,
            stacklevel=2,
        )
        replaced = self.__dict__.setdefault("_dsm_replaced", {})
        replaced.setdefault(name, getattr(module, attribute))
        setattr(module, attribute, value)

    def __delattr__(self, name: str) -> None:
        found = self._home_of(name)
        replaced = self.__dict__.get("_dsm_replaced", {})
        if found is None or name not in replaced:
            super().__delattr__(name)
            return
        module, attribute = found
        setattr(module, attribute, replaced.pop(name))


def _forwarding_module(old: str) -> types.ModuleType:
    public = _homes(old)
    homes = {**public, **EXTRA.get(old, {})}
    module = _ForwardingModule(
        old, f"Moved: see {MOVED[old] if isinstance(MOVED[old], str) else 'each name'}."
    )
    module._dsm_homes = homes
    children = [name for name in MOVED if name.startswith(old + ".")]
    if children:
        module.__path__ = []  # a package, so that its moved submodules import

    module.__getattr__ = forwarding(old, homes)  # type: ignore[method-assign]
    module.__dir__ = lambda: sorted(homes)  # type: ignore[method-assign]
    module.__all__ = sorted(public)  # type: ignore[attr-defined]
    return module


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED` (and only those) and loads a forwarding module for each."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, self, is_package=any(n.startswith(fullname + ".") for n in MOVED)
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _forwarding_module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
