"""Storage: every path dsm touches goes through fsspec, addressed by URL.

A :class:`Location` is a filesystem plus a root path. Writes that readers may see are atomic: a file is
written under a temporary name and renamed (local disk), or uploaded as one object (object stores, where an
object appears only when its upload completes). ``create_exclusive`` never overwrites.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from dsm.errors import ConflictError, DatasetNotFound, InputError, StorageError

__all__ = [
    "FileInfo",
    "Location",
    "TEMP_MARKER",
    "compare_and_swap",
    "is_temporary",
    "location",
    "redact",
    "storage_errors",
    "storage_options_from_env",
]

TEMP_MARKER = ".dsm-tmp-"
"""Infix of every temporary name dsm writes; such files are never data and are skipped by scans."""

_INSTALL_HINTS = {
    "s3": "pip install 'dsm[s3]' (s3fs)",
    "s3a": "pip install 'dsm[s3]' (s3fs)",
    "az": "pip install 'dsm[azure]' (adlfs)",
    "abfs": "pip install 'dsm[azure]' (adlfs)",
    "abfss": "pip install 'dsm[azure]' (adlfs)",
    "gs": "pip install gcsfs",
    "gcs": "pip install gcsfs",
}

_SECRET_KEYS = re.compile(
    r"(secret|password|passwd|token|key|sig|credential|connection_string|sas)", re.IGNORECASE
)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:\s]*):(?P<pw>[^/@\s]+)@", re.I)
_QUERY_SECRET = re.compile(r"(?P<k>[?&](?:sig|skoid|sktid|token|key|code|password)=)(?P<v>[^&\s\"']+)", re.I)
_CONN_SECRET = re.compile(r"(?P<k>(?:AccountKey|SharedAccessSignature|Password)=)(?P<v>[^;\s\"']+)", re.I)

_registered_secrets: set[str] = set()


def remember_secret(value: str) -> None:
    """Make ``redact`` hide this exact value wherever it appears (used for option values)."""
    if value and len(value) >= 4:
        _registered_secrets.add(value)


def redact(text: str) -> str:
    """Replace credentials in ``text`` (URL passwords, SAS signatures, account keys, known option values)."""
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m['k']}***", text)
    text = _CONN_SECRET.sub(lambda m: f"{m['k']}***", text)
    for secret in sorted(_registered_secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def storage_options_from_env() -> dict[str, Any]:
    """Options from ``DSM_STORAGE_OPTIONS`` (a JSON object), or ``{}``."""
    raw = os.environ.get("DSM_STORAGE_OPTIONS", "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"DSM_STORAGE_OPTIONS is not valid JSON ({exc.msg}); give a JSON object") from None
    if not isinstance(value, dict):
        raise InputError("DSM_STORAGE_OPTIONS must be a JSON object of filesystem options")
    return value


def _remember_option_secrets(options: Mapping[str, Any]) -> None:
    for key, value in options.items():
        if isinstance(value, str) and _SECRET_KEYS.search(key):
            remember_secret(value)
        elif isinstance(value, Mapping):
            _remember_option_secrets(value)


@contextlib.contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Turn filesystem exceptions into dsm errors that name ``what`` (a path or URL, redacted)."""
    try:
        yield
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise DatasetNotFound(f"{redact(what)}: not found ({redact(str(exc))})") from None
    except PermissionError as exc:
        raise StorageError(f"{redact(what)}: permission denied ({redact(str(exc))})") from None
    except ImportError as exc:
        raise InputError(f"{redact(what)}: a storage backend is missing: {exc}") from None
    except OSError as exc:
        if isinstance(exc, StorageError):
            raise
        raise StorageError(f"{redact(what)}: storage failure: {redact(str(exc))}") from None


@dataclass(frozen=True, kw_only=True)
class FileInfo:
    """A file under a location: its path relative to the root, and its size in bytes."""

    path: str
    size: int


def is_temporary(path: str) -> bool:
    return TEMP_MARKER in posixpath.basename(path)


