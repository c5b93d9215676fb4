"""The text of CSV files (private to the CSV format): its quotes checked against RFC 4180, and the lines
and bytes that error messages name.

A quote opens a value (at its start), closes it (before a delimiter, a line end or the end of the text) or
is doubled inside it. Then every quote toggles "inside quotes", which is what the record scan of
:mod:`dsm.formats._lines` counts, and pyarrow's parser, Python's csv module and that scan read the same
records. A quote anywhere else, which each of them reads its own lenient way, is refused.
"""

from __future__ import annotations

import codecs
import io
from typing import Any

import numpy as np

from dsm.formats._lines import count_line_breaks

__all__ = ["CheckedText", "MisplacedQuote", "QuoteCheck", "TextBytes", "first_invalid_utf8", "line_of"]

_BOM = b"\xef\xbb\xbf"
_BLOCK_BYTES = 4 * 1024 * 1024


class MisplacedQuote(Exception):
    """A CSV quote where RFC 4180 allows none, at byte ``offset`` of the (decompressed) text: ``kind`` is
    ``"opening"`` (a quote inside an unquoted value), ``"closing"`` (text after a closing quote) or
    ``"unclosed"`` (a quoted value the text ends in). ``opened`` is where the quoted value a closing quote
    ends was opened."""

    def __init__(self, offset: int, kind: str, opened: int | None = None) -> None:
        self.offset = offset
        self.kind = kind
        self.opened = opened
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        if self.kind == "closing":
            return (
                "text after the closing quote of a quoted value (a quote inside a quoted value is doubled: "
                '"say ""hi""")'
            )
        if self.kind == "unclosed":
            return "a quoted value is never closed: the file ends inside it"
        return (
            "a quote inside an unquoted value (a value holding a quote is quoted and the quote doubled: "
            '"5"" disk")'
        )


class QuoteCheck:
    """Checks the quotes of CSV text fed to it in consecutive chunks: the k-th quote of the text opens a
    value when k is even (so it follows a delimiter, a newline, the start of the text or the quote just
    before it, which makes the pair a doubled quote) and closes one when k is odd (so a delimiter, a newline,
    the end of the text or a quote follows it). Only the quotes are looked at, with numpy.

    >>> check = QuoteCheck(delimiter=ord(","))
    >>> check.feed(b'a,"b ""c"" d",e\\n'); check.finish()
    >>> check = QuoteCheck(delimiter=ord(","))
    >>> check.feed(b'a,"b"c\\n')
    Traceback (most recent call last):
    ...
    dsm.formats._quotes.MisplacedQuote: text after the closing quote of a quoted value (...)
    """

    def __init__(self, *, delimiter: int, quote: int = 34) -> None:
        self._quote = quote
        self._bounds = np.zeros(256, dtype=bool)
        for byte in (delimiter, 10, 13, quote):
            self._bounds[byte] = True
        self._quotes = 0
        self._offset = 0
        self._start = 0  # where the first value starts: after a byte-order mark, if the text has one
        self._head = b""  # the text's first bytes, up to a byte-order mark's length (chunks may cut it)
        self._previous: int | None = None  # the last byte fed; None before any
        self._open_end: int | None = None  # a closing quote that ended the last chunk, before its next byte
        self._opened = 0  # where the last quoted value opened

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        data = np.frombuffer(chunk, dtype=np.uint8)
        if not len(data):
            return
        if self._offset < len(_BOM):
            self._head += bytes(data[: len(_BOM) - self._offset])
            if self._head == _BOM:
                self._start = len(_BOM)
        if self._open_end is not None:
            if not self._bounds[data[0]]:
                raise MisplacedQuote(self._open_end, "closing", self._opened)
            self._open_end = None
        at = np.flatnonzero(data == self._quote)
        if len(at):
            self._check(data, at)
            self._quotes += len(at)
        self._offset += len(data)
        self._previous = int(data[-1])

    def _check(self, data: np.ndarray, at: np.ndarray) -> None:
        """The quotes at ``at`` of chunk ``data``: every other one opens a value, the rest close one."""
        first = self._quotes & 1  # the first quote of the chunk closes a value
        opening, closing = at[first::2], at[1 - first :: 2]
        before = np.empty(len(opening), dtype=np.uint8)  # the byte before each opening quote
        if len(opening):
            before[1:] = data[opening[1:] - 1]
            if opening[0]:
                before[0] = data[opening[0] - 1]
            else:  # the chunk's first byte: the byte before it is the last one fed (at the start: a line)
                before[0] = 10 if self._previous is None else self._previous
        good_open = self._bounds[before]
        if len(opening) and self._offset + int(opening[0]) == self._start:
            good_open[0] = True
        ends_chunk = len(closing) and closing[-1] == len(data) - 1
        inner = closing[:-1] if ends_chunk else closing  # their next byte is in this chunk
        good_close = self._bounds[data[inner + 1]]
        bad_open = int(np.argmin(good_open)) if not good_open.all() else None
        bad_close = int(np.argmin(good_close)) if not good_close.all() else None
        # An opening quote right after a closing one is the second of a doubled quote, not a new value.
        opens = opening[before != self._quote]
        if bad_open is not None and (bad_close is None or opening[bad_open] < inner[bad_close]):
            raise MisplacedQuote(self._offset + int(opening[bad_open]), "opening")
        if bad_close is not None:
            where = inner[bad_close]
            earlier = opens[opens < where]
            opened = self._offset + int(earlier[-1]) if len(earlier) else self._opened
            raise MisplacedQuote(self._offset + int(where), "closing", opened)
        if ends_chunk:
            self._open_end = self._offset + int(closing[-1])
        if len(opens):
            self._opened = self._offset + int(opens[-1])

    def finish(self) -> None:
        """The end of the text, which a closing quote may end, but not an opening one."""
        self._open_end = None
        if self._quotes & 1:
            raise MisplacedQuote(self._opened, "unclosed")


class CheckedText(io.RawIOBase):
    """A stream's bytes, passed on as read after :class:`QuoteCheck` has seen them: what pyarrow's CSV
    parser is given, so that no record it reads has a quote RFC 4180 does not allow."""

    def __init__(self, stream: Any, check: QuoteCheck) -> None:
        self._stream = stream
        self._check = check

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = bytes(self._stream.read() if size is None or size < 0 else self._stream.read(size))
        if data:
            self._check.feed(data)
        elif size != 0:
            self._check.finish()
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def line_of(stream: Any, offset: int) -> int:
    """The 1-based line of byte ``offset`` of the text ``stream`` reads from its start."""
    breaks, left, carriage_return = 0, offset, False
    while left > 0:
        data = bytes(stream.read(min(left, _BLOCK_BYTES)))
        if not data:
            break
        if carriage_return and not data.startswith(b"\n"):
            breaks += 1  # the \r the last read ended in was a line end of its own
        breaks += count_line_breaks(data, more=True)
        carriage_return = data.endswith(b"\r")
        left -= len(data)
    return breaks + carriage_return + 1  # a quote at ``offset`` follows: that \r ended a line


def first_invalid_utf8(stream: Any) -> int | None:
    """The offset of the first byte of the text ``stream`` reads from its start that is not UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    done = 0
    while True:
        data = bytes(stream.read(_BLOCK_BYTES))
        held = len(decoder.getstate()[0])  # the end of a character the last read cut, decoded with these
        try:
            decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            return done - held + exc.start
        if not data:
            return None
        done += len(data)


class TextBytes(io.RawIOBase):
    """A RawIOBase over any object with ``read(n)`` (Arrow streams), for ``io.TextIOWrapper``."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
