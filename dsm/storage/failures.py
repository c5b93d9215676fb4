"""The one place an exception from storage becomes a :class:`~dsm.errors.DsmError`.

Every call dsm makes into a filesystem runs inside :func:`storage_errors` (the methods of
:class:`~dsm.storage.location.Location` do it for their callers, and the bodies of ``with loc.open(...)``
and ``with loc.atomic_writer(...)`` too, so a read or a write that fails half-way is mapped as well).
:func:`storage_error` maps, in this order:

- what the store's client library raises, by its :class:`~dsm.storage.stores.ObjectStore`
  (``translate_error``: botocore and s3fs for S3, azure-core for Azure Blob): refused or missing
  credentials, denied requests, missing buckets, unreachable endpoints;
- the ``OSError`` families, by class and errno, the same on every store: not found (exit 2), permission
  denied, out of space or quota, read-only file system, too many open files, unreachable or timed out
  (all exit 3);
- a missing fsspec backend (exit 2, naming what to install).

Anything else is not a storage failure and is left as it is: a decoding error belongs to the formats
layer, and an exception nobody maps is a bug the CLI reports as one. An unreachable store is given up on
after a bounded time: ``attempts`` (default :data:`DEFAULT_ATTEMPTS`) with a ``connect_timeout`` (default
:data:`DEFAULT_CONNECT_TIMEOUT` seconds) each, both storage options of every object store, and the message
says what was tried (endpoint, attempts, time).
"""

from __future__ import annotations

import contextlib
import errno
import time
import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dsm.errors import ConflictError, DatasetNotFound, DsmError, InputError, StorageError
from dsm.storage.options import LOCAL_PROTOCOLS, protocol_of
from dsm.storage.secrets import redact

if TYPE_CHECKING:
    from dsm.storage.location import Location

__all__ = [
    "DEFAULT_ATTEMPTS",
    "DEFAULT_CONNECT_TIMEOUT",
    "storage_error",
    "storage_errors",
    "unreachable",
]

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a connection to an object store before the attempt fails (storage option
``connect_timeout``)."""
DEFAULT_ATTEMPTS = 3
"""Attempts of a request to an object store, the first included, before dsm gives up (storage option
``attempts``; the AWS SDKs' own default in their standard retry mode)."""

_OUT_OF_SPACE = {errno.ENOSPC, errno.EDQUOT}
_TOO_MANY_FILES = {errno.EMFILE, errno.ENFILE}
_UNREACHABLE = {
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.ETIMEDOUT,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.EHOSTDOWN,
    errno.ENETDOWN,
}


@contextlib.contextmanager
def storage_errors(what: str, loc: Location | None = None) -> Iterator[None]:
    """Map what a storage call in the block raises (see :func:`storage_error`); ``what`` is the path or URL
    at fault (shown redacted), ``loc`` the location it belongs to (its store and retry settings)."""
    started = time.monotonic()
    try:
        yield
    except DsmError:
        raise
    except Exception as exc:
        error = storage_error(exc, what, loc=loc, elapsed=time.monotonic() - started)
        if error is None:
            raise
        raise error from exc


def storage_error(
    exc: BaseException, what: str, *, loc: Location | None = None, elapsed: float | None = None
) -> DsmError | None:
    """The :class:`DsmError` for an exception raised by a storage call on ``what``; None when ``exc`` is not
    a storage failure (a decoding error, a bug), which the caller re-raises as it is.

    >>> print(storage_error(PermissionError(13, "Permission denied"), "/data/a.parquet"))
    /data/a.parquet: permission denied (Permission denied); check the permissions of the file and its folders
    >>> storage_error(KeyError("x"), "/data/a.parquet") is None
    True
    """
    if isinstance(exc, DsmError):
        return exc
    if type(exc).__module__.split(".")[0] == "pyarrow":
        return None  # decoding (the formats layer), not storage
    where = redact(what)
    protocol = loc.protocol if loc is not None else protocol_of(what)
    if protocol not in LOCAL_PROTOCOLS:
        from dsm.storage.stores import store_for

        found = store_for(protocol).translate_error(exc, where, loc=loc, elapsed=elapsed)
        if found is not None:
            return found
    if isinstance(exc, ImportError):
        return InputError(f"{where}: a storage backend is missing: {exc}")
    if not isinstance(exc, OSError):
        return None
    return _os_error(exc, where, protocol, loc, elapsed)


def _os_error(
    exc: OSError, where: str, protocol: str, loc: Location | None, elapsed: float | None
) -> DsmError:
    reason = redact(exc.strerror or str(exc) or type(exc).__name__)
    local = protocol in LOCAL_PROTOCOLS
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
        return DatasetNotFound(f"{where}: not found ({reason})", path=where)
    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM):
        fix = (
            "check the permissions of the file and its folders"
            if local
            else "check that the credentials may do this here"
        )
        return StorageError(f"{where}: permission denied ({reason}); {fix}", path=where)
    if isinstance(exc, FileExistsError):
        return ConflictError(f"{where}: already exists; it was not overwritten", path=where)
    if exc.errno in _OUT_OF_SPACE:
        return StorageError(
            f"{where}: no space left ({reason}); free some space or write somewhere else (nothing "
            "half-written was left where a reader would take it for data)",
            path=where,
        )
    if exc.errno == errno.EROFS:
        return StorageError(
            f"{where}: the file system is read-only; use a writable folder (e.g. --registry)", path=where
        )
    if exc.errno in _TOO_MANY_FILES:
        return StorageError(
            f"{where}: too many open files ({reason}); use fewer --workers or raise the limit (ulimit -n)",
            path=where,
        )
    if isinstance(exc, (ConnectionError, TimeoutError)) or exc.errno in _UNREACHABLE:
        return unreachable(where, None, reason, loc=loc, elapsed=elapsed)
    return StorageError(f"{where}: storage failure: {reason}", path=where)


def unreachable(
    where: str, endpoint: str | None, reason: str, *, loc: Location | None, elapsed: float | None
) -> StorageError:
    """The error of a store that could not be reached, saying what was tried: the endpoint, the attempts
    and connect timeout in force, and how long it took to give up."""
    tried = []
    if endpoint:
        parts = urllib.parse.urlsplit(endpoint)
        tried.append(f"endpoint {parts.scheme}://{parts.netloc}" if parts.netloc else f"endpoint {endpoint}")
    if loc is not None and not loc.is_local:
        attempts, timeout = loc.store.retry_settings(loc.store.filesystem_options(loc.options))
        if attempts is not None:
            tried.append(f"{attempts} attempt{'s' if attempts != 1 else ''}")
        if timeout is not None:
            tried.append(f"connect timeout {timeout:g} s")
    if elapsed is not None:
        tried.append(f"gave up after {elapsed:.1f} s")
    return StorageError(
        f"{where}: cannot reach the store ({redact(reason)}; {', '.join(tried) or 'no retry settings'}): "
        "check the endpoint, the network and the store; to wait longer, raise the storage options "
        "attempts and connect_timeout",
        path=where,
    )
