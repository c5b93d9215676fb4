"""What dsm needs from an object store beyond fsspec: conditional writes, server-side checksums, retries.

:class:`~dsm.storage.location.Location` dispatches to an :class:`ObjectStore` by protocol
(:func:`store_for`), one module per store as fsspec has one per filesystem, each class naming its
``protocol``: :mod:`dsm.storage.s3`, :mod:`dsm.storage.azure`, :mod:`dsm.storage.memory`. Local disk is
handled by the location itself (``link()`` and a lock file). Anything else (gcs, http, ...) gets
:class:`GenericStore`: a check followed by a write, which a racing writer can slip between. It says so with
a :class:`NonAtomicWriteWarning` and ``atomic=False``.

The registry of stores is read-only from outside (:func:`register_store` adds, never replaces), loads a
store's module on first use, and :func:`install_hint` says what to install for a missing fsspec backend.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dsm.errors import ConflictError, InputError

if TYPE_CHECKING:
    from dsm.storage.location import Location

__all__ = [
    "GenericStore",
    "NonAtomicWriteWarning",
    "ObjectStore",
    "RequestStats",
    "ServerChecksum",
    "install_hint",
    "known_stores",
    "register_store",
    "request_stats",
    "server_checksum",
    "store_for",
]

T = TypeVar("T")


class NonAtomicWriteWarning(UserWarning):
    """A registry write on a store without conditional writes: a racing writer could overwrite it."""


@dataclass(frozen=True, kw_only=True)
class ServerChecksum:
    """A full-object checksum the store keeps for an object: ``algorithm`` and lowercase hex ``digest``.

    ``confirm`` is True when the store does not itself guarantee the value matches the bytes (Azure's
    Content-MD5 can be set by any client): such a value is recorded only after dsm computed the same
    digest from the bytes. ``etag`` identifies the object version it was read from (never a hash).
    """

    algorithm: str
    digest: str
    size: int | None = None
    etag: str | None = None
    confirm: bool = False

    @property
    def value(self) -> str:
        """``ALGORITHM:HEX``, the form a contract records (``server_checksum``)."""
        return f"{self.algorithm}:{self.digest}"


@dataclass
class RequestStats:
    """Requests a filesystem made and how many attempts were retries after transient errors."""

    requests: Counter[str]
    retries: int = 0
    failures: int = 0

    def snapshot(self) -> tuple[int, int, int]:
        return sum(self.requests.values()), self.retries, self.failures


class ObjectStore:
    """Conditional writes and server checksums for one kind of store; :func:`register_store` maps a
    protocol to a subclass."""

    name: ClassVar[str] = "generic"
    protocol: ClassVar[tuple[str, ...]] = ()
    """The URL protocols this store serves (as fsspec's ``protocol``); :func:`store_for` maps them here."""
    atomic: ClassVar[bool] = False
    """Whether :meth:`create_exclusive` and :meth:`compare_and_swap` are atomic on the server."""
    own_options: ClassVar[frozenset[str]] = frozenset()
    """Option names dsm applies itself (in :meth:`prepare`) instead of passing them to the filesystem."""

    def default_options(self) -> dict[str, Any]:
        """Filesystem options dsm uses unless the user gave them (block sizes, caching, retries)."""
        return {}

    def prepare(self, fs: Any, options: Mapping[str, Any] | None = None) -> None:
        """Called for each filesystem instance dsm gets (retry settings, request counting), with the
        options named in :attr:`own_options`."""

    def watch_upload(self, handle: Any) -> Callable[[], None]:
        """Called on a file opened for a direct upload; the returned function runs just before it is
        committed (Azure: set the Content-MD5 of the bytes written, so the blob carries a checksum)."""
        return lambda: None

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        """Create ``rel`` with ``data``; :class:`ConflictError` if it exists (never overwrite)."""
        raise NotImplementedError

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        """Replace ``rel`` by ``new`` if it holds ``expected`` (None: absent); else :class:`ConflictError`."""
        raise NotImplementedError

    def server_checksum(self, loc: Location, rel: str) -> ServerChecksum | None:
        """The store's full-object checksum of ``rel``, or None when it has none dsm can trust."""
        return None


def conflict(loc: Location, rel: str, what: str) -> ConflictError:
    """The error of a lost race on ``rel`` (the URL redacted)."""
    from dsm.storage.secrets import redact

    return ConflictError(f"{redact(loc.url_of(rel))} {what}")


class GenericStore(ObjectStore):
    """A store without conditional writes: check, then write. Not atomic, and says so."""

    name = "generic"
    atomic = False

    def _warn(self, loc: Location, rel: str) -> None:
        from dsm.storage.secrets import redact

        warnings.warn(
            f"{redact(loc.url_of(rel))}: {loc.protocol}:// has no conditional writes in dsm; the check and "
            "the write are two steps and a concurrent writer could slip between them",
            NonAtomicWriteWarning,
            stacklevel=4,
        )

    def create_exclusive(self, loc: Location, rel: str, data: bytes) -> None:
        self._warn(loc, rel)
        path = loc.path(rel)
        if loc.fs.exists(path):
            raise conflict(loc, rel, "already exists; it was not overwritten")
        loc.fs.pipe_file(path, data)

    def compare_and_swap(self, loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
        self._warn(loc, rel)
        path = loc.path(rel)
        current = loc.fs.cat_file(path) if loc.fs.exists(path) else None
        if current != expected:
            raise conflict(loc, rel, "was changed by another writer; retry")
        loc.fs.pipe_file(path, new)


def run_on_loop(fs: Any, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine on the async filesystem's own event loop (where its clients live)."""
    from fsspec.asyn import sync

    return sync(fs.loop, factory)  # type: ignore[no-any-return]


stats_lock = threading.Lock()
STATS_ATTR = "_dsm_request_stats"


def request_stats(loc: Location) -> RequestStats | None:
    """Requests and retries counted for ``loc``'s filesystem (S3), or None where they are not counted.

    The counts are per filesystem instance, which fsspec shares between every location with the same
    options in a process: compare two snapshots to count what one piece of work did.
    """
    return getattr(loc.fs, STATS_ATTR, None)


# --- dispatch -------------------------------------------------------------------------------------------

_KNOWN: dict[str, str] = {
    "s3": "dsm.storage.s3:S3Store",
    "s3a": "dsm.storage.s3:S3Store",
    "az": "dsm.storage.azure:AzureBlobStore",
    "abfs": "dsm.storage.azure:AzureBlobStore",
    "abfss": "dsm.storage.azure:AzureBlobStore",
    "memory": "dsm.storage.memory:MemoryStore",
}
_INSTANCES: dict[str, ObjectStore] = {}

_INSTALL_HINTS = {
    "s3": "pip install 'dsm[s3]' (s3fs)",
    "s3a": "pip install 'dsm[s3]' (s3fs)",
    "az": "pip install 'dsm[azure]' (adlfs)",
    "abfs": "pip install 'dsm[azure]' (adlfs)",
    "abfss": "pip install 'dsm[azure]' (adlfs)",
    "gs": "pip install gcsfs",
    "gcs": "pip install gcsfs",
}


def install_hint(protocol: str) -> str:
    """What to install for a missing fsspec backend of ``protocol``."""
    return _INSTALL_HINTS.get(protocol, f"install the fsspec backend for {protocol}://")


def known_stores() -> dict[str, str]:
    """``{protocol: "module:Class"}`` of every registered store (a copy: the table is changed only by
    :func:`register_store`)."""
    return dict(_KNOWN)


def register_store(protocol: str, target: str) -> None:
    """Use the :class:`ObjectStore` at ``"module:Class"`` for ``protocol``; a taken protocol is refused."""
    if protocol in _KNOWN:
        raise InputError(f"an object store for {protocol}:// is already registered")
    _KNOWN[protocol] = target


def store_for(protocol: str) -> ObjectStore:
    """The :class:`ObjectStore` for a protocol name (``s3``, ``az``, ...); :class:`GenericStore` if none."""
    target = _KNOWN.get(protocol, "dsm.storage.stores:GenericStore")
    if protocol in _INSTANCES:
        return _INSTANCES[protocol]
    if target not in _INSTANCES:  # one instance per class: s3 and s3a share it
        module, _, cls = target.partition(":")
        _INSTANCES[target] = getattr(importlib.import_module(module), cls)()
    return _INSTANCES[target]


def server_checksum(loc: Location, rel: str) -> ServerChecksum | None:
    """The store's full-object checksum of ``rel`` (None on local disk and stores that keep none)."""
    if loc.is_local:
        return None
    return loc.store.server_checksum(loc, rel)
