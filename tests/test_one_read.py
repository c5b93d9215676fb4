"""One read per shard: ``register`` and ``verify --deep`` take each shard's checksum from the bytes they
decode, so the GET bytes a real S3 server (moto) is asked for equal the dataset's bytes, not twice."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsm
from dsm.formats import get_format
from dsm.hashing import onepass
from dsm.hashing.checksum import file_checksum, file_checksums
from dsm.hashing.onepass import OnePassFile
from tests.servers import MotoServer

pytestmark = pytest.mark.usefixtures("_small_blocks")


@pytest.fixture
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 64 KiB, so that shards of a few hundred KB span many blocks and their footers (pyarrow
    reads the last 64 KiB first: one or two blocks) are fetched ahead of the hash, as 128 MB shards are
    with 8 MiB blocks."""
    monkeypatch.setattr(onepass, "BLOCK", 64 << 10)


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(rows), pa.int64()),
            "text": [f"row {i} " + "x" * int(rng.integers(0, 200)) for i in range(rows)],
            "score": pa.array(rng.normal(size=rows)),
        }
    )


def _upload(moto_server: MotoServer, bucket: str, kind: str) -> dict[str, int]:
    """A dataset of three shards of ``kind`` under ``bucket/data``: {key: size}."""
    client = moto_server.client()
    client.create_bucket(Bucket=bucket)
    sizes = {}
    for i in range(3):
        # A few hundred KB each: several blocks, whatever the format's bytes per row.
        rows = {"parquet": 12_000, "arrow": 4_000, "jsonl": 3_000}[kind] * (8 + i) // 8
        table = _table(rows, seed=i)
        sink = io.BytesIO()
        if kind == "parquet":
            pq.write_table(table, sink, row_group_size=900, compression="zstd")
        elif kind == "arrow":
            with ipc.new_file(sink, table.schema) as writer:
                for batch in table.to_batches(max_chunksize=700):
                    writer.write_batch(batch)
        else:
            sink.write("".join(json.dumps(row) + "\n" for row in table.to_pylist()).encode())
        key = f"data/part-{i}.{kind}"
        client.put_object(Bucket=bucket, Key=key, Body=sink.getvalue())
        sizes[f"{bucket}/{key}"] = len(sink.getvalue())
    return sizes


@pytest.mark.parametrize(
    "kind",
    [
        "parquet",
        "arrow",
        "jsonl",
    ],
)
def test_register_and_deep_verify_get_each_byte_once(
    moto_server: MotoServer, tmp_path: Path, kind: str
) -> None:
    bucket = f"one-read-{kind}"
    sizes = _upload(moto_server, bucket, kind)
    assert min(sizes.values()) > 3 * onepass.BLOCK  # many blocks per shard
    options = moto_server.options()
    registry = str(tmp_path / "registry")
    schema = dsm.Schema.from_arrow(_table(1, 0).schema)  # given: no footer is read to infer it
    with moto_server.get_bytes() as registered:
        contract = dsm.register(
            f"s3://{bucket}/data", name=kind, schema=schema, registry=registry, storage_options=options
        )
    assert registered == sizes, "register: every byte of every shard GET exactly once"
    with moto_server.get_bytes() as verified:
        report = dsm.verify(contract, deep=True, registry=registry, storage_options=options)
    assert report.ok, report.failures
    assert {s.verified_by for s in report.shards} == {"bytes+rows"}
    assert verified == sizes, "verify --deep: every byte of every shard GET exactly once"
    # The checksum taken from the decoded bytes is the checksum of the object.
    client = moto_server.client()
    for shard in contract.shards:
        body = client.get_object(Bucket=bucket, Key=f"data/{shard.path}")["Body"].read()
        assert shard.checksum == file_checksum(io.BytesIO(body))


@pytest.mark.parametrize("shuffle", [False, True])
def test_rewrite_checks_each_source_from_the_read_that_copies_it(
    moto_server: MotoServer, tmp_path: Path, shuffle: bool
) -> None:
    """Reshard into one file (its unit reads every source whole), in order and shuffled (pass 1 reads each
    source whole), GETs each source byte once: the source checksums come from the copying read, not from a
    read of their own before it."""
    bucket = f"one-read-rewrite-{int(shuffle)}"
    sizes = _upload(moto_server, bucket, "parquet")
    read = _reshard_reads(
        moto_server, bucket, tmp_path, num_shards=1, shuffle=shuffle, seed=3 if shuffle else None
    )
    assert read == sizes


