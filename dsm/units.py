"""Sizes and rates as people write them: ``256MB``, ``1.5GiB``, ``64k``, ``200MB/s``.

One rule everywhere in dsm: ``KB``, ``MB``, ``GB``, ``TB``, ``PB`` and bare ``k``, ``M``, ``G``... are decimal
(powers of 1000); ``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB`` are binary (powers of 1024).

>>> parse_size("256MB"), parse_size("8MiB"), parse_size("1.5k"), parse_size(4096)
(256000000, 8388608, 1500, 4096)
>>> parse_rate("200MB/s")
200000000.0
"""

from __future__ import annotations

import math
import re

from dsm.errors import InputError

__all__ = ["parse_rate", "parse_size"]

_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[a-z]*)\s*$", re.IGNORECASE)
_PREFIXES = "kmgtp"


def _unit_scale(unit: str) -> int | None:
    unit = unit.lower()
    if unit in ("", "b"):
        return 1
    prefix, rest = unit[0], unit[1:]
    if prefix not in _PREFIXES or rest not in ("", "b", "ib"):
        return None
    power = _PREFIXES.index(prefix) + 1
    return 1024**power if rest == "ib" else 1000**power


def _bytes(text: str) -> float | None:
    match = _SIZE.match(text)
    scale = _unit_scale(match["unit"]) if match else None
    return None if match is None or scale is None else float(match["num"]) * scale


def parse_size(value: int | float | str, *, what: str = "size") -> int:
    """Bytes from a number of bytes or a size such as ``256MB``, ``1.5GiB`` or ``64k``."""
    if isinstance(value, bool):
        raise InputError(f"{what}: expected a size such as 256MB, got {value!r}")
    number = float(value) if isinstance(value, (int, float)) else _bytes(str(value))
    if number is None:
        raise InputError(f"{what}: {value!r} is not a size (examples: 4096, 64KiB, 8MiB, 256MB, 1GB)")
    if not math.isfinite(number) or number < 1:
        raise InputError(f"{what}: {value!r} must be at least 1 byte")
    return int(number)


def parse_rate(value: int | float | str, *, what: str = "rate") -> float:
    """Bytes per second from ``2e8``, ``"200MB/s"``, ``"1.5GiB/s"`` or ``"200MB"`` (per second implied)."""
    if isinstance(value, bool):
        raise InputError(f"{what}: expected a rate such as 200MB/s, got {value!r}")
    if isinstance(value, (int, float)):
        rate: float | None = float(value)
    else:
        text = str(value).strip()
        rate = _bytes(text[:-2] if text.lower().endswith("/s") else text)
    if rate is None:
        raise InputError(f"{what}: {value!r} is not a rate (examples: 200MB/s, 1.5GiB/s, 100000000)")
    if not math.isfinite(rate) or rate <= 0:
        raise InputError(f"{what}: {value!r} must be a positive number of bytes per second")
    return rate
