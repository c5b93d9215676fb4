"""Where the rows of one file are: the pieces that decode on their own, for random access to rows.

A :class:`ShardIndex` cuts one file into pieces: Parquet row groups and Arrow IPC record batches (from the
file's footer), blocks of whole lines of JSONL and CSV, samples of a WebDataset tar (both found by one scan of
the file, see :attr:`dsm.formats.Format.index_by_scan`). Piece ``i`` holds the rows ``starts[i]`` up to
``starts[i + 1]`` and its bytes start at ``offsets[i]`` (of the decompressed stream for compressed text). An
index serialises to a few bytes per piece, so callers can keep it beside the file's checksum.

>>> index = ShardIndex.of(format="parquet", kind="row_group", rows=[3, 2])
>>> index.rows, index.pieces, index.piece_of(4)
(5, 2, 1)
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dsm.errors import FormatError, InputError

__all__ = ["INDEX_VERSION", "PIECE_KINDS", "ShardIndex"]

INDEX_VERSION = 1
"""Bumped whenever what an index holds changes; a stored index of another version is rebuilt."""

PIECE_KINDS = ("row_group", "record_batch", "lines", "sample", "file")
"""What a piece is, by format: Parquet row group, Arrow record batch, a block of lines, a tar sample, or the
whole file (a format that cannot start in the middle of a file)."""


def _int64(values: Sequence[int] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


@dataclass(frozen=True, kw_only=True, eq=False)
class ShardIndex:
    """The pieces of one file (see the module docstring). Immutable; arrays are int64.

    ``lines`` (line formats) holds the 1-based line of each piece's first row. ``members`` (WebDataset)
    holds one entry per tar member: ``piece``, ``column`` (an index into ``info["columns"]``), ``offset``
    and ``size`` of its bytes in the file. ``info`` is JSON-able, format-specific detail (CSV: the header's
    column names; text formats: whether offsets are of a decompressed stream).
    """

    format: str
    kind: str
    starts: np.ndarray
    offsets: np.ndarray
    lines: np.ndarray | None = None
    members: Mapping[str, np.ndarray] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        *,
        format: str,
        kind: str,
        rows: Sequence[int],
        offsets: Sequence[int] | None = None,
        lines: Sequence[int] | None = None,
        members: Mapping[str, Sequence[int]] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> ShardIndex:
        """An index from the rows of each piece (and, when known, where each starts and the file's end)."""
        starts = np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(_int64(rows), dtype=np.int64)))
        return cls(
            format=format,
            kind=kind,
            starts=starts,
            offsets=_int64(offsets) if offsets is not None else np.zeros(0, dtype=np.int64),
            lines=_int64(lines) if lines is not None else None,
            members={name: _int64(values) for name, values in (members or {}).items()},
            info=dict(info or {}),
        )

    @property
    def rows(self) -> int:
        return int(self.starts[-1]) if len(self.starts) else 0

    @property
    def pieces(self) -> int:
        return max(len(self.starts) - 1, 0)

    @property
    def compressed(self) -> bool:
        """Offsets are of a decompressed stream: reaching one means decompressing what comes before it."""
        return bool(self.info.get("compressed", False))

    def piece_of(self, row: int) -> int:
        """The piece holding 0-based ``row`` of the file."""
        if not 0 <= row < self.rows:
            raise InputError(f"row {row} is not in this file (it has {self.rows} rows)")
        return int(np.searchsorted(self.starts, row, side="right")) - 1

    def piece_rows(self, piece: int) -> tuple[int, int]:
        """``(first row, rows)`` of ``piece``."""
        return int(self.starts[piece]), int(self.starts[piece + 1] - self.starts[piece])

    def span(self, first: int, last: int) -> tuple[int, int] | None:
        """Bytes ``(start, end)`` of pieces ``first`` to ``last`` (inclusive), or None when not known."""
        if len(self.offsets) != len(self.starts):
            return None
        return int(self.offsets[first]), int(self.offsets[last + 1])

    def check_range(self, start: int, stop: int, *, shard: str) -> None:
        if not 0 <= start <= stop <= self.rows:
            raise InputError(f"shard {shard}: rows {start}..{stop} are not within its {self.rows} rows")

    # --- storage ---------------------------------------------------------------------------------------

    def to_bytes(self, header: Mapping[str, Any] | None = None) -> bytes:
        """The index (and a caller's JSON-able ``header``) as the bytes of an ``.npz`` file."""
        meta = {
            "version": INDEX_VERSION,
            "format": self.format,
            "kind": self.kind,
            "info": dict(self.info),
            "header": dict(header or {}),
            "members": sorted(self.members),
        }
        arrays: dict[str, np.ndarray] = {"starts": self.starts, "offsets": self.offsets}
        if self.lines is not None:
            arrays["lines"] = self.lines
        for name, values in self.members.items():
            arrays[f"member_{name}"] = values
        arrays["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str) -> tuple[ShardIndex, dict[str, Any]]:
        """An index and its header from :meth:`to_bytes`; FormatError when the bytes are not one."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as stored:
                meta = json.loads(bytes(stored["meta"]).decode("utf-8"))
                if meta.get("version") != INDEX_VERSION:
                    raise FormatError(
                        f"{source}: index version {meta.get('version')!r} is not {INDEX_VERSION}"
                    )
                index = cls(
                    format=str(meta["format"]),
                    kind=str(meta["kind"]),
                    starts=stored["starts"].astype(np.int64),
                    offsets=stored["offsets"].astype(np.int64),
                    lines=stored["lines"].astype(np.int64) if "lines" in stored.files else None,
                    members={name: stored[f"member_{name}"].astype(np.int64) for name in meta["members"]},
                    info=dict(meta.get("info") or {}),
                )
                return index, dict(meta.get("header") or {})
        except FormatError:
            raise
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise FormatError(f"{source}: not a readable row index ({exc})") from None