@dataclass(frozen=True, kw_only=True)
class Location:
    """A folder (or object prefix) at a URL. ``url`` is what the user gave, with secrets redacted on output."""

    url: str
    fs: Any
    root: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> str:
        proto = self.fs.protocol
        return proto[0] if isinstance(proto, (tuple, list)) else str(proto)

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    def path(self, rel: str = "") -> str:
        """The filesystem path of ``rel`` under the root."""
        if not rel:
            return self.root
        return posixpath.join(self.root, rel) if self.root else rel

    def url_of(self, rel: str) -> str:
        """A URL for ``rel`` under this location (for messages and contracts)."""
        base = self.url.rstrip("/")
        return f"{base}/{rel}" if rel else base

    def child(self, rel: str) -> Location:
        return Location(url=self.url_of(rel), fs=self.fs, root=self.path(rel), options=self.options)

    def exists(self, rel: str = "") -> bool:
        with storage_errors(self.url_of(rel)):
            return bool(self.fs.exists(self.path(rel)))

    def isdir(self, rel: str = "") -> bool:
        with storage_errors(self.url_of(rel)):
            return bool(self.fs.isdir(self.path(rel)))

    def size(self, rel: str) -> int:
        with storage_errors(self.url_of(rel)):
            return int(self.fs.size(self.path(rel)))

    def list_files(self, *, recursive: bool = True) -> list[FileInfo]:
        """Every file below the root (not temporary ones), sorted by path; ``[]`` when the root is absent."""
        with storage_errors(self.url):
            if not self.fs.exists(self.root):
                return []
            if not self.fs.isdir(self.root):
                info = self.fs.info(self.root)
                return [FileInfo(path=posixpath.basename(self.root), size=int(info["size"]))]
            found = self.fs.find(self.root, detail=True, withdirs=False, maxdepth=None if recursive else 1)
        files = []
        prefix = self.root.rstrip("/") + "/"
        for full, info in found.items():
            if info.get("type", "file") != "file":
                continue
            rel = full[len(prefix) :] if full.startswith(prefix) else posixpath.basename(full)
            if is_temporary(rel):
                continue
            files.append(FileInfo(path=rel, size=int(info.get("size") or 0)))
        return sorted(files, key=lambda f: f.path)

    def open(self, rel: str, mode: str = "rb", **kwargs: Any) -> IO[Any]:
        with storage_errors(self.url_of(rel)):
            return self.fs.open(self.path(rel), mode, **kwargs)  # type: ignore[no-any-return]

    def read_bytes(self, rel: str) -> bytes:
        with storage_errors(self.url_of(rel)):
            return bytes(self.fs.cat_file(self.path(rel)))

    def makedirs(self, rel: str = "") -> None:
        with storage_errors(self.url_of(rel)):
            self.fs.makedirs(self.path(rel), exist_ok=True)

    def temp_name(self, rel: str) -> str:
        head, tail = posixpath.split(rel)
        return posixpath.join(head, f"{TEMP_MARKER}{uuid.uuid4().hex[:12]}-{tail}")

    @contextlib.contextmanager
    def atomic_writer(self, rel: str) -> Iterator[IO[bytes]]:
        """Write ``rel`` so that readers see either nothing or the whole file.

        The bytes go to a temporary name, renamed over ``rel`` when the block ends without error; on error
        the temporary file is removed and ``rel`` is untouched.
        """
        tmp = self.temp_name(rel)
        parent = posixpath.dirname(self.path(rel))
        with storage_errors(self.url_of(rel)):
            if parent and self.is_local:
                self.fs.makedirs(parent, exist_ok=True)
            handle = self.fs.open(self.path(tmp), "wb")
        try:
            with handle:
                yield handle
            with storage_errors(self.url_of(rel)):
                self.fs.mv(self.path(tmp), self.path(rel))
        except BaseException:
            with contextlib.suppress(Exception):
                self.fs.rm(self.path(tmp))
            raise

    def write_bytes_atomic(self, rel: str, data: bytes) -> None:
        with self.atomic_writer(rel) as handle:
            handle.write(data)

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Create ``rel`` with ``data``; raise :class:`ConflictError` if it exists. Never overwrites."""
        if self.is_local:
            final = self.path(rel)
            os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
            tmp = self.path(self.temp_name(rel))
            with storage_errors(self.url_of(rel)):
                with open(tmp, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                try:
                    os.link(tmp, final)  # link() fails if the name exists: an atomic create-if-absent
                except FileExistsError:
                    raise ConflictError(f"{self.url_of(rel)} already exists; it was not overwritten") from None
                finally:
                    os.unlink(tmp)
            return
        with storage_errors(self.url_of(rel)):
            if self.fs.exists(self.path(rel)):
                raise ConflictError(f"{redact(self.url_of(rel))} already exists; it was not overwritten")
            self.fs.pipe_file(self.path(rel), data)

    def remove(self, rel: str) -> None:
        with storage_errors(self.url_of(rel)):
            self.fs.rm(self.path(rel))


def location(url: str, storage_options: Mapping[str, Any] | None = None) -> Location:
    """The :class:`Location` for ``url`` (any fsspec URL or local path).

    Options come from ``DSM_STORAGE_OPTIONS`` (JSON) overlaid with ``storage_options``; credentials are
    left to each backend's own mechanisms (environment, profiles, connection strings).
    """
    options = {**storage_options_from_env(), **(storage_options or {})}
    _remember_option_secrets(options)
    url = str(url)
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    try:
        fs, root = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        hint = _INSTALL_HINTS.get(protocol, f"install the fsspec backend for {protocol}://")
        raise InputError(f"{redact(url)}: no filesystem for {protocol}:// is installed ({hint})") from exc
    except ValueError as exc:
        if "Protocol not known" in str(exc):
            raise InputError(f"{redact(url)}: unknown storage protocol {protocol}://") from None
        raise InputError(f"{redact(url)}: {redact(str(exc))}") from None
    if isinstance(fs, LocalFileSystem):
        root = os.path.abspath(root)
    return Location(url=url, fs=fs, root=root.rstrip("/") if root not in ("/", "") else root, options=options)


def compare_and_swap(loc: Location, rel: str, expected: bytes | None, new: bytes) -> None:
    """Replace ``rel`` with ``new`` only if it still holds ``expected`` (``None``: absent).

    On local disk a lock file serialises writers and the swap is an atomic rename. Other stores are
    handled by ``dsm.object_store`` where conditional writes exist; elsewhere the check and the write are
    two steps and a racing writer could slip between them.
    """
    if loc.is_local:
        import fcntl

        target = loc.path(rel)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with storage_errors(loc.url_of(rel)), open(target + ".lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                current = open(target, "rb").read() if os.path.exists(target) else None  # noqa: SIM115
                if current != expected:
                    raise ConflictError(f"{loc.url_of(rel)} was changed by another writer; retry")
                loc.write_bytes_atomic(rel, new)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        return
    with storage_errors(loc.url_of(rel)):
        current = loc.fs.cat_file(loc.path(rel)) if loc.fs.exists(loc.path(rel)) else None
        if current != expected:
            raise ConflictError(f"{redact(loc.url_of(rel))} was changed by another writer; retry")
        loc.fs.pipe_file(loc.path(rel), new)
