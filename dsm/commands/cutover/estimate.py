"""Time, bytes, requests, cost and peak storage of a cutover, from measured speeds and a price table.

:func:`estimate` is a pure function: the plan stage measures (a short ``dsm bench`` read of the source, and
a sample of rows decoded, fingerprinted, encoded in the target format and written to the destination's
storage), and this module turns those figures into the plan. The model, stage by stage (``S`` source
bytes, ``T`` target bytes, ``p`` the parallel workers)::

    copy    (2 S/read + S/decode + S/encode + T/write + T/read + S/decode + S/fingerprint) / p
            (T/write and T/read at the destination's rates per worker from dsm storage check's
            throughput probe, when the plan ran one; else the sample's single write stream and the
            source's read rate)
            (the rewrite checks every source checksum, streams the rows, writes, then re-reads each file
            written to take its checksum and row fingerprint; a shuffle adds one pass over a spill)
    verify  (T/read + S/decode + S/fingerprint) / p        deep verify of the target
    shadow  2 x shadow_duration + f (T/read + S/decode)      dsm bench --compare, old then new, and the
            row sample, which decodes the fraction f of the files it touches (4 runs of rows: f = 4 / files
            at most; every file when shuffled)
    switch  S/read / p                                      the old version's bytes verify (rollback check)

Costs assume dsm runs next to the destination: bytes read out of the source pay its transfer price
(``transfer_within_per_gb`` when source and destination are the same kind of store, else
``transfer_out_per_gb``), reads of the destination are free, requests and storage are priced per store.

>>> m = Measurements(read_bytes_per_s=1e8, sample_rows=10, sample_source_bytes=1000,
...                  sample_target_bytes=2000, decode_seconds=1e-5, encode_seconds=1e-5,
...                  fingerprint_seconds=1e-5, write_seconds=1e-5)
>>> m.expansion
2.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsm.commands.cutover.prices import PriceTable

__all__ = ["CostLine", "Estimate", "Measurements", "estimate"]

_MONTH_SECONDS = 30 * 86400
_TINY = 1e-6


@dataclass(frozen=True, kw_only=True)
class Measurements:
    """What the plan stage measured. Seconds are for the whole sample; bytes per second derive from them."""

    read_bytes_per_s: float
    sample_rows: int
    sample_source_bytes: int
    sample_target_bytes: int
    decode_seconds: float
    encode_seconds: float
    fingerprint_seconds: float
    write_seconds: float
    bench: Mapping[str, Any] = field(default_factory=dict)
    destination_write_bytes_per_s: float | None = None
    """The destination's parallel PUT rate (``dsm storage check``'s probe, ``destination_workers`` wide)."""
    destination_read_bytes_per_s: float | None = None
    destination_workers: int = 0

    @property
    def expansion(self) -> float:
        """Target bytes per source byte (1.0 when the sample was empty)."""
        if self.sample_source_bytes <= 0:
            return 1.0
        return self.sample_target_bytes / self.sample_source_bytes

    def _rate(self, nbytes: int, seconds: float) -> float:
        return nbytes / max(seconds, _TINY) if nbytes > 0 else self.read_bytes_per_s

    @property
    def decode_bytes_per_s(self) -> float:
        return self._rate(self.sample_source_bytes, self.decode_seconds)

    @property
    def encode_bytes_per_s(self) -> float:
        return self._rate(self.sample_source_bytes, self.encode_seconds)

    @property
    def fingerprint_bytes_per_s(self) -> float:
        return self._rate(self.sample_source_bytes, self.fingerprint_seconds)

    @property
    def write_bytes_per_s(self) -> float:
        return self._rate(self.sample_target_bytes, self.write_seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "read_bytes_per_s": self.read_bytes_per_s,
            "decode_bytes_per_s": self.decode_bytes_per_s,
            "encode_bytes_per_s": self.encode_bytes_per_s,
            "fingerprint_bytes_per_s": self.fingerprint_bytes_per_s,
            "write_bytes_per_s": self.write_bytes_per_s,
            "expansion": self.expansion,
            "sample_rows": self.sample_rows,
            "sample_source_bytes": self.sample_source_bytes,
            "sample_target_bytes": self.sample_target_bytes,
            "decode_seconds": self.decode_seconds,
            "encode_seconds": self.encode_seconds,
            "fingerprint_seconds": self.fingerprint_seconds,
            "write_seconds": self.write_seconds,
            "bench": dict(self.bench),
            "destination_write_bytes_per_s": self.destination_write_bytes_per_s,
            "destination_read_bytes_per_s": self.destination_read_bytes_per_s,
            "destination_workers": self.destination_workers,
        }


def destination_speeds(probe: Any) -> dict[str, Any]:
    """The :class:`Measurements` fields from a readiness throughput probe (``{}`` without one)."""
    if probe is None or probe.errors or not probe.put_bytes_per_s or not probe.get_bytes_per_s:
        return {}
    return {
        "destination_write_bytes_per_s": probe.put_bytes_per_s,
        "destination_read_bytes_per_s": probe.get_bytes_per_s,
        "destination_workers": probe.workers,
    }


@dataclass(frozen=True, kw_only=True)
class CostLine:
    """One priced item: ``quantity`` of ``unit`` at ``unit_price`` each."""

    item: str
    quantity: float
    unit: str
    unit_price: float
    cost: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "quantity": self.quantity,
            "unit": self.unit,
            "unit_price": self.unit_price,
            "cost": self.cost,
        }


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """The figures of a plan. ``seconds`` maps stage to estimated wall time; ``total_seconds`` sums them."""

    source_bytes: int
    target_bytes: int
    bytes_read_source: int
    bytes_read_target: int
    bytes_written: int
    requests: Mapping[str, int]
    seconds: Mapping[str, float]
    parallelism: int
    cost: tuple[CostLine, ...]
    currency: str
    peak_extra_bytes: int
    extra_bytes_kept: int
    storage_per_month_before: float
    storage_per_month_after: float
    notes: tuple[str, ...] = ()

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    @property
    def total_cost(self) -> float:
        return sum(line.cost for line in self.cost)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes": {
                "source": self.source_bytes,
                "target": self.target_bytes,
                "read_source": self.bytes_read_source,
                "read_target": self.bytes_read_target,
                "written": self.bytes_written,
            },
            "requests": dict(self.requests),
            "seconds": dict(self.seconds),
            "total_seconds": self.total_seconds,
            "parallelism": self.parallelism,
            "cost": {
                "currency": self.currency,
                "lines": [line.to_dict() for line in self.cost],
                "total": self.total_cost,
            },
            "storage": {
                "peak_extra_bytes": self.peak_extra_bytes,
                "extra_bytes_kept": self.extra_bytes_kept,
                "per_month_before": self.storage_per_month_before,
                "per_month_after": self.storage_per_month_after,
            },
            "notes": list(self.notes),
        }


def _requests(sizes: Sequence[int], request_bytes: int) -> int:
    return sum(max(1, math.ceil(size / request_bytes)) for size in sizes)


def estimate(
    *,
    source_sizes: Sequence[int],
    target_sizes: Sequence[int],
    source_protocol: str,
    target_protocol: str,
    measured: Measurements,
    prices: PriceTable,
    workers: int,
    shuffle: bool = False,
    shadow_seconds: float = 0.0,
    sample_rows: int = 0,
    retain_seconds: float = 0.0,
    delete_old: bool = False,
) -> Estimate:
    """The plan's figures for copying files of ``source_sizes`` bytes into files of ``target_sizes``.

    ``workers`` is the parallelism of the copy and the verify (capped by the number of files); the
    estimate assumes throughput scales with it, which holds until storage or the network saturates
    (``dsm bench --workers 1,2,4,8`` finds where).
    """
    S, T = sum(source_sizes), sum(target_sizes)
    copy_p = max(1, min(workers, max(len(target_sizes), 1)))
    verify_p = copy_p
    read = max(measured.read_bytes_per_s, _TINY)
    decode, encode = measured.decode_bytes_per_s, measured.encode_bytes_per_s
    fingerprint, write = measured.fingerprint_bytes_per_s, measured.write_bytes_per_s
    target_read = read
    probed = measured.destination_workers > 0 and bool(measured.destination_write_bytes_per_s)
    if probed:  # the destination's own rates per worker under parallel load, instead of one stream
        workers_probed = measured.destination_workers
        write = max(float(measured.destination_write_bytes_per_s or 0) / workers_probed, _TINY)
        target_read = max(float(measured.destination_read_bytes_per_s or 0) / workers_probed, _TINY)
    copy = 2 * S / read + 2 * S / decode + S / encode + T / write + T / target_read + S / fingerprint
    if shuffle:
        copy += S / encode + S / decode  # the spill pass: written once, read back once
    files = max(1, len(target_sizes))
    touched = 0.0 if sample_rows <= 0 else (1.0 if shuffle else min(1.0, 4 / files))
    seconds = {
        "copy": copy / copy_p,
        "verify": (T / target_read + S / decode + S / fingerprint) / verify_p,
        "shadow": 2 * shadow_seconds + touched * (T / target_read + S / decode),
        "switch": S / read / verify_p,
    }
    shadow_source = min(S, int(min(read, decode) * shadow_seconds))
    shadow_target = min(T, int(min(read, decode) * shadow_seconds))
    read_source = 2 * S + S + shadow_source  # copy (checksums, rows) + the rollback check + shadow
    read_target = T + T + shadow_target  # the copy's read-back + verify + shadow
    rb = prices.request_bytes
    requests = {
        "source_get": 3 * _requests(source_sizes, rb) + (_requests(source_sizes, rb) if shadow_source else 0),
        "target_get": 2 * _requests(target_sizes, rb) + (_requests(target_sizes, rb) if shadow_target else 0),
        "target_put": _requests(target_sizes, rb),
    }
    src, dst = prices.store(source_protocol), prices.store(target_protocol)
    same = prices.store_name(source_protocol) == prices.store_name(target_protocol)
    transfer_price = src.transfer_within_per_gb if same else src.transfer_out_per_gb
    gb = prices.gb
    months = (sum(seconds.values()) + retain_seconds) / _MONTH_SECONDS
    lines = [
        ("transfer out of the source", read_source / gb, "GB", transfer_price),
        ("writes into the destination", T / gb, "GB", dst.write_per_gb),
        ("source read requests", requests["source_get"] / 1000, "1,000 requests", src.read_requests_per_1000),
        (
            "destination read requests",
            requests["target_get"] / 1000,
            "1,000 requests",
            dst.read_requests_per_1000,
        ),
        (
            "destination write requests",
            requests["target_put"] / 1000,
            "1,000 requests",
            dst.write_requests_per_1000,
        ),
        ("both copies stored until complete", T / gb * months, "GB-month", dst.storage_per_gb_month),
    ]
    cost = tuple(
        CostLine(item=item, quantity=qty, unit=unit, unit_price=price, cost=qty * price)
        for item, qty, unit, price in lines
    )
    spill = S if shuffle else 0
    before = S / gb * src.storage_per_gb_month
    after = T / gb * dst.storage_per_gb_month + (0.0 if delete_old else before)
    notes = [
        f"speeds measured on a sample of {measured.sample_rows} rows; copy and verify assume {copy_p} "
        "parallel workers scale linearly",
        "costs assume dsm runs next to the destination (reads of the source pay its transfer price)",
    ]
    if probed:
        notes.append(
            f"destination writes and reads at the rates dsm storage check measured with {workers_probed} "
            "parallel workers (small objects: conservative for large files)"
        )
    if shuffle:
        notes.append("a shuffle writes a spill of about the source's size at the destination while copying")
    if not delete_old:
        notes.append("the old copy is kept after complete (no --delete-old): the extra storage stays")
    return Estimate(
        source_bytes=S,
        target_bytes=T,
        bytes_read_source=read_source,
        bytes_read_target=read_target,
        bytes_written=T + spill,
        requests=requests,
        seconds=seconds,
        parallelism=copy_p,
        cost=cost,
        currency=prices.currency,
        peak_extra_bytes=T + spill,
        extra_bytes_kept=0 if delete_old else T,
        storage_per_month_before=before,
        storage_per_month_after=after,
        notes=tuple(notes),
    )
