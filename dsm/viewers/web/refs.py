"""Dataset references in URLs: ``NAME``, ``NAME@VERSION`` or ``NAME@ALIAS``, never a file path.

``dsm`` commands also accept the path of a contract file as a reference; a URL must not, or a request could
make the server read any YAML file it can reach. :func:`url_reference` accepts exactly the registry's name
rule (letters, digits, ``.``, ``_`` and ``-``, not starting with a dot), and refuses everything else before
the registry is asked.

>>> url_reference("web-text@prod")
('web-text', 'prod')
>>> url_reference("../etc/passwd")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dsm.errors.DatasetNotFound: '../etc/passwd' is not a dataset reference...
"""

from __future__ import annotations

import re

from dsm.errors import DatasetNotFound

__all__ = ["pinned", "url_reference"]

_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}"
_REFERENCE = re.compile(rf"^({_PART})(?:@({_PART}))?$")


def url_reference(text: str) -> tuple[str, str | None]:
    """``(name, selector)`` of a reference taken from a URL; :class:`DatasetNotFound` (a 404) for anything
    that is not ``NAME[@VERSION|@ALIAS]``: paths, URLs, dot segments, empty parts."""
    found = _REFERENCE.match(text)
    if found is None or ".." in text:
        raise DatasetNotFound(
            f"{text[:200]!r} is not a dataset reference: URLs name datasets as NAME, NAME@VERSION or "
            "NAME@ALIAS (never a file)"
        )
    return found.group(1), found.group(2)


def pinned(name: str, version: int) -> str:
    """The reference that always names this version (what deep links use: an alias may move)."""
    return f"{name}@{version}"
