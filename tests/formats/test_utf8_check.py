"""The compiled UTF-8 check of string columns (``check_utf8``'s fast path) agrees with Arrow's full validation
and with Python's strict decoder on generated texts: valid and invalid sequences of every kind (overlong
forms, surrogates, code points past U+10FFFF, lone continuation bytes, cut characters, a character split
between two values) at every place around the kernel's 16- and 64-byte steps, sliced arrays, string and
large_string; damaged offsets are refused, never read past.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.errors import FormatError
from dsm.formats import _common
from dsm.formats._common import check_utf8

needs_kernel = pytest.mark.skipif(_common._utf8_valid is None, reason="the compiled kernel is not built here")

VALID = [
    "é".encode(),
    "東".encode(),
    "😀".encode(),
    b"\xc2\x80",
    b"\xdf\xbf",
    b"\xe0\xa0\x80",
    b"\xed\x9f\xbf",  # the last code point before the surrogates
    b"\xee\x80\x80",
    b"\xef\xbf\xbf",
    b"\xf0\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf",  # U+10FFFF
    b"\x7f",
    b"\x00",
]
INVALID = [
    b"\x80",  # a lone continuation byte
    b"\xbf",
    b"\xc0\x80",  # overlong forms
    b"\xc1\xbf",
    b"\xe0\x80\x80",
    b"\xe0\x9f\xbf",
    b"\xf0\x80\x80\x80",
    b"\xf0\x8f\xbf\xbf",
    b"\xed\xa0\x80",  # surrogates
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",  # past U+10FFFF
    b"\xf5\x80\x80\x80",
    b"\xff",
    b"\xfe",
    b"\xc3",  # cut characters
    b"\xe6\x9d",
    b"\xf0\x9f\x98",
    b"\xc3A",
    b"\xe6\x9dA",
]
_RUNS = [0, 1, 15, 16, 17, 31, 47, 63, 64, 65, 127, 128, 200]


@st.composite
def texts(draw: st.DrawFn, *, bad: float) -> bytes:
    """A value of ASCII runs around the kernel's steps and characters that are not ASCII; some of them
    (about ``bad`` of the pieces) invalid."""
    out = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        out += b"a" * draw(st.sampled_from(_RUNS))
        kinds = [VALID, VALID, VALID, INVALID] if draw(st.floats(0, 1)) < bad else [VALID]
        out += draw(st.sampled_from(draw(st.sampled_from(kinds))))
    return bytes(out)


def _strict(value: bytes) -> bool:
    try:
        value.decode("utf-8", "strict")
    except UnicodeDecodeError:
        return False
    return True


def _array(values: list[bytes], large: bool) -> pa.Array:
    """A string array of ``values`` as they are (Arrow's constructors would check them)."""
    width = np.int64 if large else np.int32
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(width)
    kind = pa.large_string() if large else pa.string()
    data = pa.py_buffer(b"".join(values))
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(offsets.tobytes()), data])


def _arrow_valid(array: pa.Array) -> bool:
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


@needs_kernel
@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(texts(bad=0.15), min_size=1, max_size=12),
    large=st.booleans(),
    cut=st.integers(0, 3),
)
def test_the_kernel_says_what_arrow_and_pythons_decoder_say(
    values: list[bytes], large: bool, cut: int
) -> None:
    array = _array(values, large)
    for piece in (array, array.slice(min(cut, len(array) - 1)), array.slice(0, max(1, len(array) - cut))):
        expected = all(_strict(v) for v in piece.cast(pa.large_binary()).to_pylist())
        assert _arrow_valid(piece) == expected
        assert _common.texts_valid(piece) == expected


@needs_kernel
@settings(max_examples=200, deadline=None)
@given(values=st.lists(texts(bad=0.0), min_size=2, max_size=8), at=st.integers(0, 200))
def test_a_character_split_between_two_values_is_invalid(values: list[bytes], at: int) -> None:
    # The bytes of all values together are valid UTF-8; a cut between two values inside a character leaves
    # both invalid, which a check of the bytes as one run would not see.
    joined = b"".join(values)
    assert _common.texts_valid(_array([joined, b""], large=False))
    inside = [i for i in range(1, len(joined)) if joined[i] & 0xC0 == 0x80]
    if not inside:
        return
    cut = inside[at % len(inside)]
    array = _array([joined[:cut], joined[cut:]], large=False)
    assert not _arrow_valid(array)
    assert not _common.texts_valid(array)


@needs_kernel
def test_every_byte_at_every_place_of_a_block() -> None:
    # Each byte value alone, after every length of ASCII run around 16 and 64, as one value and cut in two.
    for run in (0, 15, 16, 17, 48, 63, 64, 65, 79, 80, 81):
        for byte in range(256):
            value = b"x" * run + bytes([byte]) + b"y" * 20
            array = _array([value, b"z", value[: run + 1]], large=bool(byte & 1))
            assert _common.texts_valid(array) == (byte < 0x80), (run, byte)


@needs_kernel
def test_damaged_offsets_are_refused_not_read() -> None:
    good = _array([b"abc", b"de"], large=False)
    _, offsets, data = good.buffers()
    assert _common._utf8_valid is not None
    for bad in ([0, 4, 3], [0, 3, 99], [-1, 3, 5], [2, 1, 5]):
        damaged = pa.py_buffer(np.array(bad, np.int32).tobytes())
        assert not _common._utf8_valid(damaged, data, 0, 2, False)
    with pytest.raises(ValueError, match="offsets do not cover"):
        _common._utf8_valid(offsets, data, 1, 2, False)


def test_check_utf8_names_the_field_of_a_bad_value_on_either_path(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = pa.record_batch([pa.array([1, 2]), _array([b"ok", b"caf\xc3"], large=False)], names=["id", "text"])
    good = pa.record_batch([pa.array(["ok", None, "été"])], names=["text"])
    for kernel in (_common._utf8_valid, None):
        monkeypatch.setattr(_common, "_utf8_valid", kernel)
        with pytest.raises(FormatError, match=r'shard s\.parquet row group 3 field "text"'):
            check_utf8(bad, "shard s.parquet row group 3")
        assert check_utf8(good, "shard s.parquet row group 0") is good
