"""A folder at a URL: every path dsm touches goes through fsspec, addressed by URL.

A :class:`Location` is a filesystem plus a root path. Writes that readers may see are atomic: a file is
written under a temporary name and renamed (local disk), or uploaded as one object that appears only when
its upload completes and is abandoned, never committed, when the writer fails (S3, Azure Blob).
``create_exclusive`` never overwrites and ``compare_and_swap`` replaces only what it read: on local disk
with ``link()`` and a lock file, on object stores with conditional writes (``dsm.storage.stores``).

Options reach the filesystem from ``DSM_STORAGE_OPTIONS`` and ``storage_options``, keyed by protocol or
URL prefix (:mod:`dsm.storage.options`). Credentials stay where users keep them (environment, profiles,
connection strings); :mod:`dsm.storage.secrets` hides them in everything dsm prints, logs or writes.
"""

from __future__ import annotations

import contextlib
import copy
import os
import posixpath
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from dsm.errors import ConflictError, InputError
from dsm.paths import path_problem
from dsm.storage.failures import storage_errors
from dsm.storage.options import LOCAL_PROTOCOLS, options_for, protocol_of, storage_options_from_env
from dsm.storage.secrets import URL_USERINFO, redact, remember_option_secrets, remember_secret
from dsm.storage.stores import (
    ObjectStore,
    ServerChecksum,
    check_option_names,
    constructor_options,
    install_hint,
    store_for,
)

__all__ = [
    "TEMP_MARKER",
    "FileInfo",
    "Location",
    "compare_and_swap",
    "is_temporary",
    "location",
    "storage_errors",
]

TEMP_MARKER = ".dsm-tmp-"
"""Infix of every temporary name dsm writes; such files are never data and are skipped by scans."""


@dataclass(frozen=True, kw_only=True)
class FileInfo:
    """A file under a location: its path relative to the root, and its size in bytes."""

    path: str
    size: int


def is_temporary(path: str) -> bool:
    return TEMP_MARKER in posixpath.basename(path)