def _reshard_reads(moto_server: MotoServer, bucket: str, tmp_path: Path, **how: Any) -> dict[str, int]:
    """Register ``s3://BUCKET/data`` and reshard it into ``s3://BUCKET/out`` as ``how`` says: the bytes
    the reshard GETs of each source file."""
    options = moto_server.options()
    registry = str(tmp_path / "registry")
    dsm.register(f"s3://{bucket}/data", name="src", registry=registry, storage_options=options)
    with moto_server.get_bytes(prefix=f"{bucket}/data/") as read:
        dsm.reshard("src", f"s3://{bucket}/out", registry=registry, storage_options=options, **how)
    return read


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_rewrite_that_cuts_row_groups_still_gets_each_byte_once(
    moto_server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle: bool
) -> None:
    """Source files of one row group each, cut into two output files each (in order) or two pass-1 pieces
    each (shuffled): each file's two units run as one chain that reads it from its first row to its last,
    so its checksum comes from that read too, and the GET bytes are the dataset's, not two or three times:
    each byte once, and the footer once more (its last 8 bytes, then the footer), where the driver reads the
    row groups that decide the chains."""
    from dsm.rewrite import plan

    bucket = f"one-read-chains-{int(shuffle)}"
    client = moto_server.client()
    client.create_bucket(Bucket=bucket)
    sizes, footers = {}, {}
    for i in range(3):
        sink = io.BytesIO()
        pq.write_table(_table(6_000, seed=i), sink, compression="zstd")  # one row group
        client.put_object(Bucket=bucket, Key=f"data/part-{i}.parquet", Body=sink.getvalue())
        sizes[f"{bucket}/data/part-{i}.parquet"] = len(sink.getvalue())
        footers[f"{bucket}/data/part-{i}.parquet"] = int.from_bytes(sink.getvalue()[-8:-4], "little") + 8
    # pass 1 cuts a file of more than this many bytes into row ranges: here every file, in two
    monkeypatch.setattr(plan, "SCATTER_UNIT_BYTES", min(sizes.values()) // 2 + 1)
    seed = 3 if shuffle else None
    read = _reshard_reads(moto_server, bucket, tmp_path, num_shards=6, shuffle=shuffle, seed=seed, workers=2)
    assert read.keys() == sizes.keys()
    for key, size in sizes.items():
        assert size <= read[key] <= size + footers[key] + 8, (key, read[key], size, footers[key])


def test_deep_verify_from_one_read_still_names_a_changed_byte(
    moto_server: MotoServer, tmp_path: Path
) -> None:
    """A byte changed in a region no decoder reads (Parquet footer padding is not one; the bytes after the
    last row group's pages are) is found by the checksum of the same read."""
    bucket = "one-read-corrupt"
    sizes = _upload(moto_server, bucket, "parquet")
    options = moto_server.options()
    registry = str(tmp_path / "registry")
    contract = dsm.register(f"s3://{bucket}/data", name="c", registry=registry, storage_options=options)
    client = moto_server.client()
    body = bytearray(client.get_object(Bucket=bucket, Key="data/part-1.parquet")["Body"].read())
    body[len(body) // 2] ^= 0x01
    client.put_object(Bucket=bucket, Key="data/part-1.parquet", Body=bytes(body))
    with moto_server.get_bytes() as verified:
        report = dsm.verify(contract, deep=True, registry=registry, storage_options=options)
    assert not report.ok
    bad = {s.path: s for s in report.failures}
    assert set(bad) == {"part-1.parquet"} and bad["part-1.parquet"].status in ("corrupt", "unreadable")
    assert verified == sizes


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=3000),
    block=st.integers(1, 700),
    reads=st.lists(st.tuples(st.integers(-50, 3100), st.integers(-1, 1200), st.booleans()), max_size=12),
)
def test_any_order_of_reads_hashes_the_whole_file_once(
    data: bytes, block: int, reads: list[tuple[int, int, bool]]
) -> None:
    """Whatever a decoder reads, in any order, it gets the file's bytes, and the checksum is the file's;
    with no read behind the hash beyond what is kept, each byte is fetched once."""
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, stop: int) -> bytes:
        fetched.append((start, stop))
        return data[start:stop]

    f = OnePassFile(fetch, len(data), ["xxh3-128"], block=block)
    for pos, n, into in reads:
        at = f.seek(pos, 0 if pos >= 0 else 2)
        if into:
            buffer = bytearray(max(n, 0))
            got = bytes(buffer[: f.readinto(buffer)])
            assert got == data[at : at + max(n, 0)]
        else:
            assert f.read(n) == (data[at:] if n < 0 else data[at : at + n])
    assert f.finish() == {"xxh3-128": file_checksum(io.BytesIO(data))}
    assert f.fetched == sum(b - a for a, b in fetched) >= len(data)
    if not reads:
        assert f.fetched == len(data)


# ------------------------------------------------------------------------------------------ local disk


@st.composite
def _file_and_reads(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int, bool]]]:
    """A file's bytes, and reads of it: (offset within the file, bytes to read or -1 for all, readinto)."""
    data = draw(st.binary(max_size=3000))
    at = st.integers(0, len(data) + 5)  # a few positions past the end too
    reads = draw(st.lists(st.tuples(at, st.integers(-1, 1200), st.booleans()), max_size=12))
    return data, reads


