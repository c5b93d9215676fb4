"""Arrow IPC passes the conformance suite; plus compression and batch boundaries."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from conformance import TYPE_CASES, FormatConformance
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError, InputError
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


def _arrow_file(batches: list[pa.RecordBatch]) -> bytes:
    sink = io.BytesIO()
    with ipc.new_file(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue()


def _spliced(body_of: bytes, footer_of: bytes) -> bytes:
    """The messages of one file (up to its end-of-stream marker) followed by another file's footer."""
    footer_length = int.from_bytes(footer_of[-10:-6], "little")
    footer = footer_of[-10 - footer_length :]
    body_length = int.from_bytes(body_of[-10:-6], "little")
    return body_of[: -10 - body_length] + footer


@pytest.mark.parametrize("more", ["body", "footer"])
def test_a_footer_that_lists_other_batches_than_the_body_is_damage(more: str) -> None:
    """A whole read streams the body and checks each batch against the footer's block for it."""
    batches = [pa.record_batch({"x": pa.array(range(i * 10, i * 10 + 10))}) for i in range(3)]
    two, three = _arrow_file(batches[:2]), _arrow_file(batches)
    data = _spliced(three, two) if more == "body" else _spliced(two, three)
    assert ipc.open_file(io.BytesIO(data)).num_record_batches == (2 if more == "body" else 3)
    with pytest.raises(FormatError, match=r"shard s\.arrow.*the file is damaged"):
        list(ArrowFormat().iter_batches(io.BytesIO(data), shard="s.arrow"))
    good = list(ArrowFormat().iter_batches(io.BytesIO(three), shard="s.arrow"))
    assert pa.Table.from_batches(good).equals(pa.Table.from_batches(batches))


@settings(max_examples=60, deadline=None)
@given(
    batch_count=st.integers(1, 6),
    data=st.data(),
    rows=st.integers(1, 40),
    batch_rows=st.sampled_from([3, 64, 65_536]),
)
def test_a_batch_that_fails_validation_is_raised_after_every_batch_before_it(
    batch_count: int, data: st.DataObject, rows: int, batch_rows: int
) -> None:
    """The full validation of each batch runs ahead of the reader, on a helper thread; what is yielded,
    and where the error comes, is as if it ran in line: every row before the bad batch, none of it."""
    bad = data.draw(st.integers(0, batch_count - 1), label="bad batch")
    batches = [
        pa.record_batch(
            {"n": pa.array(range(b * rows, (b + 1) * rows)), "s": [f"MARK{b:03d}:{i}" for i in range(rows)]}
        )
        for b in range(batch_count)
    ]
    good = _arrow_file(batches)
    damaged = good.replace(f"MARK{bad:03d}".encode(), b"\xffARK" + f"{bad:03d}".encode(), 1)
    assert damaged != good
    reader = ArrowFormat().iter_batches(io.BytesIO(damaged), shard="s.arrow", batch_rows=batch_rows)
    seen: list[pa.RecordBatch] = []
    with pytest.raises(FormatError, match=rf'shard s\.arrow record batch {bad} field "s": .*UTF-?8'):
        for batch in reader:
            seen.append(batch)
    assert sum(b.num_rows for b in seen) == bad * rows
    assert all(b.num_rows <= batch_rows for b in seen)
    if seen:
        assert pa.Table.from_batches(seen).equals(pa.Table.from_batches(batches[:bad]).combine_chunks())
    whole = list(ArrowFormat().iter_batches(io.BytesIO(good), shard="s.arrow", batch_rows=batch_rows))
    assert pa.Table.from_batches(whole).equals(pa.Table.from_batches(batches))
