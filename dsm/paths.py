"""Paths inside a location: the one rule for a shard path, a stored file's name below its root, and a
WebDataset member name.

Such a path is relative and stays below its root: not empty, no leading ``/`` (nor a drive such as
``C:``), no ``..`` part, no NUL. Contracts refuse other shard paths when they are written or read,
:class:`dsm.storage.Location` refuses them before any request, and the WebDataset format refuses such
member names (a tar unpacked by another tool would write outside its folder).

>>> path_problem("train/part-00000.parquet") is None
True
>>> path_problem("../other/part-00000.parquet")
"has a '..' part: it would leave its location"
"""

from __future__ import annotations

import re

__all__ = ["path_problem"]

_DRIVE = re.compile(r"^[A-Za-z]:[/\\]")


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a relative path that stays below its root, or None when it is one."""
    if not path:
        return "is empty"
    if "\0" in path:
        return "holds a NUL character"
    if path.startswith("/") or _DRIVE.match(path):
        return "is absolute: paths are relative to their location"
    if ".." in path.split("/"):
        return "has a '..' part: it would leave its location"
    return None