@settings(max_examples=120, deadline=None)
@given(
    case=_file_and_reads(),
    in_order=st.booleans(),
    algorithms=st.sampled_from([["xxh3-128"], ["xxh3-128", "md5"], ["sha256"]]),
)
def test_a_local_file_read_in_any_order_is_hashed_whole_and_each_byte_once(
    case: tuple[bytes, list[tuple[int, int, bool]]], in_order: bool, algorithms: list[str]
) -> None:
    """On local disk the decoder gets the file's bytes whatever it reads; the bytes it reads from the first
    on are hashed as they return (``in_order``), the rest by ``finish``; either way every byte is hashed
    once and the checksums are the file's."""
    data, reads = case
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "shard")
        Path(path).write_bytes(data)
        heard: list[int] = []
        descriptor = os.open(path, os.O_RDONLY)
        try:
            once = onepass.LocalOnce(path, descriptor, algorithms, on_bytes=heard.append, in_order=in_order)
            f = once.file
            given = 0  # the bytes from the first on that the decoder has been given, in order
            for pos, n, into in reads:
                at = f.seek(pos)
                if n < 0 and not into and at > len(data) and not in_order:
                    continue  # pyarrow's own file cannot read "the rest" from past its end
                want = data[at:] if n < 0 else data[at : at + n]
                if into:
                    buffer = bytearray(len(want) if n < 0 else n)
                    got = bytes(buffer[: f.readinto(buffer)])
                else:
                    got = f.read(None if n < 0 else n)
                assert got == want
                if at <= given:
                    given = max(given, at + len(got))
            assert once.hashed_as_read == (given if in_order else 0)
            sums = once.finish()
            assert once.finish() == sums
            once.close()
        finally:
            os.close(descriptor)
    assert sums == file_checksums(io.BytesIO(data), algorithms)
    assert sum(heard) == len(data)


def test_a_local_file_changed_while_read_in_order_is_refused(tmp_path: Path) -> None:
    """Bytes hashed as the decoder read them are still checked against the file as opened: one that grew
    or was rewritten in place (same size) since it was opened fails ``finish``, naming the file."""
    for change in ("append", "rewrite"):
        path = tmp_path / f"{change}.jsonl"
        path.write_bytes(b'{"a": 1}\n' * 1000)
        descriptor = os.open(path, os.O_RDONLY)
        try:
            once = onepass.LocalOnce(str(path), descriptor, ["xxh3-128"], in_order=True)
            assert once.file.read(100) == path.read_bytes()[:100]
            stat = path.stat()
            if change == "append":
                with path.open("ab") as out:
                    out.write(b'{"a": 2}\n')
            else:
                path.write_bytes(b'{"a": 3}\n' * 1000)
                os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
            once.file.read()
            with pytest.raises(onepass.ShortRead, match=f"{change}.jsonl changed while being read"):
                once.finish()
            once.close()
        finally:
            os.close(descriptor)


def _local_shards(folder: Path, kind: str) -> None:
    """Three shards of ``kind``, written by dsm's writers (a gzip-compressed JSONL for ``jsonl.gz``)."""
    folder.mkdir(parents=True)
    name, options = {"jsonl.gz": ("jsonl", {"compression": "gzip"})}.get(kind, (kind, {}))
    fmt = get_format(name, **options)
    for i in range(3):
        table = _table(500 * (i + 1), seed=i)
        if kind == "webdataset":
            table = pa.table(
                {"__key__": [f"s{i}-{j:05d}" for j in range(table.num_rows)], "txt": table.column("text")}
            )
        suffix = ".jsonl.gz" if kind == "jsonl.gz" else fmt.extensions[0]
        with (folder / f"part-{i}{suffix}").open("wb") as out, fmt.open_writer(out, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=333):
                writer.write_batch(batch)


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "csv", "webdataset", "parquet"])
def test_line_and_tar_shards_on_local_disk_are_hashed_as_they_are_decoded(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``register``, ``verify --deep`` and a rewrite's source check take the checksum of a line or tar
    shard from the reads that decode it: nothing is read again after decoding. A Parquet file is
    decoded from its footer, and is hashed from the page cache after, as before."""
    finished: list[tuple[int, int]] = []
    original = onepass.LocalOnce.finish

    def finish(self: onepass.LocalOnce) -> dict[str, str]:
        finished.append((self.hashed_as_read, self.size()))
        return original(self)

    monkeypatch.setattr(onepass.LocalOnce, "finish", finish)
    _local_shards(tmp_path / "data", kind)
    registry = str(tmp_path / "registry")
    contract = dsm.register(str(tmp_path / "data"), name="local", registry=registry)
    assert dsm.verify(contract, deep=True, registry=registry).ok
    dsm.convert_format(contract, str(tmp_path / "out"), format="arrow", registry=registry)
    assert len(finished) == 9
    for hashed, size in finished:
        assert hashed == (0 if kind == "parquet" else size), (hashed, size)
