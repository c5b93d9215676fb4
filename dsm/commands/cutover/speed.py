"""The plan's speed sample: how fast this copy decodes, fingerprints, encodes and writes.

:func:`measure_sample` decodes a slice of the source (the first rows of up to four shards spread over the
dataset), fingerprints it, encodes it in the target format and writes the encoding to the destination's
storage under a temporary name (removed at once): the speeds the plan's estimates are made from.
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsm.contract import Contract
from dsm.formats import Format
from dsm.hashing.fingerprint import digest_batch
from dsm.rewrite.execute import source_format
from dsm.rewrite.plan import SourceRange
from dsm.rewrite.reading import iter_range
from dsm.storage import Location, location

__all__ = ["PLAN_SAMPLE_NAME", "SampleSpeeds", "measure_sample"]

PLAN_SAMPLE_NAME = "cutover-plan-sample"
"""The name the sample is written under (as a temporary name); a rollback removes any that a crash left."""
_SAMPLE_SHARDS = 4


@dataclass(frozen=True, kw_only=True)
class SampleSpeeds:
    """Timings of one sample: decode, fingerprint, encode (in memory), and write to the destination."""

    rows: int
    source_bytes: int
    target_bytes: int
    decode_seconds: float
    fingerprint_seconds: float
    encode_seconds: float
    write_seconds: float


def measure_sample(
    source: Contract,
    out_fmt: Format,
    dest: Location,
    *,
    sample_bytes: int,
    storage_options: Mapping[str, Any] | None = None,
    batch_rows: int = 8192,
) -> SampleSpeeds:
    """Time a sample of about ``sample_bytes`` stored source bytes through the copy's steps.

    The encoded sample is written to ``dest`` under a temporary name and removed: nothing stays.
    """
    loc = location(source.location, storage_options)
    fmt = source_format(source)
    schema = source.schema.to_arrow()
    shards = [s for s in source.shards if s.rows]
    picks = sorted({k * (len(shards) - 1) // max(1, _SAMPLE_SHARDS - 1) for k in range(_SAMPLE_SHARDS)})
    per_shard = max(1, sample_bytes // max(1, len(picks)))
    decode = fingerprint = encode = 0.0
    rows = source_bytes = 0
    sink = io.BytesIO()
    writer = out_fmt.open_writer(sink, schema)
    for pick in picks if shards else []:
        shard = shards[pick]
        total = shard.rows or 0
        take = max(1, min(total, per_shard * total // max(1, shard.bytes)))
        rng = SourceRange(shard=shard.path, start=0, stop=take, whole=take == total)
        batches = iter_range(loc, fmt, schema, rng, batch_rows)
        while True:
            started = time.perf_counter()
            batch = next(batches, None)
            decode += time.perf_counter() - started
            if batch is None:
                break
            started = time.perf_counter()
            digest_batch(batch)
            fingerprint += time.perf_counter() - started
            started = time.perf_counter()
            writer.write_batch(batch)
            encode += time.perf_counter() - started
            rows += batch.num_rows
        source_bytes += shard.bytes * take // max(1, total)
    started = time.perf_counter()
    writer.close()
    encode += time.perf_counter() - started
    payload = sink.getvalue()
    rel = dest.temp_name(PLAN_SAMPLE_NAME)
    if dest.is_local:
        dest.makedirs()
    started = time.perf_counter()
    try:
        with dest.open(rel, "wb") as handle:
            handle.write(payload)
        write = time.perf_counter() - started
    finally:
        if dest.exists(rel):
            dest.remove(rel)
    return SampleSpeeds(
        rows=rows,
        source_bytes=source_bytes,
        target_bytes=len(payload),
        decode_seconds=decode,
        fingerprint_seconds=fingerprint,
        encode_seconds=encode,
        write_seconds=write,
    )
