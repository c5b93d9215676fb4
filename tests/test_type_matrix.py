"""Item 1 of issue 10 over the whole type matrix and every pair of formats: a conversion either publishes
a version that verifies deep, re-registers to the same fingerprint and reads back (without dsm) as the
source's rows, recording in its contract the types the target really stores; or it is refused with an
input error (exit 2) before anything is written. The default proof (digests of the rows written) and
``--read-back`` (the files read again) always reach the same verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

import dsm
from dsm.errors import InputError
from dsm.formats import get_format
from dsm.hashing.fingerprint import digest_batches
from tests.trust_support import FORMATS, check_published, check_refused, register_table, write_shards

sys.path.insert(0, str(Path(__file__).parent / "formats"))
from conformance import FILLABLE, TYPE_CASES, column

ROWS = 12


def _holds(fmt: str, case: str, source: str | None = None) -> bool:
    """Whether ``fmt`` holds the case's type (as ``source`` stores it, when given)."""
    schema = pa.schema([pa.field(case, TYPE_CASES[case][0])])
    if source is not None:
        schema = get_format(source).storage(schema).schema
    if fmt == "webdataset":
        schema = schema.insert(0, pa.field("__key__", pa.string(), nullable=False))
    return not get_format(fmt).storage(schema).problems


WEBDATASET_CASES = ("string", "large_string", "binary", "large_binary")


def _table(cases: list[str], *, tar: bool) -> pa.Table:
    """The cases' columns plus what the formats need: a WebDataset key and a never-null member."""
    columns = {case: column(case, ROWS) for case in cases}
    if tar:
        keys = pa.array([f"k{i:03d}" for i in range(ROWS)])
        return pa.table({"__key__": keys, "txt": pa.array([f"row {i}" for i in range(ROWS)]), **columns})
    return pa.table({"id": pa.array(range(ROWS), pa.int64()), **columns})


def _matrix(source: str, target: str) -> tuple[list[str], list[str]]:
    """The cases the source holds, split by whether the target holds them."""
    tar = "webdataset" in (source, target)
    held = [c for c in FILLABLE if _holds(source, c) and (source != "webdataset" or c in WEBDATASET_CASES)]
    kept = [c for c in held if _holds(target, c, source) and (not tar or c in WEBDATASET_CASES)]
    return kept, [c for c in held if not _holds(target, c, source)]


@pytest.mark.parametrize("target", FORMATS)
@pytest.mark.parametrize("source", FORMATS)
def test_every_pair_publishes_a_version_that_verifies_or_refuses(
    source: str, target: str, tmp_path: Path
) -> None:
    registry = str(tmp_path / "registry")
    kept, refused = _matrix(source, target)
    table = _table(kept, tar="webdataset" in (source, target))
    stored = get_format(source).storage(table.schema).schema
    write_shards(tmp_path / "source", table, source, 2)
    contract = register_table(tmp_path / "source", source, stored, registry, "src")
    results = []
    for read_back in (False, True):
        dest = tmp_path / f"out-{int(read_back)}"
        result = dsm.convert_format(
            contract.ref,
            str(dest),
            format=target,
            read_back=read_back,
            name=f"dst{int(read_back)}",
            registry=registry,
        )
        results.append(result)
    written, read = (r.contract for r in results)
    # The default proof and --read-back reach the same verdict, on the same bytes.
    assert written.schema == read.schema
    assert written.fingerprint == read.fingerprint
    assert [(s.path, s.checksum) for s in written.shards] == [(s.path, s.checksum) for s in read.shards]
    # The contract says what the files hold, and the lineage says which types changed on the way.
    target_storage = get_format(target).storage(contract.schema.to_arrow())
    assert written.schema.to_arrow().equals(target_storage.schema)
    if target_storage.changes:
        assert written.lineage is not None
        assert written.lineage.parameters["stored_types"] == target_storage.retyped()
    assert digest_batches(table.to_batches()).unordered == written.fingerprint.unordered  # type: ignore[union-attr]
    expected = target_storage.convert(table.combine_chunks().to_batches()[0]) if table.num_rows else table
    check_published(
        written, pa.Table.from_batches([expected]) if table.num_rows else table, registry, ordered=True
    )

    # Each type the target cannot hold is refused, before anything is written, with both proofs.
    for case in refused:
        with_refused = _table([case], tar="webdataset" in (source, target))
        write_shards(tmp_path / f"src-{case}", with_refused, source, 1)
        refused_contract = register_table(
            tmp_path / f"src-{case}",
            source,
            get_format(source).storage(with_refused.schema).schema,
            registry,
            "r",
        )
        for read_back in (False, True):
            dest = tmp_path / f"refused-{case}-{int(read_back)}"
            with pytest.raises(InputError, match=case) as info:
                dsm.convert_format(
                    refused_contract.ref, str(dest), format=target, read_back=read_back, registry=registry
                )
            check_refused(info.value, dest)
            assert not dest.exists(), "a refusal writes nothing"
