"""The inspect layer: look at the rows of a registered dataset, rendered by role, masked by classification.

It is what ``dsm head``, ``sample``, ``find`` and ``diff --rows`` and the viewers (``dsm view``,
``dsm serve``) stand on; docs/inspect.md describes the API for viewers.

- :func:`open_rows` / :class:`RowSource`: random access to rows by position, reading only the pieces (row
  groups, record batches, blocks of lines, tar members) that hold them; where each row lives; media bytes by
  byte range; episode summaries of RL data; lookups by key.
- :mod:`dsm.inspect.view`: the view model (plain, JSON-able data, never rich text).
- :mod:`dsm.inspect.roles`, :mod:`dsm.inspect.media`, :mod:`dsm.inspect.episodes`: rendering by role.
- :mod:`dsm.inspect.masking`: classified fields masked unless unmasked (audited in the registry's audit log).
- :mod:`dsm.inspect.rowdiff`: rows added, removed and changed between two versions, by key.
- :mod:`dsm.inspect.index`: the row indexes of shards, cached in dsm's cache directory.
"""

from __future__ import annotations

from dsm.inspect.episodes import EpisodeLayout, EpisodeSummary
from dsm.inspect.index import IndexCache, default_cache_dir
from dsm.inspect.masking import MASK, MaskPolicy
from dsm.inspect.positions import sample_positions
from dsm.inspect.roles import ROLES, RoleProposal, infer_roles
from dsm.inspect.source import KeyMatches, MediaRef, RowSource, open_rows
from dsm.inspect.view import CellView, FieldView, RowLocation, RowPage, RowView

__all__ = [
    "MASK",
    "ROLES",
    "CellView",
    "EpisodeLayout",
    "EpisodeSummary",
    "FieldView",
    "IndexCache",
    "KeyMatches",
    "MaskPolicy",
    "MediaRef",
    "RoleProposal",
    "RowLocation",
    "RowPage",
    "RowSource",
    "RowView",
    "default_cache_dir",
    "infer_roles",
    "open_rows",
    "sample_positions",
]
