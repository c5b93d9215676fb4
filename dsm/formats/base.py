"""The one abstract base every format implements: streaming read and write over Arrow record batches."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import IO, Any, ClassVar

import pyarrow as pa

__all__ = ["DEFAULT_BATCH_ROWS", "Format", "FormatWriter"]

DEFAULT_BATCH_ROWS = 65_536
"""Rows per record batch that readers aim for; bounds memory for any shard size."""


class FormatWriter(ABC):
    """Writes record batches of one schema into one open binary file. ``close`` finishes the file."""

    @abstractmethod
    def write_batch(self, batch: pa.RecordBatch) -> None: ...

    @abstractmethod
    def close(self) -> None:
        """Write any footer; does not close the underlying file object."""

    def __enter__(self) -> FormatWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()


class Format(ABC):
    """A file format over Arrow record batches.

    Subclasses set ``name`` (the registry key and the contract's ``format``), ``extensions`` (for
    detection, with the dot) and take their write options as keyword-only constructor arguments.
    Readers stream: at most about ``batch_rows`` rows (or one row group) are in memory at once.
    Decoding failures raise :class:`dsm.errors.FormatError` naming ``shard`` and the line, row or field.
    """

    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]]
    self_describing: ClassVar[bool] = True
    """True when files carry their own schema (Parquet, Arrow); text formats are parsed with a given one."""

    def options(self) -> dict[str, Any]:
        """The write options this instance was made with (recorded in contracts as ``format_options``)."""
        return {}

    @abstractmethod
    def read_schema(self, file: IO[bytes], *, shard: str) -> pa.Schema:
        """The schema of one file: stored (self-describing formats) or inferred from its first rows."""

    @abstractmethod
    def iter_batches(
        self,
        file: IO[bytes],
        *,
        shard: str,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> Iterator[pa.RecordBatch]:
        """Stream the rows of one file as record batches.

        With ``schema``, the batches have exactly that schema (text formats are parsed with it; a value that
        does not fit raises FormatError naming the line and field). ``columns`` projects by name.
        """

    def count_rows(self, file: IO[bytes], *, shard: str, schema: pa.Schema | None = None) -> int:
        """Rows in one file; formats with metadata override this to avoid decoding."""
        return sum(b.num_rows for b in self.iter_batches(file, shard=shard, schema=schema))

    @abstractmethod
    def open_writer(self, file: IO[bytes], schema: pa.Schema) -> FormatWriter:
        """A writer of ``schema`` into ``file`` with this instance's options."""

    def unsupported(self, schema: pa.Schema) -> list[str]:
        """Why this format cannot hold ``schema`` (one message per field), or ``[]`` when it can."""
        return []
