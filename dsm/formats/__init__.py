"""Formats by name: a registry that imports each format lazily and refuses duplicate names.

>>> from dsm.formats import get_format
>>> get_format("parquet", compression="zstd").name
'parquet'
>>> detect_format("part-0.jsonl.gz"), detect_compression("part-0.jsonl.gz")
('jsonl', 'gzip')
"""

from __future__ import annotations

import importlib
import posixpath
from typing import TYPE_CHECKING, Any

from dsm.errors import InputError
from dsm.formats._common import STREAM_SUFFIXES
from dsm.formats._storage import Storage, convert_batch
from dsm.formats.base import DEFAULT_BATCH_ROWS, Format, FormatWriter
from dsm.formats.index import ShardIndex

if TYPE_CHECKING:
    from dsm.contract import Contract

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "STREAM_SUFFIXES",
    "Format",
    "FormatWriter",
    "ShardIndex",
    "Storage",
    "contract_format",
    "convert_batch",
    "detect_compression",
    "detect_format",
    "format_names",
    "get_format",
    "register_format",
]


def _compressed(*extensions: str) -> tuple[str, ...]:
    """``extensions`` and each of them with a whole-file compression suffix (``.jsonl.gz``)."""
    return (*extensions, *(e + suffix for e in extensions for suffix in STREAM_SUFFIXES.values()))


# name -> ("module:Class", extensions). Modules are imported on first use.
_KNOWN: dict[str, tuple[str, tuple[str, ...]]] = {
    "parquet": ("dsm.formats.parquet:ParquetFormat", (".parquet", ".pq")),
    "jsonl": ("dsm.formats.jsonl:JsonlFormat", _compressed(".jsonl", ".ndjson")),
    "csv": ("dsm.formats.csv:CsvFormat", _compressed(".csv")),
    "arrow": ("dsm.formats.arrow:ArrowFormat", (".arrow", ".feather", ".ipc")),
    "webdataset": ("dsm.formats.webdataset:WebDatasetFormat", (*_compressed(".tar"), ".tgz")),
}
_COMPRESSED_ALIASES = {".tgz": "gzip"}
_LOADED: dict[str, type[Format]] = {}


def register_format(cls: type[Format]) -> type[Format]:
    """Add a format class (usable as a decorator). A name that is taken is refused."""
    if cls.name in _KNOWN or cls.name in _LOADED:
        raise InputError(f"a format named {cls.name!r} is already registered")
    _LOADED[cls.name] = cls
    return cls


def format_names() -> list[str]:
    return sorted({*_KNOWN, *_LOADED})


def _format_class(name: str) -> type[Format]:
    if name in _LOADED:
        return _LOADED[name]
    if name not in _KNOWN:
        raise InputError(f"unknown format {name!r}; known formats: {', '.join(format_names())}")
    target, _ = _KNOWN[name]
    module_name, class_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"format {name!r} needs a package that is not installed: {exc}") from exc
    cls: type[Format] = getattr(module, class_name)
    _LOADED[name] = cls
    return cls


def get_format(name: str, **options: Any) -> Format:
    """An instance of the format ``name`` with its keyword-only write ``options``."""
    cls = _format_class(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise InputError(f"format {name!r} does not take these options: {exc}") from None


def contract_format(contract: Contract) -> Format:
    """The format instance that reads ``contract``'s shards: its format with its recorded options (a
    compressed JSONL or CSV dataset is read with its codec everywhere: register, verify, rewrites, readers).
    """
    return get_format(contract.format, **dict(contract.format_options))


def detect_compression(path: str) -> str | None:
    """The whole-file compression a shard's name says (``.jsonl.gz`` -> ``gzip``, ``.tgz`` -> ``gzip``)."""
    base = posixpath.basename(path).lower()
    for suffix, codec in _COMPRESSED_ALIASES.items():
        if base.endswith(suffix):
            return codec
    for codec, suffix in STREAM_SUFFIXES.items():
        if base.endswith(suffix):
            return codec
    return None


def detect_format(path: str) -> str | None:
    """The format name for a file path by its extension, or ``None``."""
    base = posixpath.basename(path).lower()
    best: tuple[int, str] | None = None
    for name, (_, extensions) in _KNOWN.items():
        for ext in extensions:
            if base.endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), name)
    for name, cls in _LOADED.items():
        for ext in cls.extensions:
            if base.endswith(ext) and (best is None or len(ext) > best[0]):
                best = (len(ext), name)
    return best[1] if best else None
