"""Service errors become dsm errors naming the URL, also where a client library wraps them (adlfs)."""

from __future__ import annotations

import pytest

import dsm
from dsm.storage import location
from tests.servers import AzuriteServer, MotoServer


def test_writing_into_a_missing_container_or_bucket_is_not_found(
    azurite_server: AzuriteServer, moto_server: MotoServer
) -> None:
    for url, options in (
        ("az://dsm-missing-container/data", azurite_server.options()),
        ("s3://dsm-missing-bucket/data", moto_server.options()),
    ):
        loc = location(url, options)
        with pytest.raises(dsm.DatasetNotFound, match=rf"^{url}/part-0\.parquet: not found"):
            loc.write_bytes_atomic("part-0.parquet", b"rows")
