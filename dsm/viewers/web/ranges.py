"""HTTP ``Range`` requests on a media value (RFC 9110, section 14): one byte range, or the whole value.

A single range is answered 206 with ``Content-Range``; a range past the end is 416 with ``bytes */SIZE``; a
header that does not parse, or asks for several ranges, is answered with the whole value (200), as the RFC
allows. The answer is streamed in chunks (see :mod:`dsm.viewers.web.media`), so an open-ended range
(``bytes=0-``, what media players send first) never holds a whole video in memory.

>>> byte_range("bytes=10-19", 100)
(10, 20)
>>> byte_range("bytes=-5", 100)
(95, 100)
>>> byte_range("items=1-2", 100) is None
True
"""

from __future__ import annotations

import re

from dsm.errors import InputError

__all__ = ["RangeNotSatisfiable", "byte_range"]

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class RangeNotSatisfiable(InputError):
    """A range that starts past the end of the value (answered 416)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the range starts past the end of the value ({size} bytes)")
        self.size = size


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(start, end)`` (end exclusive) of the one range ``header`` asks for, or None for the whole value.

    Raises :class:`RangeNotSatisfiable` when the range cannot be served from ``size`` bytes."""
    if not header or "," in header:
        return None
    found = _RANGE.match(header)
    if found is None:
        return None
    first, last = found.group(1), found.group(2)
    if not first and not last:
        return None
    if not first:  # a suffix: the last N bytes
        count = int(last)
        if count == 0:
            raise RangeNotSatisfiable(size)
        return max(0, size - count), size
    start = int(first)
    if start >= size:
        raise RangeNotSatisfiable(size)
    if last:
        end = int(last) + 1
        if end <= start:
            return None  # an invalid range is ignored: the whole value
        return start, min(end, size)
    return start, size
