"""What one ``dsm serve`` keeps between requests: the registry, open row sources and the jobs.

A reference in a URL is resolved on every request (an alias may have moved), then the row source of that
version is taken from a small cache (:data:`SOURCES` of them, least recently used dropped), so that paging
through rows reads each footer and row index once. Classified fields named by ``--unmask`` are unmasked in
each source that has them; :func:`dsm.inspect.open_rows` records every such opening in the registry's audit
log (command ``serve``) before a value is shown.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from dsm.contract import Contract
from dsm.errors import DatasetNotFound, InputError
from dsm.inspect import RowSource, open_rows
from dsm.registry import Registry, open_registry
from dsm.storage import redact
from dsm.viewers.web.config import ServeConfig
from dsm.viewers.web.jobs import Jobs
from dsm.viewers.web.refs import url_reference

__all__ = ["SOURCES", "ServerState"]

SOURCES = 16


class ServerState:
    """The registry, the open row sources (by dataset version) and the jobs of one server."""

    def __init__(self, config: ServeConfig, registry: Registry | None = None) -> None:
        self.config = config
        self.registry = registry or open_registry(config.registry, config.storage_options)
        self.jobs = Jobs()
        self._lock = threading.Lock()
        self._sources: OrderedDict[tuple[str, int], RowSource] = OrderedDict()
        self._opening: dict[tuple[str, int], threading.Lock] = {}

    @property
    def registry_url(self) -> str:
        return redact(self.registry.url)

    def check_unmask(self) -> None:
        """Every ``--unmask`` field must be classified in some dataset's newest version (else exit 2)."""
        if not self.config.unmask:
            return
        classified: set[str] = set()
        for name in self.registry.names():
            versions = self.registry.versions(name)
            if versions:
                contract = self.registry.get(name, versions[-1])
                classified |= {f.name for f in contract.schema.fields if f.classification}
        missing = [f for f in self.config.unmask if f not in classified]
        if missing:
            raise InputError(
                f"--unmask {missing[0]}: no dataset in the registry has a classified field of that name"
            )

    def version_of(self, text: str) -> tuple[str, int]:
        """``(name, version)`` a URL reference names (``NAME`` is its newest version that is not retired)."""
        name, selector = url_reference(text)
        reg = self.registry
        if selector is not None and selector.isdigit():
            with self._lock:
                if (name, int(selector)) in self._sources:
                    return name, int(selector)  # open already: it exists (versions are never removed)
        # Never Registry.resolve(text): a reference ending in .yaml would be read as a contract file.
        versions = reg.versions(name)
        if not versions:
            raise DatasetNotFound(f"no dataset named {name!r} in the registry; the front page lists them")
        if selector is None or selector == "latest":
            statuses = reg.statuses(name)
            usable = [v for v in versions if v not in statuses or statuses[v].status != "retired"]
            if not usable:
                raise DatasetNotFound(f"every version of {name} is retired; name one: {name}@{versions[-1]}")
            return name, usable[-1]
        if selector.isdigit():
            if int(selector) not in versions:
                raise DatasetNotFound(
                    f"{name} has no version {selector}; versions: {versions[0]} to {versions[-1]}"
                )
            return name, int(selector)
        aliases = reg.aliases(name)
        if selector not in aliases:
            raise DatasetNotFound(f"{name} has no alias {selector!r}; aliases: {sorted(aliases) or 'none'}")
        return name, aliases[selector]

    def contract(self, text: str) -> Contract:
        """The contract a URL reference names, read now (with its current status)."""
        return self.registry.get(*self.version_of(text))

    def opened(self, text: str) -> RowSource:
        """The row source of the version a URL reference names: the open one, else opened now (its
        contract read once: a version's contract never changes)."""
        key = self.version_of(text)
        with self._lock:
            found = self._sources.get(key)
            if found is not None:
                self._sources.move_to_end(key)
                return found
        return self.source(self.registry.get(*key))

    def unmask_for(self, contract: Contract) -> tuple[str, ...]:
        classified = {f.name for f in contract.schema.fields if f.classification}
        return tuple(f for f in self.config.unmask if f in classified)

    def source(self, contract: Contract) -> RowSource:
        """The row source of ``contract``'s version (opened once; unmasking audited when it opens)."""
        key = (contract.name, int(contract.version or 0))
        with self._lock:
            found = self._sources.get(key)
            if found is not None:
                self._sources.move_to_end(key)
                return found
            opening = self._opening.setdefault(key, threading.Lock())
        with opening:  # two requests for a new version open (and audit) it once
            with self._lock:
                found = self._sources.get(key)
            if found is not None:
                return found
            source = open_rows(
                contract,
                registry=self.registry,
                unmask=self.unmask_for(contract),
                reason=self.config.reason,
                command="serve",
                storage_options=self.config.storage_options,
                cache_dir=self.config.cache_dir,
            )
            with self._lock:
                self._sources[key] = source
                self._opening.pop(key, None)
                while len(self._sources) > SOURCES:
                    self._sources.popitem(last=False)
        return source

    def close(self) -> None:
        self.jobs.close()
        with self._lock:
            self._sources.clear()
