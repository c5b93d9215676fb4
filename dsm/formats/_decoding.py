"""Every failure of a format's reader becomes a dsm error naming the shard (private to ``dsm.formats``).

:class:`dsm.formats.base.Format` wraps each reading method of every format class with :func:`guard`, so no
reader path can leak a traceback: a decoding failure of pyarrow, tarfile, json or zlib (``ArrowInvalid``, a
plain ``OSError`` from a damaged Parquet footer, ``RecursionError`` on deeply nested text...) becomes a
:class:`FormatError` naming the shard (exit 2), and a failure of the storage the bytes come from becomes a
:class:`StorageError` (exit 3). The file handle is wrapped so the two can be told apart: an exception raised
by the handle's own ``read``/``seek`` is storage; one raised while decoding what it returned is the data's.
"""

from __future__ import annotations

import functools
import struct
import tarfile
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any

import pyarrow as pa

from dsm.errors import DatasetNotFound, DsmError, FormatError, InputError, StorageError
from dsm.formats._common import describe_exception
from dsm.storage import redact

__all__ = ["DECODING_ERRORS", "GuardedFile", "check_schema_text", "decoding_error", "guard"]

DECODING_ERRORS: tuple[type[BaseException], ...] = (
    pa.ArrowException,
    ValueError,  # also json.JSONDecodeError, UnicodeDecodeError, binascii.Error
    OSError,  # Arrow reports a damaged Parquet footer or compressed page as a plain OSError (no errno)
    EOFError,
    RecursionError,
    OverflowError,
    struct.error,
    tarfile.TarError,
    zlib.error,
)
"""What decoding bad bytes raises in the libraries the formats use."""


class GuardedFile:
    """A proxy of a Python file object that remembers the exception its own I/O methods raised."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.failure: BaseException | None = None

    @classmethod
    def wrap(cls, file: Any) -> Any:
        """``file`` behind a guard (Arrow native files and guarded files are returned as they are)."""
        if isinstance(file, (cls, pa.NativeFile)):
            return file
        return cls(file)

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._raw, name)(*args)
        except Exception as exc:
            self.failure = exc
            raise

    def read(self, size: int = -1) -> bytes:
        return self._call("read", size)  # type: ignore[no-any-return]

    def readinto(self, buffer: Any) -> int:
        readinto = getattr(self._raw, "readinto", None)
        if readinto is None:
            data = self.read(len(memoryview(buffer)))
            memoryview(buffer)[: len(data)] = data
            return len(data)
        return self._call("readinto", buffer)  # type: ignore[no-any-return]

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._call("seek", offset, whence)  # type: ignore[no-any-return]

    def tell(self) -> int:
        return self._call("tell")  # type: ignore[no-any-return]

    def seekable(self) -> bool:
        return bool(getattr(self._raw, "seekable", lambda: False)())

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(getattr(self._raw, "closed", False))

    def close(self) -> None:
        self._raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def decoding_error(format_name: str, shard: str, file: Any, exc: BaseException) -> DsmError | None:
    """The dsm error for ``exc`` raised while reading ``shard``; None when ``exc`` must pass unchanged."""
    if isinstance(exc, DsmError):
        return None
    # Whatever escapes after the handle itself failed is that failure (pyarrow may re-raise it changed).
    from_storage = isinstance(file, GuardedFile) and file.failure is not None
    if from_storage or (isinstance(exc, OSError) and exc.errno is not None):
        if isinstance(exc, FileNotFoundError):
            return DatasetNotFound(f"shard {shard}: vanished while being read ({redact(str(exc))})")
        return StorageError(f"shard {shard}: reading failed: {redact(describe_exception(exc))}")
    if isinstance(exc, RecursionError):
        return FormatError(f"shard {shard}: not readable as {format_name}: values are nested too deeply")
    if isinstance(exc, DECODING_ERRORS):
        return FormatError(f"shard {shard}: not readable as {format_name} ({describe_exception(exc)})")
    return None


def check_schema_text(schema: pa.Schema) -> pa.Schema:
    """``schema`` once every name and type parameter in it decodes as text (else ``ValueError``).

    Arrow decodes a file's field names and timezones only when they are first asked for, so a damaged
    footer would otherwise fail later, outside the reader, wherever the schema is first printed or named.
    """
    try:
        kinds = [field.type for field in schema if field.name is not None]
        while kinds:
            kind = kinds.pop()
            if isinstance(kind, pa.TimestampType):
                _ = kind.tz
            elif isinstance(kind, pa.DictionaryType):
                kinds.append(kind.value_type)
            kinds.extend(kind.field(i).type for i in range(kind.num_fields) if kind.field(i).name is not None)
    except UnicodeDecodeError:
        raise ValueError("its schema holds a field name or timezone that is not UTF-8") from None
    return schema


def _checked(result: Any) -> Any:
    if isinstance(result, pa.Schema):
        check_schema_text(result)
    elif isinstance(result, (pa.RecordBatch, pa.Table)):
        check_schema_text(result.schema)
    return result


def _check_batch_rows(batch_rows: Any, shard: str) -> None:
    if batch_rows is not None and (
        isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1
    ):
        raise InputError(
            f"shard {shard}: batch_rows must be a whole number of at least 1, got {batch_rows!r}"
        )


def guard(method: Callable[..., Any], *, iterates: bool) -> Callable[..., Any]:
    """``method`` (a reading method of a format, ``(self, file, ..., shard=...)``) with its failures
    turned into dsm errors naming the shard; methods that return an iterator (``iterates``) are guarded
    while it is iterated."""
    if getattr(method, "_dsm_guarded", False):
        return method

    if iterates:

        @functools.wraps(method)
        def iterate(self: Any, file: Any, *args: Any, shard: str, **kwargs: Any) -> Iterator[Any]:
            _check_batch_rows(kwargs.get("batch_rows"), shard)
            guarded = GuardedFile.wrap(file)
            try:
                items = iter(method(self, guarded, *args, shard=shard, **kwargs))
                try:
                    for item in items:  # the first batch's schema is the file's: the rest share it
                        yield _checked(item)
                        break
                    yield from items
                finally:
                    getattr(items, "close", lambda: None)()  # a reader stopped early closes its file now
            except Exception as exc:
                error = decoding_error(self.name, shard, guarded, exc)
                if error is None:
                    raise
                raise error from None

        iterate._dsm_guarded = True  # type: ignore[attr-defined]
        return iterate

    @functools.wraps(method)
    def call(self: Any, file: Any, *args: Any, shard: str, **kwargs: Any) -> Any:
        guarded = GuardedFile.wrap(file)
        try:
            return _checked(method(self, guarded, *args, shard=shard, **kwargs))
        except Exception as exc:
            error = decoding_error(self.name, shard, guarded, exc)
            if error is None:
                raise
            raise error from None

    call._dsm_guarded = True  # type: ignore[attr-defined]
    return call
