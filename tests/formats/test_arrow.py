"""Arrow IPC passes the conformance suite; plus compression and batch boundaries."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from conformance import TYPE_CASES, FormatConformance

from dsm.errors import InputError
from dsm.formats.arrow import ArrowFormat


class TestArrow(FormatConformance):
    format_name = "arrow"
    supported = frozenset(TYPE_CASES)


class TestArrowZstd(TestArrow):
    options = {"compression": "zstd"}  # noqa: RUF012


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_compressed_files_are_smaller_and_readable_by_pyarrow(codec: str) -> None:
    table = pa.table({"s": pa.array(["abc" * 50] * 2000)})
    plain, packed = io.BytesIO(), io.BytesIO()
    for fmt, sink in ((ArrowFormat(), plain), (ArrowFormat(compression=codec), packed)):
        with fmt.open_writer(sink, table.schema) as writer:  # type: ignore[arg-type]
            writer.write_batch(table.to_batches()[0])
    assert len(packed.getvalue()) < len(plain.getvalue()) // 10
    assert ipc.open_file(io.BytesIO(packed.getvalue())).read_all().equals(table)


def test_written_batches_are_bounded() -> None:
    table = pa.table({"x": pa.array(range(200_000))})
    sink = io.BytesIO()
    with ArrowFormat().open_writer(sink, table.schema) as writer:  # type: ignore[arg-type]
        writer.write_batch(table.combine_chunks().to_batches()[0])
    reader = ipc.open_file(io.BytesIO(sink.getvalue()))
    assert [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)] == [
        65536,
        65536,
        65536,
        3392,
    ]


def test_unknown_compression_is_refused() -> None:
    with pytest.raises(InputError):
        ArrowFormat(compression="gzip")
