"""The rewrite engine shared by ``dsm convert-format`` and ``dsm reshard``: plan, journal, execute.

- :mod:`dsm.rewrite.spec`: :class:`~dsm.rewrite.spec.RewriteSpec`, what a rewrite writes, checked.
- :mod:`dsm.rewrite.plan`: which output files hold which rows (deterministic, from the contract alone).
- :mod:`dsm.rewrite.execute`: the units that stream record batches into output files (and the shuffle).
- :mod:`dsm.rewrite.reading`: the rows of a source range, checked by the read that copies them, and the
  Parquet row groups a rewrite writes as stored.
- :mod:`dsm.rewrite.chains`: consecutive units that share a row group, run as one task reading it once.
- :mod:`dsm.rewrite.run`: prepare, execute with resume, prove the rows, mark published.
- :mod:`dsm.rewrite.journal`: what a killed run has completed, at the destination, to resume.
- :mod:`dsm.hashing.permutation`: the seeded permutation behind ``--shuffle``.

The commands themselves are :func:`dsm.commands.rewrite.convert_format` and
:func:`dsm.commands.rewrite.reshard`.
"""

from dsm.hashing.permutation import SHUFFLE_ALGORITHM, Permutation
from dsm.rewrite.plan import (
    OutputUnit,
    RewritePlan,
    ScatterUnit,
    SourceRange,
    layout,
    parse_size,
    plan_rewrite,
)

__all__ = [
    "SHUFFLE_ALGORITHM",
    "OutputUnit",
    "Permutation",
    "RewritePlan",
    "ScatterUnit",
    "SourceRange",
    "layout",
    "parse_size",
    "plan_rewrite",
]