@dataclass(frozen=True, kw_only=True)
class Location:
    """A folder (or object prefix) at a URL. ``url`` is what the user gave; messages show it redacted."""

    url: str
    fs: Any
    root: str
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)  # may hold credentials

    @property
    def protocol(self) -> str:
        proto = self.fs.protocol
        return proto[0] if isinstance(proto, (tuple, list)) else str(proto)

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    @property
    def store(self) -> ObjectStore:
        """The conditional-write and server-checksum support of this location's store."""
        return store_for(self.protocol)

    @property
    def io_workers(self) -> int | None:
        """Workers to use for per-shard I/O when the caller gave none: None (the engine's default, one per
        core) on local disk; more on object stores, where each request waits on the network, not a core."""
        if self.is_local or self.protocol == "memory":
            return None
        return max(8, 4 * (os.cpu_count() or 1))

    @property
    def atomic_writes(self) -> bool:
        """Whether ``create_exclusive`` and ``compare_and_swap`` are atomic here (not check-then-write)."""
        return self.is_local or self.store.atomic

    def _errors(self, rel: str = "") -> contextlib.AbstractContextManager[None]:
        """Map what the filesystem raises for ``rel`` (:mod:`dsm.storage.failures`)."""
        return storage_errors(self.url_of(rel), self)

    def path(self, rel: str = "") -> str:
        """The filesystem path of ``rel`` under the root; InputError for a ``rel`` that would leave it
        (absolute, or with a ``..`` part: :func:`dsm.paths.path_problem`)."""
        if not rel:
            return self.root
        problem = path_problem(rel)
        if problem is not None:
            raise InputError(f"path {rel!r} under {redact(self.url)} {problem}; nothing was read or written")
        return posixpath.join(self.root, rel) if self.root else rel

    def url_of(self, rel: str) -> str:
        """A URL for ``rel`` under this location (for messages and contracts)."""
        base = self.url.rstrip("/")
        return f"{base}/{rel}" if rel else base

    def child(self, rel: str) -> Location:
        return Location(url=self.url_of(rel), fs=self.fs, root=self.path(rel), options=self.options)

    def server_checksum(self, rel: str) -> ServerChecksum | None:
        """The store's full-object checksum of ``rel`` (:meth:`ObjectStore.server_checksum`; None on local
        disk)."""
        if self.is_local:
            return None
        with self._errors(rel):
            return self.store.server_checksum(self, rel)

    def exists(self, rel: str = "") -> bool:
        with self._errors(rel):
            return bool(self.fs.exists(self.path(rel)))

    def isdir(self, rel: str = "") -> bool:
        with self._errors(rel):
            return bool(self.fs.isdir(self.path(rel)))

    def size(self, rel: str) -> int:
        with self._errors(rel):
            return int(self.fs.size(self.path(rel)))

    def list_files(self, *, recursive: bool = True, temporary: bool = False) -> list[FileInfo]:
        """Every file below the root (temporary ones only with ``temporary``), sorted by path; ``[]`` when
        the root is absent."""
        with self._errors():
            # One listing (no HEAD of the root first: a store may refuse that to whom it lets list).
            found = self.fs.find(self.root, detail=True, withdirs=False, maxdepth=None if recursive else 1)
        files = []
        prefix = self.root.rstrip("/") + "/"
        for full, info in found.items():
            if info.get("type", "file") != "file":
                continue
            rel = full[len(prefix) :] if full.startswith(prefix) else posixpath.basename(full)
            if is_temporary(rel) and not temporary:
                continue
            files.append(FileInfo(path=rel, size=int(info.get("size") or 0)))
        return sorted(files, key=lambda f: f.path)

    @contextlib.contextmanager
    def open(self, rel: str, mode: str = "rb", **kwargs: Any) -> Iterator[IO[Any]]:
        """``with loc.open(rel) as handle:`` the file, closed at the end of the block. What storage raises
        while the block reads or writes it is mapped too, naming ``rel`` (a decoding error is not)."""
        with self._errors(rel), self.fs.open(self.path(rel), mode, **kwargs) as handle:
            yield handle

    def open_handle(self, rel: str, mode: str = "rb", **kwargs: Any) -> IO[Any]:
        """The open file itself, for a caller that keeps it past one block and closes it (only the open is
        mapped by :mod:`dsm.storage.failures`, not later reads: prefer :meth:`open`)."""
        with self._errors(rel):
            return self.fs.open(self.path(rel), mode, **kwargs)  # type: ignore[no-any-return]

    def read_bytes(self, rel: str) -> bytes:
        with self._errors(rel):
            return bytes(self.fs.cat_file(self.path(rel)))

    @contextlib.contextmanager
    def leave_folders_as_found(self) -> Iterator[None]:
        """Folders the block makes on local disk for this location (its root and the missing parents) are
        removed again at the end if they are empty: a probe or a plan leaves no folder behind. Object stores
        have no folders."""
        missing: list[str] = []
        if self.is_local:
            path = self.root
            while path and not os.path.exists(path):
                missing.append(path)  # deepest first
                parent = os.path.dirname(path)
                if parent == path:
                    break
                path = parent
        try:
            yield
        finally:
            for folder in missing:
                with contextlib.suppress(OSError):  # not empty (someone wrote there) or gone: kept as is
                    os.rmdir(folder)

    def makedirs(self, rel: str = "") -> None:
        with self._errors(rel):
            self.fs.makedirs(self.path(rel), exist_ok=True)

    def temp_name(self, rel: str) -> str:
        head, tail = posixpath.split(rel)
        return posixpath.join(head, f"{TEMP_MARKER}{uuid.uuid4().hex[:12]}-{tail}")

    @contextlib.contextmanager
    def atomic_writer(self, rel: str) -> Iterator[IO[bytes]]:
        """Write ``rel`` so that readers see either nothing or the whole file.

        Local disk and stores without upload sessions: the bytes go to a temporary name, renamed over
        ``rel`` when the block ends without error. S3 and Azure Blob: the object is uploaded directly (it
        appears only when its upload completes, so no copy is needed); on error the upload is abandoned
        (S3 multipart upload aborted, Azure blocks left uncommitted) and ``rel`` is untouched.
        """
        if self.protocol in _DIRECT_UPLOAD:
            with self._direct_writer(rel) as handle:
                yield handle
            return
        tmp = self.temp_name(rel)
        parent = posixpath.dirname(self.path(rel))
        with self._errors(rel):
            if parent and self.is_local:
                self.fs.makedirs(parent, exist_ok=True)
            handle = self.fs.open(self.path(tmp), "wb")
        try:
            with self._errors(rel), handle:  # a write that fails (out of space...) names ``rel``
                yield handle
            with self._errors(rel):
                self.fs.mv(self.path(tmp), self.path(rel))
        except BaseException:
            with contextlib.suppress(Exception):
                self.fs.rm(self.path(tmp))
            raise

    @contextlib.contextmanager
    def _direct_writer(self, rel: str) -> Iterator[IO[bytes]]:
        with self._errors(rel):
            handle = self.fs.open(self.path(rel), "wb")
        before_commit = self.store.watch_upload(handle)
        try:
            with self._errors(rel):
                yield handle
        except BaseException:
            # Never close(): closing commits what was written. Abort the upload and mark the file closed.
            with contextlib.suppress(Exception):
                handle.discard()
            handle.closed = True
            raise
        with self._errors(rel):
            before_commit()
            handle.close()

    def write_bytes_atomic(self, rel: str, data: bytes) -> None:
        with self.atomic_writer(rel) as handle:
            handle.write(data)

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Create ``rel`` with ``data``; raise :class:`ConflictError` if it exists. Never overwrites.

        Atomic on local disk (``link()``), S3 (``If-None-Match: *``), Azure Blob and ``memory://``; on
        other stores a check precedes the write and a :class:`~dsm.storage.stores.NonAtomicWriteWarning`
        says so.
        """
        if self.is_local:
            final = self.path(rel)
            tmp = self.path(self.temp_name(rel))
            with self._errors(rel):
                os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
                with open(tmp, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                try:
                    os.link(tmp, final)  # link() fails if the name exists: an atomic create-if-absent
                except FileExistsError:
                    raise ConflictError(
                        f"{self.url_of(rel)} already exists; it was not overwritten"
                    ) from None
                finally:
                    os.unlink(tmp)
            return
        with self._errors(rel):
            self.store.create_exclusive(self, rel, data)

    def remove(self, rel: str) -> None:
        with self._errors(rel):
            self.fs.rm(self.path(rel))


_DIRECT_UPLOAD = {"s3", "s3a", "az", "abfs", "abfss"}
_USERINFO_AS_OPTIONS = {"s3": ("key", "secret"), "s3a": ("key", "secret")}


def _credentials_from_url(url: str, protocol: str) -> tuple[str, dict[str, str]]:
    """``s3://KEY:SECRET@bucket/p`` -> (``s3://bucket/p``, {"key": KEY, "secret": SECRET}).

    s3fs does not read credentials from a URL (it would take ``KEY:SECRET@bucket`` for a bucket name and
    log it), so they become options and the URL dsm keeps, shows and records has none.
    """
    names = _USERINFO_AS_OPTIONS.get(protocol)
    match = URL_USERINFO.match(url)
    if names is None or match is None:
        return url, {}
    user = urllib.parse.unquote(match["user"])
    password = urllib.parse.unquote(match["pw"])
    remember_secret(password)
    return match["scheme"] + url[match.end() :], {names[0]: user, names[1]: password}


def location(url: str, storage_options: Mapping[str, Any] | None = None) -> Location:
    """The :class:`Location` for ``url`` (any fsspec URL or local path).

    Options are dsm's defaults for the store (retries, listing cache off, read caching) overlaid with
    ``DSM_STORAGE_OPTIONS`` and then ``storage_options``, each resolved for this URL by
    :func:`options_for`. Credentials are left to each backend's own mechanisms (environment, profiles,
    connection strings). A missing backend is an :class:`InputError` that says what to install.
    """
    url = str(url)
    protocol = protocol_of(url)
    url, url_credentials = _credentials_from_url(url, protocol)
    env_options = storage_options_from_env()
    remember_option_secrets(env_options)
    remember_option_secrets(storage_options or {})
    store = store_for(protocol) if protocol not in LOCAL_PROTOCOLS else None
    defaults = store.default_options() if store is not None else {}
    options = {**options_for(url, {protocol: defaults}, env_options, storage_options), **url_credentials}
    # Location.options keeps the options as given (dsm's names, the store's own options), so that a Location
    # opened again elsewhere from its URL and options (another process, a Ray worker) is the same.
    given = copy.deepcopy(options)  # the client may change nested settings in place (botocore's retries)
    own: dict[str, Any] = {}
    if store is None and options:
        check_option_names(url, "local disk", constructor_options(LocalFileSystem), options)
    if store is not None:
        store.check_options(url, options)
        options = store.filesystem_options(options)
        own = {k: options.pop(k) for k in list(options) if k in store.own_options}
    try:
        fs, root = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        hint = install_hint(protocol)
        raise InputError(f"{redact(url)}: no filesystem for {protocol}:// is installed ({hint})") from exc
    except ValueError as exc:
        if "Protocol not known" in str(exc):
            raise InputError(f"{redact(url)}: unknown storage protocol {protocol}://") from None
        raise InputError(f"{redact(url)}: {redact(str(exc))}") from None
    except TypeError as exc:
        raise InputError(
            f"{redact(url)}: a storage option does not fit {protocol}://: {redact(str(exc))}"
        ) from None
    if isinstance(fs, LocalFileSystem):
        root = os.path.abspath(root)
    elif store is not None:
        store.prepare(fs, own)
    return Location(
        url=url,
        fs=fs,
        root=root.rstrip("/") if root not in ("/", "") else root,
        options=given,
    )


def compare_and_swap(loc: Location, rel: str, expected: bytes | None, new: bytes) -> bool:
    """Replace ``rel`` with ``new`` only if it still holds ``expected`` (``None``: absent).

    Raises :class:`ConflictError` when another writer changed it. Returns whether the swap was atomic:
    on local disk a lock file serialises writers and the swap is an atomic rename; S3 and Azure Blob use
    a write conditioned on the ETag read with ``expected``; ``memory://`` holds a process lock. On other
    stores the check and the write are two steps (False, with a
    :class:`~dsm.storage.stores.NonAtomicWriteWarning`).
    """
    if loc.is_local:
        import fcntl

        target = loc.path(rel)
        with storage_errors(loc.url_of(rel), loc):
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with storage_errors(loc.url_of(rel), loc), open(target + ".lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                current = open(target, "rb").read() if os.path.exists(target) else None  # noqa: SIM115
                if current != expected:
                    raise ConflictError(f"{loc.url_of(rel)} was changed by another writer; retry")
                loc.write_bytes_atomic(rel, new)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        return True
    with storage_errors(loc.url_of(rel), loc):
        loc.store.compare_and_swap(loc, rel, expected, new)
    return loc.store.atomic
