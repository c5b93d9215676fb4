"""Chains: consecutive units of a rewrite run as one task that reads their source rows once.

A read cannot start inside a fragment of a source shard (a Parquet row group; the whole file, for a format
without fragments): it decodes the fragment from its first row and drops the rows before its own. Output files
(or a shuffle's pass-1 pieces) cut from the same row group would each decode it; chained, they share one
read, and a shard that a chain reads from its first row to its last is checked by that read. Chains change
how the units run, never the plan or a byte of the output (:mod:`dsm.rewrite.plan` decides those).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa

from dsm.contract import Contract
from dsm.engine import map_units
from dsm.errors import DsmError
from dsm.formats import Format
from dsm.rewrite.plan import OutputUnit, ScatterUnit, SourceRange
from dsm.storage import Location

__all__ = ["Unit", "UnitChain", "chain_units", "read_whole", "source_fragments"]

Unit = TypeVar("Unit", bound=OutputUnit | ScatterUnit)


@dataclass(frozen=True)
class UnitChain(Generic[Unit]):
    """Consecutive units (output files, or a shuffle's pass-1 pieces) run one after the other from one pass
    over their source rows (:func:`chain_units`): how they are run, not what they write. ``ranges`` are the
    units' source ranges in order, a range that the next unit continues joined to it (whole where the
    joined range is a whole shard)."""

    units: tuple[Unit, ...]
    ranges: tuple[SourceRange, ...]

    @property
    def path(self) -> str:
        """What the chain is called in messages and task names: its first file, or its first piece's shard."""
        first = self.units[0]
        return first.path if isinstance(first, OutputUnit) else first.shard


def chain_units(
    units: Sequence[Unit], fragments: Mapping[str, Sequence[int]], batch_rows: int, parallel: int = 1
) -> tuple[UnitChain[Unit], ...]:
    """``units`` (in plan order) grouped into chains, each run as one task that reads its rows once.

    A read cannot start inside a fragment (a Parquet row group; the whole file, for a format without
    fragments): it decodes the fragment from its first row and drops the rows before its own, and the read
    that ends there decodes on to the end of its last batch (``batch_rows``, within the fragment). Unit
    ``k + 1`` therefore joins unit ``k``'s chain where it continues ``k``'s last source range inside a
    fragment and the rows decoded twice at that cut would be at least a quarter of its own rows
    (``fragments``: the rows of each fragment of the shards whose layout is known; never through a shard not
    in it). Apart, units run in parallel: a chain holding more than its share of the rows (their sum over
    ``parallel``, the workers) is cut in two near its middle, again until none does, so that every worker
    has work. With one worker a rewrite decodes at most a quarter more rows than it copies. The output
    bytes are the same however the units are chained.
    """
    chains: list[list[Unit]] = []
    for unit in units:
        last = chains[-1][-1] if chains else None
        if last is not None and last.index + 1 == unit.index and unit.ranges and last.ranges:
            before, after = last.ranges[-1], unit.ranges[0]
            if before.shard == after.shard and before.stop == after.start:
                start, stop = _fragment_of(fragments.get(after.shard), after.start)
                twice = after.start - start + min(stop - after.start, batch_rows)
                if after.start > start and 4 * twice >= unit.rows:
                    chains[-1].append(unit)
                    continue
        chains.append([unit])
    share = -(-sum(u.rows for u in units) // max(1, parallel))
    parts = [part for chain in chains for part in _within(chain, share)]
    return tuple(UnitChain(tuple(part), _joined(part, fragments)) for part in parts)


def read_whole(chains: Sequence[UnitChain[Unit]]) -> frozenset[str]:
    """The source shards that one of ``chains`` reads from its first row to its last (each once)."""
    return frozenset(r.shard for chain in chains for r in chain.ranges if r.whole)


def _joined(units: Sequence[Unit], fragments: Mapping[str, Sequence[int]]) -> tuple[SourceRange, ...]:
    """The source ranges of ``units`` in order, each range that the next continues joined to it."""
    out: list[SourceRange] = []
    for rng in (r for unit in units for r in unit.ranges):
        last = out[-1] if out else None
        if last is not None and last.shard == rng.shard and last.stop == rng.start:
            whole = last.start == 0 and rng.shard in fragments and rng.stop == sum(fragments[rng.shard])
            out[-1] = SourceRange(shard=rng.shard, start=last.start, stop=rng.stop, whole=whole)
        else:
            out.append(rng)
    return tuple(out)


def _within(chain: list[Unit], share: int) -> list[list[Unit]]:
    """``chain`` cut in two near its middle (by rows), and again, until no part holds more than ``share``
    rows or a part is one unit."""
    rows = sum(u.rows for u in chain)
    if len(chain) == 1 or rows <= share:
        return [chain]
    upto = list(itertools.accumulate(u.rows for u in chain))  # upto[k - 1]: the rows before unit k
    cut = min(range(1, len(chain)), key=lambda k: abs(2 * upto[k - 1] - rows))
    return _within(chain[:cut], share) + _within(chain[cut:], share)


def _fragment_of(rows: Sequence[int] | None, row: int) -> tuple[int, int]:
    """The rows ``[start, stop)`` of the fragment holding ``row`` (``(row, row)`` where the layout is not
    known)."""
    start = 0
    for count in rows or ():
        if start + count > row:
            return start, start + count
        start += count
    return row, row


def source_fragments(
    loc: Location, fmt: Format, source: Contract, units: Sequence[Unit], workers: int | None
) -> dict[str, list[int]]:
    """The fragment rows of each source shard that two consecutive ``units`` split (what
    :func:`~dsm.rewrite.chains.chain_units` needs): from each file's metadata where the format has
    fragments (Parquet footers, read here, in the driver), else the one fragment the contract counts. A
    footer that cannot be read, or that counts other rows than the contract, leaves its shard out: it is
    then checked before anything is written, and that check names what is wrong with it."""
    split = sorted(
        {
            before.ranges[-1].shard
            for before, after in itertools.pairwise(units)
            if before.ranges and after.ranges and before.ranges[-1].shard == after.ranges[0].shard
        }
    )
    rows = {s.path: s.rows or 0 for s in source.shards}
    if type(fmt).fragment_count is Format.fragment_count:
        return {path: [rows[path]] for path in split}

    def rows_of(path: str) -> list[int] | None:
        try:
            with loc.open(path) as handle:
                found = fmt.fragment_rows(handle, shard=path)
        except (DsmError, pa.ArrowException, OSError, ValueError):
            return None
        return found if sum(found) == rows[path] else None

    read = map_units(rows_of, split, workers=workers)
    return {path: found for path, found in zip(split, read, strict=True) if found is not None}
