"""Sizes, rates, durations, counts and times as people write them (``256MB``, ``1.5GiB``, ``64k``,
``200MB/s``, ``7d``, ``1,2,4``), parsed in one place; and the same units written back for people.

One rule everywhere in dsm: ``KB``, ``MB``, ``GB``, ``TB``, ``PB`` and bare ``k``, ``M``, ``G``... are decimal
(powers of 1000); ``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB`` are binary (powers of 1024).

>>> parse_size("256MB"), parse_size("8MiB"), parse_size("1.5k"), parse_size(4096)
(256000000, 8388608, 1500, 4096)
>>> parse_rate("200MB/s"), parse_duration("7d"), parse_workers("4,1,2")
(200000000.0, 604800.0, (1, 2, 4))
>>> format_bytes(1_500_000), format_si(1.05e9, "B"), format_seconds(0.00125)
('1.5 MB', '1.05GB', '1.25 ms')
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dsm.errors import InputError

__all__ = [
    "MAX_WORKERS",
    "format_bytes",
    "format_count",
    "format_duration",
    "format_money",
    "format_rate",
    "format_seconds",
    "format_si",
    "format_time",
    "parse_duration",
    "parse_number",
    "parse_rate",
    "parse_size",
    "parse_whole",
    "parse_workers",
    "utc_now_text",
]

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


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(value: str | float | int, *, what: str = "retain") -> float:
    """Seconds from ``"7d"``, ``"12h"``, ``"30m"``, ``"45s"``, ``"2w"`` or a number of seconds.

    >>> parse_duration("7d"), parse_duration(0)
    (604800.0, 0.0)
    """
    if isinstance(value, bool):
        raise InputError(f"{what}: {value!r} is not a duration (write it like 7d, 12h, 30m or 0)")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise InputError(f"{what}: {value!r} is not a duration (write it like 7d, 12h, 30m or 0)")
        seconds = float(match.group(1)) * _SECONDS[(match.group(2) or "s").lower()]
    if seconds < 0:
        raise InputError(f"{what}: {value!r} must not be negative")
    return seconds


def parse_number(value: Any, what: str, *, minimum: float, inclusive: bool = True) -> float:
    """A finite number of at least ``minimum`` (more than it, unless ``inclusive``), from a number or text."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: {value!r} is not a number") from None
    if not math.isfinite(number) or number < minimum or (not inclusive and number == minimum):
        bound = f"at least {minimum:g}" if inclusive else f"more than {minimum:g}"
        raise InputError(f"{what}: {value!r} must be {bound}")
    return number


def parse_whole(value: Any, what: str, *, minimum: int) -> int:
    """A whole number of at least ``minimum``, from an int, a whole float or text (never a bool)."""
    whole_float = isinstance(value, float) and value.is_integer()
    if isinstance(value, bool) or not (isinstance(value, (int, str)) or whole_float):
        raise InputError(f"{what}: {value!r} is not a whole number")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: {value!r} is not a whole number") from None
    if number < minimum:
        raise InputError(f"{what}: {value!r} must be at least {minimum}")
    return number


MAX_WORKERS = 4096
"""The most workers (threads or processes) one dsm process starts: a count beyond it is refused before
anything starts (it would exhaust the machine before measuring or doing anything)."""


def parse_workers(value: int | str | Sequence[int]) -> tuple[int, ...]:
    """Worker counts from ``4``, ``"1,2,4,8"`` or ``[1, 2, 4]``: sorted, without duplicates, each in
    1..:data:`MAX_WORKERS`.

    >>> parse_workers("4,1,2")
    (1, 2, 4)
    """
    if isinstance(value, bool):
        raise InputError(f"workers: expected a count or a list such as 1,2,4; got {value!r}")
    if isinstance(value, int):
        items: list[Any] = [value]
    elif isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise InputError(f"workers: expected a count or a list such as 1,2,4; got {value!r}")
    counts = []
    for item in items:
        try:
            count = int(item)
        except (TypeError, ValueError):
            raise InputError(
                f"workers: {item!r} is not a whole number (give a count or a list such as 1,2,4)"
            ) from None
        if count < 1 or str(count) != str(item).strip():
            raise InputError(f"workers: {item!r} must be a whole number of at least 1")
        if count > MAX_WORKERS:
            raise InputError(f"workers: {count:,} is more than {MAX_WORKERS:,} (the most one process starts)")
        counts.append(count)
    if not counts:
        raise InputError("workers: give at least one worker count, e.g. 4 or 1,2,4,8")
    return tuple(sorted(set(counts)))


def format_time(moment: datetime) -> str:
    """``2026-11-30T10:00:00.123Z``: the timestamps of journal records and leases (UTC, milliseconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def utc_now_text() -> str:
    """Now in UTC to the second, as contracts and statuses record it: ``2026-11-30T10:00:00Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the same units written for people ----------------------------------------------------------------


def format_bytes(n: int | float | None) -> str:
    """``1.5 MB``: bytes with a decimal prefix (``-`` for None)."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} PB"


def format_si(value: float | None, unit: str = "") -> str:
    """``1.05G``-style: three digits and a decimal prefix (a table's column header carries the unit)."""
    if value is None:
        return "-"
    for prefix in ("", "k", "M", "G", "T"):
        if abs(value) < 999.5 or prefix == "T":
            return f"{value:.3g}{prefix}{unit}"
        value /= 1000
    return f"{value:.3g}P{unit}"


def format_rate(value: float | None, unit: str = "B") -> str:
    """``1.3 GB/s``-style text for a per-second figure (decimal prefixes)."""
    if value is None:
        return "-"
    for prefix in ("", "k", "M", "G", "T"):
        if abs(value) < 1000 or prefix == "T":
            return f"{value:.3g} {prefix}{unit}/s" if prefix or unit else f"{value:.3g}/s"
        value /= 1000
    return f"{value:.3g} P{unit}/s"


def format_count(value: float | None) -> str:
    """``12.3k``: a count with a decimal prefix."""
    if value is None:
        return "-"
    for prefix in ("", "k", "M", "G"):
        if abs(value) < 1000 or prefix == "G":
            return f"{value:.3g}{prefix}" if prefix else f"{value:.3g}"
        value /= 1000
    return f"{value:.3g}T"


def format_seconds(value: float | None) -> str:
    """``3.9 µs``, ``1.25 ms``, ``2.10 s``: a measured time, three digits."""
    if value is None:
        return "-"
    if value == 0:
        return "0 s"
    if value < 1e-6:
        return f"{value * 1e9:.3g} ns"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def format_duration(value: float | None) -> str:
    """``850 ms``, ``12.5 s``, ``4.2 min``, ``3.1 h``: a planned or elapsed span of work."""
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def format_money(value: float, currency: str) -> str:
    """``1,234.50 USD``; amounts under a cent keep four decimals (``0.0004 USD``)."""
    return f"{value:,.2f} {currency}" if value >= 0.01 or value == 0 else f"{value:.4f} {currency}"
