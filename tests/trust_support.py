"""What the trust tests check of every dataset dsm publishes (issue 10's promise, as reusable checks).

``check_published`` asserts, for a published version: ``verify --deep`` passes; registering its folder
again gives the same fingerprint (and schema); and every file, read without dsm, holds the expected rows
(in order, or as a multiset after a shuffle). ``check_refused`` asserts a refusal left nothing a reader
could take for data at the destination.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

import dsm
from dsm.contract import Contract
from dsm.errors import InputError
from dsm.formats import get_format
from dsm.storage import is_temporary
from tests.independent import comparable, read_rows

__all__ = ["FORMATS", "check_published", "check_refused", "register_table", "write_shards"]

FORMATS = ("parquet", "arrow", "jsonl", "csv", "webdataset")


def write_shards(folder: Path, table: pa.Table, fmt: str, shards: int, **options: Any) -> list[Path]:
    """``table`` cut into ``shards`` files written by dsm's own writer of ``fmt`` (with ``options``)."""
    folder.mkdir(parents=True, exist_ok=True)
    writer_format = get_format(fmt, **options)
    suffix = writer_format.extensions[0]
    compression = options.get("compression")
    if compression and not writer_format.self_describing:
        suffix += {"gzip": ".gz", "zstd": ".zst", "bz2": ".bz2", "lz4": ".lz4"}[compression]
    paths = []
    step = -(-table.num_rows // shards) if table.num_rows else 0
    for index in range(shards):
        part = table.slice(index * step, step) if step else table.slice(0, 0)
        path = folder / f"part-{index}{suffix}"
        with open(path, "wb") as handle, writer_format.open_writer(handle, table.schema) as writer:
            for batch in part.to_batches():
                writer.write_batch(batch)
        paths.append(path)
    return paths


def register_table(folder: Path, fmt: str, schema: pa.Schema, registry: str, name: str) -> Contract:
    """Register ``folder``: self-describing formats with their stored schema, text ones with ``schema``."""
    given = None if get_format(fmt).self_describing else dsm.Schema.from_arrow(schema)
    return dsm.register(str(folder), name=name, schema=given, registry=registry)


def _files(contract: Contract) -> list[Path]:
    return [Path(contract.location) / s.path for s in contract.shards]


def check_published(contract: Contract, expected: pa.Table, registry: str, *, ordered: bool) -> None:
    """The promises of a published version (see the module docstring)."""
    report = dsm.verify(contract.ref, deep=True, registry=registry)
    assert report.ok, [(s.path, s.status, s.detail) for s in report.shards]
    schema = contract.schema.to_arrow()
    again = register_table(Path(contract.location), contract.format, schema, registry, "again")
    assert again.fingerprint is not None and contract.fingerprint is not None
    assert (again.fingerprint.unordered, again.fingerprint.rows) == (
        contract.fingerprint.unordered,
        contract.fingerprint.rows,
    )
    assert again.fingerprint.ordered == contract.fingerprint.ordered
    assert again.schema.to_arrow().equals(schema), f"{again.schema.to_arrow()} != {schema}"
    options = dict(contract.format_options)
    rows = [row for path in _files(contract) for row in read_rows(path, contract.format, schema, options)]
    want = comparable(expected)
    if ordered:
        assert rows == want
    else:
        assert Counter(map(repr, rows)) == Counter(map(repr, want))


def check_refused(error: BaseException, destination: Path) -> None:
    """A refusal is an input error (exit 2) and leaves no data file at the destination."""
    assert isinstance(error, InputError), repr(error)
    if destination.exists():
        data = [
            p
            for p in destination.rglob("*")
            if p.is_file()
            and not any(part.startswith(("_", ".")) for part in p.relative_to(destination).parts)
            and not is_temporary(p.name)
        ]
        assert not data, data
