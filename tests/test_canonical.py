"""Canonical locations: one value per stored file, whatever spelling of its URL or path named it."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.storage import canonical_location, canonical_url, is_within, location
from tests.servers import AzuriteServer, MotoServer


def test_local_paths_resolve_symlinks_dots_and_slashes(tmp_path: Path) -> None:
    real = tmp_path / "data" / "v1"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "data")
    want = "file://" + os.path.realpath(real / "part-0.parquet")
    spellings = [
        str(real / "part-0.parquet"),
        str(tmp_path / "link" / "v1" / "part-0.parquet"),
        str(tmp_path / "data" / "." / "v1" / ".." / "v1" / "part-0.parquet"),
        "file://" + str(real / "part-0.parquet"),
    ]
    assert {canonical_url(s) for s in spellings} == {want}
    assert canonical_location(location(str(tmp_path / "link") + "/"), "v1/part-0.parquet") == want


def test_object_store_protocol_families_share_one_value(
    moto_server: MotoServer, azurite_server: AzuriteServer
) -> None:
    s3 = moto_server.options()
    assert (
        canonical_url("s3://bucket/a//b/./c/", s3)
        == canonical_url("s3a://bucket/a/b/c", s3)
        == ("s3://bucket/a/b/c")
    )
    az = azurite_server.options()
    assert canonical_url("abfs://box@devstoreaccount1.dfs.core.windows.net/p/q", az) == "az://box/p/q"
    assert canonical_url("az://box/p//q/", az) == canonical_url("abfss://box/p/q", az) == "az://box/p/q"
    assert canonical_url("memory://m//x/./y/") == "memory://m/x/y"


def test_is_within_respects_path_boundaries() -> None:
    assert is_within("s3://b/data/x", "s3://b/data") and is_within("s3://b/data", "s3://b/data/")
    assert not is_within("s3://b/data2/x", "s3://b/data")
    assert is_within("file:///srv/x", "file:///") and not is_within("file:///srvx", "file:///srv")


segment = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(segment, min_size=1, max_size=5), noise=st.lists(st.sampled_from(["", "."]), max_size=5)
)
def test_redundant_separators_never_change_the_value(parts: list[str], noise: list[str]) -> None:
    clean = "memory://root/" + "/".join(parts)
    noisy = list(parts)
    for i, extra in enumerate(noise):
        noisy.insert(min(i, len(noisy)), extra)  # "" makes "//", "." a no-op segment
    assert canonical_url("memory://root/" + "/".join(noisy) + "/") == canonical_url(clean)
