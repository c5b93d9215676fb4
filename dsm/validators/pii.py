"""Likely personal data in fields nobody classified: e-mail addresses, phone numbers, payment card numbers.

``dsm register --scan-pii`` samples rows and runs :func:`scan_batches` over every string value of every
field that has no ``classification`` (nested lists and structs included). A finding names the field, the
kind and how many sampled values matched; the values themselves are never kept, returned or printed.

- e-mail: ``local@domain.tld``;
- phone: ``+`` and 8 to 15 digits (E.164, separators allowed), or the North American ``(555) 123-4567``
  and ``555-123-4567`` layouts;
- card: 13 to 19 digits (spaces or dashes between groups allowed), starting 2 to 6 as the card networks
  do, that pass the Luhn check and are not one repeated digit.

>>> import pyarrow as pa
>>> batch = pa.record_batch({"note": ["mail ann@example.com", "card 4111 1111 1111 1111", "hi"]})
>>> [(f.field, f.kind, f.count) for f in scan_batches([batch], classified=set())]
[('note', 'card', 1), ('note', 'email', 1)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from dsm.formats import Format
    from dsm.storage import Location

__all__ = ["KINDS", "SAMPLE_ROWS", "PiiFinding", "PiiScan", "luhn_valid", "scan_batches", "scan_shards"]

KINDS = ("card", "email", "phone")
SAMPLE_ROWS = 1000
"""Rows :func:`scan_shards` samples: the first rows of up to four shards spread over the dataset."""

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b")
_PHONE = re.compile(
    r"(?<![\w+])\+[1-9](?:[ .-]?\d){7,14}(?!\d)"  # E.164, with separators
    r"|(?<![\d(])\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}(?!\d)"  # (555) 123-4567
    r"|(?<![\d-])\d{3}[.-]\d{3}[.-]\d{4}(?![\d-])"  # 555-123-4567
)
_CARD = re.compile(r"(?<![\d-])[2-6]\d{3}(?:[ -]?\d){9,15}(?![\d-])")


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a string of digits (card numbers pass it).

    >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
    (True, False)
    """
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _has_card(text: str) -> bool:
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group(0))
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_valid(digits):
            return True
    return False


_DETECTORS = {
    "card": _has_card,
    "email": lambda text: _EMAIL.search(text) is not None,
    "phone": lambda text: _PHONE.search(text) is not None,
}


@dataclass(frozen=True, kw_only=True)
class PiiFinding:
    """``count`` of the ``sampled`` string values of ``field`` (a dotted path for nested fields) look like
    ``kind`` (``email``, ``phone``, ``card``). Never holds a value."""

    field: str
    kind: str
    count: int
    sampled: int

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "kind": self.kind, "count": self.count, "sampled": self.sampled}


def _strings(array: pa.Array, path: str) -> Iterator[tuple[str, list[str]]]:
    """(path, the non-null string values) of every string column inside ``array``."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        yield from _strings(array.dictionary_decode(), path)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        yield path, [v for v in array.to_pylist() if v]
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        yield from _strings(array.flatten(), path)
    elif pa.types.is_struct(kind):
        for i in range(kind.num_fields):
            yield from _strings(array.field(i), f"{path}.{kind.field(i).name}")
    elif pa.types.is_map(kind):
        yield from _strings(array.keys, f"{path}.key")
        yield from _strings(array.items, f"{path}.value")


def scan_batches(batches: Iterable[pa.RecordBatch], *, classified: set[str]) -> list[PiiFinding]:
    """Findings over the string values in ``batches``, for the top-level fields not in ``classified``;
    sorted by field, then kind."""
    counts: dict[tuple[str, str], int] = {}
    sampled: dict[str, int] = {}
    for batch in batches:
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if name in classified:
                continue
            for path, values in _strings(column, name):
                sampled[path] = sampled.get(path, 0) + len(values)
                for kind, detect in _DETECTORS.items():
                    hits = sum(1 for v in values if detect(v))
                    if hits:
                        counts[(path, kind)] = counts.get((path, kind), 0) + hits
    return [
        PiiFinding(field=path, kind=kind, count=n, sampled=sampled[path])
        for (path, kind), n in sorted(counts.items())
    ]


@dataclass(frozen=True, kw_only=True)
class PiiScan:
    """What :func:`scan_shards` sampled (``rows`` from ``shards``) and found."""

    rows: int
    shards: tuple[str, ...]
    findings: tuple[PiiFinding, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "shards": list(self.shards),
            "findings": [f.to_dict() for f in self.findings],
        }


def scan_shards(
    loc: Location,
    paths: Sequence[str],
    fmt: Format,
    schema: pa.Schema | None,
    *,
    classified: set[str],
    rows: int = SAMPLE_ROWS,
) -> PiiScan:
    """Sample about ``rows`` rows (the first rows of up to four of ``paths``, spread over them) and scan
    their unclassified fields."""
    from dsm.shards import iter_shard

    picks = sorted({round(i * (len(paths) - 1) / 3) for i in range(4)}) if paths else []
    chosen = [paths[i] for i in picks]
    per_shard = -(-rows // max(len(chosen), 1))
    batches: list[pa.RecordBatch] = []
    taken = 0
    for path in chosen:
        want = per_shard
        for batch in iter_shard(loc, path, fmt, schema=schema, batch_rows=min(want, 1024)):
            piece = batch.slice(0, want)
            batches.append(piece)
            want -= piece.num_rows
            if want <= 0:
                break
        taken += per_shard - max(want, 0)
    return PiiScan(
        rows=taken, shards=tuple(chosen), findings=tuple(scan_batches(batches, classified=classified))
    )
