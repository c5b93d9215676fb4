"""A dataset converted from S3 to Azure Blob and back keeps one row fingerprint throughout."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dsm

from .conftest import StorageRoot, write_parquet_shards


def _convert_format() -> object:
    try:
        return dsm.convert_format  # type: ignore[attr-defined]
    except (AttributeError, ImportError):
        return None


@pytest.mark.skipif(
    _convert_format() is None, reason="dsm.convert_format (dsm convert-format) is not in this tree yet"
)
def test_s3_to_azure_and_back_keeps_the_fingerprint(
    s3_storage: StorageRoot, azure_storage: StorageRoot, sample_table: pa.Table, registry_url: str
) -> None:
    # the source in a folder of its own: "back" beside it, never inside a registered location
    v1 = StorageRoot(kind="s3", url=s3_storage.join("v1"), options=s3_storage.options)
    write_parquet_shards(v1, sample_table.slice(0, 900), 3)
    options = {"s3": s3_storage.options, "az": azure_storage.options}  # one mapping, keyed by protocol
    source = dsm.register(v1.url, name="moved", registry=registry_url, storage_options=options)
    assert source.fingerprint is not None

    to_azure = dsm.convert_format(
        "moved@1", azure_storage.join("jsonl"), to="jsonl", registry=registry_url, storage_options=options
    )
    back = dsm.convert_format(
        to_azure.contract,
        s3_storage.join("back"),
        to="parquet",
        registry=registry_url,
        storage_options=options,
    )
    on_azure, on_s3 = to_azure.contract, back.contract
    assert on_azure.location.startswith("az://") and on_s3.location.startswith("s3://")
    for contract in (on_azure, on_s3):
        assert contract.fingerprint is not None
        assert (contract.fingerprint.unordered, contract.fingerprint.ordered, contract.fingerprint.rows) == (
            source.fingerprint.unordered,
            source.fingerprint.ordered,
            source.fingerprint.rows,
        )
        report = dsm.verify(contract, deep=True, registry=registry_url, storage_options=options)
        assert report.ok and report.fingerprint_match is True
