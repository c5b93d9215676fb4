"""Canonical locations: one spelling for one stored file, whatever URL or path named it.

Two contracts can name the same file with different strings: ``/data/x`` and ``/data/./x/``, a symlinked
folder and its target, ``s3a://b/k`` and ``s3://b/k``, ``abfs://c@account.dfs.core.windows.net/p`` and
``az://c/p``. Whatever decides that two versions share a file (``dsm gc``, ``dsm footprint``, the data
policy's allowed locations, deleting a cutover's old data) compares :func:`canonical_location` values,
never location strings.

- local disk: ``file://`` and the real path (symlinks resolved, ``.`` and ``..`` removed);
- S3 (``s3``, ``s3a``): ``s3://BUCKET/KEY`` as s3fs addresses the object;
- Azure Blob (``az``, ``abfs``, ``abfss``): ``az://CONTAINER/BLOB`` as adlfs addresses the blob;
- Google Cloud Storage (``gs``, ``gcs``): ``gs://BUCKET/KEY``;
- anything else: the protocol and the path the filesystem uses.

The account or endpoint a bucket lives in is not part of the value: within one configuration a bucket
name reaches one store, and treating two names as one file can only make dsm keep something, never
delete something it should keep.

>>> canonical_url("memory://data//web/./v1/")
'memory://data/web/v1'
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dsm.storage.location import Location, location

__all__ = ["canonical_location", "canonical_url", "claimed_location", "glob_of", "is_within", "overlaps"]

# Protocols that name the same store, and the name their canonical values use.
_FAMILY = {"s3a": "s3", "abfs": "az", "abfss": "az", "adl": "az", "gcs": "gs", "local": "file"}


def _bucket_key(loc: Location, path: str, scheme: str) -> str:
    split = getattr(loc.fs, "split_path", None)
    if split is None:
        return f"{scheme}://{path.strip('/')}"
    parts = split(path)
    bucket, key = str(parts[0]), str(parts[1] or "")
    key = "/".join(p for p in key.split("/") if p not in ("", "."))
    return f"{scheme}://{bucket}/{key}" if key else f"{scheme}://{bucket}"


def canonical_location(loc: Location, rel: str = "") -> str:
    """The canonical value of ``rel`` under ``loc`` (of ``loc`` itself when ``rel`` is empty).

    >>> from dsm.storage import location
    >>> canonical_location(location("memory://c/a"), "./b//part-0.parquet")
    'memory://c/a/b/part-0.parquet'
    """
    path = loc.path(rel) if rel else loc.root
    if loc.is_local:
        return "file://" + os.path.realpath(path)
    scheme = _FAMILY.get(loc.protocol, loc.protocol)
    if scheme in ("s3", "az", "gs"):
        return _bucket_key(loc, path, scheme)
    normal = posixpath.normpath("/" + path.lstrip("/"))
    return f"{scheme}://{normal.lstrip('/')}"


def canonical_url(url: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """:func:`canonical_location` of a URL or path (no request is made)."""
    return canonical_location(location(url, storage_options))


def is_within(child: str, parent: str) -> bool:
    """Whether canonical value ``child`` is ``parent`` or below it (on a path boundary: ``/a/b`` is
    within ``/a`` but ``/ab`` is not).

    >>> is_within("s3://b/data/x", "s3://b/data"), is_within("s3://b/data2", "s3://b/data")
    (True, False)
    """
    parent = parent.rstrip("/")
    if parent.endswith(":/") or parent.endswith(":"):  # the root of a scheme ("file:///")
        return child.startswith(parent.rstrip("/") + "/")
    return child == parent or child.startswith(parent + "/")


def overlaps(a: str, b: str) -> bool:
    """Whether canonical values ``a`` and ``b`` are the same place or one lies below the other.

    >>> overlaps("file:///data", "file:///data/web/v1"), overlaps("file:///data/a", "file:///data/b")
    (True, False)
    """
    return is_within(a, b) or is_within(b, a)


def glob_of(path: str) -> str:
    """The glob that matches exactly ``path`` (``[``, ``*`` and ``?`` escaped): how a dataset registered
    from one file records that file as its ``source_glob``.

    >>> glob_of("odd[1]*.parquet")
    'odd[[]1][*].parquet'
    """
    return re.sub(r"([*?\[])", r"[\1]", path)


def claimed_location(loc: Location, paths: Sequence[str], pattern: str | None) -> str:
    """The canonical place a dataset at ``loc`` with shard ``paths`` holds: its location, or its one file
    when it was registered from that file alone (``pattern`` is exactly :func:`glob_of` of it)."""
    if (
        pattern
        and len(paths) == 1
        and glob_of(paths[0]) == pattern
        and fnmatch.fnmatchcase(paths[0], pattern)
    ):
        return canonical_location(loc, paths[0])
    return canonical_location(loc)
