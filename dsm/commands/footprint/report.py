"""The results of ``dsm footprint``: per version, per store and storage class, per open cutover, totals."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["ClassFootprint", "CutoverFootprint", "FootprintReport", "VersionFootprint"]


@dataclass(frozen=True, kw_only=True)
class VersionFootprint:
    """One version: what its contract lists, what of it is stored now, and how it shares it.

    ``bytes`` is what the contract lists; ``stored_bytes`` what of it is on storage now (``missing``
    files are not); ``shared_bytes`` the stored bytes of its files that another version lists too (same
    location); ``copy_bytes`` the stored bytes of its files whose content is also stored elsewhere;
    ``live`` whether readers reach it (an alias points at it, or it is its dataset's newest version that
    is not retired)."""

    ref: str
    name: str
    version: int
    status: str
    aliases: tuple[str, ...]
    live: bool
    format: str
    location: str
    shards: int
    rows: int | None
    logical_bytes: int | None
    logical_source: str | None
    bytes: int
    stored_bytes: int
    missing: int
    shared_bytes: int
    copy_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)
        }


@dataclass(frozen=True, kw_only=True)
class ClassFootprint:
    """The stored bytes in one store and storage class, the copies it keeps, and what it costs a month."""

    store: str
    storage_class: str
    files: int
    bytes: int
    copies: float
    raw_bytes: float
    price_per_gb_month: float
    price_source: str
    monthly_cost: float
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class CutoverFootprint:
    """An open cutover: the extra storage its target holds until it completes, and that cost until then.

    ``extra_source`` says where the figure comes from (the target version's stored files once copied,
    else the plan's estimate); ``months`` is the time left until complete (known after the switch, else
    the plan's remaining stage times plus the retain period)."""

    id: str
    dataset: str
    alias: str
    phase: str
    target: str | None
    extra_bytes: int
    extra_source: str
    complete_after: str | None
    months: float | None
    cost_until_complete: float | None
    delete_old: bool

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class FootprintReport:
    """The footprint of the datasets asked for (``datasets``): per version, per storage class, per open
    cutover, and the totals below. Bytes count each stored file once."""

    datasets: tuple[str, ...]
    versions: tuple[VersionFootprint, ...]
    classes: tuple[ClassFootprint, ...]
    cutovers: tuple[CutoverFootprint, ...]
    listed_bytes: int
    physical_bytes: int
    shared_bytes: int
    copy_bytes: int
    unreferenced_bytes: int
    unreferenced_retired_bytes: int
    unreferenced_unaliased_bytes: int
    missing_files: int
    currency: str
    prices: str
    storage_classes: str
    notes: tuple[str, ...] = ()

    @property
    def raw_bytes(self) -> float:
        return sum(c.raw_bytes for c in self.classes)

    @property
    def monthly_cost(self) -> float:
        return sum(c.monthly_cost for c in self.classes)

    @property
    def amplification(self) -> float:
        """Raw bytes per physical byte (1.0 when nothing is stored)."""
        return self.raw_bytes / self.physical_bytes if self.physical_bytes else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "datasets": list(self.datasets),
            "totals": {
                "listed_bytes": self.listed_bytes,
                "physical_bytes": self.physical_bytes,
                "raw_bytes": self.raw_bytes,
                "amplification": self.amplification,
                "shared_bytes": self.shared_bytes,
                "copy_bytes": self.copy_bytes,
                "unreferenced_bytes": self.unreferenced_bytes,
                "unreferenced_retired_bytes": self.unreferenced_retired_bytes,
                "unreferenced_unaliased_bytes": self.unreferenced_unaliased_bytes,
                "missing_files": self.missing_files,
                "monthly_cost": self.monthly_cost,
                "currency": self.currency,
            },
            "versions": [v.to_dict() for v in self.versions],
            "classes": [c.to_dict() for c in self.classes],
            "cutovers": [c.to_dict() for c in self.cutovers],
            "prices": self.prices,
            "storage_classes": self.storage_classes,
            "notes": list(self.notes),
        }

    def to_html(self) -> str:
        """A self-contained HTML page with the figures and their plots."""
        from dsm.commands._footprint_html import render_html

        return render_html(self)
