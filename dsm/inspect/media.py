"""What a media value is, from its first bytes: type, dimensions, duration. Pure functions over bytes.

Images (PNG, JPEG, GIF, WebP, BMP, TIFF), audio (WAV, FLAC, MP3, Ogg) and video (MP4/QuickTime,
WebM/Matroska, AVI) are recognised by their magic bytes; dimensions and durations are read from their headers
where the header holds them (nothing is decoded). A value whose bytes are all zero, or that is empty, is
reported as such: the "image that is all zeros" bug.

>>> from dsm.demo import make_png
>>> info = sniff(make_png(4, 3, 1))
>>> info.media_type, info.width, info.height
('image/png', 4, 3)
"""

from __future__ import annotations

import posixpath
import struct
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MEDIA_KINDS", "MediaInfo", "MediaRef", "kind_of", "media_type_of_path", "sniff"]

MEDIA_KINDS = ("image", "audio", "video")

_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".wav": "audio/wav",
    ".flac": "audio/flac",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".opus": "audio/ogg",
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mov": "video/quicktime",
    ".webm": "video/webm",
    ".mkv": "video/x-matroska",
    ".avi": "video/x-msvideo",
}


@dataclass(frozen=True, kw_only=True)
class MediaInfo:
    """What the bytes of one value are. ``media_type`` is None when no known magic matched."""

    size: int
    media_type: str | None = None
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    """Seconds, where the header says (WAV, FLAC, MP4)."""
    sample_rate: int | None = None
    channels: int | None = None
    anomalies: tuple[str, ...] = field(default=())

    @property
    def kind(self) -> str | None:
        return kind_of(self.media_type)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"size": self.size, "media_type": self.media_type}
        for name in ("width", "height", "duration", "sample_rate", "channels"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def describe(self) -> str:
        """One line: ``image/png 64x48, 1.2 KB``."""
        parts = [self.media_type or "unknown bytes"]
        if self.width is not None and self.height is not None:
            parts.append(f"{self.width}x{self.height}")
        if self.duration is not None:
            parts.append(f"{self.duration:.2f} s")
        if self.sample_rate is not None:
            parts.append(f"{self.sample_rate} Hz" + (f" x{self.channels}" if self.channels else ""))
        return " ".join(parts) + f", {_size_text(self.size)}"


@dataclass(frozen=True, kw_only=True)
class MediaRef:
    """Where the bytes of one media value are, for a viewer to serve them.

    ``source`` is ``member`` (the value is stored as it is in the shard, a WebDataset member: ``url``,
    ``offset`` and ``length`` are that byte range of the shard, servable with HTTP Range), ``file`` (the
    value is a path: the bytes are the whole file at ``url``) or ``value`` (the bytes are decoded from the
    row: Parquet, Arrow, JSONL, CSV; no stored range).
    """

    position: int
    field: str
    source: str
    media_type: str | None
    size: int
    url: str | None = None
    offset: int | None = None
    length: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "field": self.field,
            "source": self.source,
            "media_type": self.media_type,
            "size": self.size,
            "url": self.url,
            "offset": self.offset,
            "length": self.length,
        }


def _size_text(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


def kind_of(media_type: str | None) -> str | None:
    """``image``, ``audio`` or ``video`` of a media type, else None."""
    if not media_type:
        return None
    head = media_type.split("/", 1)[0]
    return head if head in MEDIA_KINDS else None


def media_type_of_path(path: str) -> str | None:
    """The media type a file name's extension names (``.jpg`` -> ``image/jpeg``), or None."""
    return _EXTENSIONS.get(posixpath.splitext(path.split("?", 1)[0])[1].lower())


def sniff(data: bytes, *, declared: str | None = None) -> MediaInfo:
    """The media type and header facts of ``data``; anomalies name what looks wrong (empty, all zero
    bytes, bytes of another type than ``declared``)."""
    size = len(data)
    anomalies: list[str] = []
    if size == 0:
        return MediaInfo(size=0, media_type=declared, anomalies=("empty value (0 bytes)",))
    facts: dict[str, Any] = {}
    for test in _SNIFFERS:
        found = test(data)
        if found is not None:
            facts = found
            break
    media_type = facts.pop("media_type", None)
    if not data.strip(b"\x00"):
        anomalies.append(f"all {size} bytes are zero")
    elif media_type is None and declared:
        anomalies.append(f"declared {declared}, but the bytes match no known media type")
    elif media_type is not None and declared and not _same_type(declared, media_type):
        anomalies.append(f"declared {declared}, but the bytes are {media_type}")
    if facts.get("width") == 0 or facts.get("height") == 0:
        anomalies.append("an image with no pixels (width or height 0)")
    return MediaInfo(size=size, media_type=media_type or declared, anomalies=tuple(anomalies), **facts)


def _same_type(a: str, b: str) -> bool:
    aliases = {"image/jpg": "image/jpeg", "audio/x-wav": "audio/wav", "audio/wave": "audio/wav"}
    return aliases.get(a.lower(), a.lower()) == aliases.get(b.lower(), b.lower())


# ------------------------------------------------------------------------------------------ sniffers


def _png(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    out: dict[str, Any] = {"media_type": "image/png"}
    if len(data) >= 24 and data[12:16] == b"IHDR":
        out["width"], out["height"] = struct.unpack(">II", data[16:24])
    return out


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(b"\xff\xd8\xff"):
        return None
    out: dict[str, Any] = {"media_type": "image/jpeg"}
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            break
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        if marker in _SOF and at + 9 <= len(data):
            out["height"], out["width"] = struct.unpack(">HH", data[at + 5 : at + 9])
            break
        if marker == 0xDA or length < 2:  # start of scan: no frame header before it
            break
        at += 2 + length
    return out


def _gif(data: bytes) -> dict[str, Any] | None:
    if not data.startswith((b"GIF87a", b"GIF89a")):
        return None
    out: dict[str, Any] = {"media_type": "image/gif"}
    if len(data) >= 10:
        out["width"], out["height"] = struct.unpack("<HH", data[6:10])
    return out


def _webp(data: bytes) -> dict[str, Any] | None:
    if not (data.startswith(b"RIFF") and data[8:12] == b"WEBP"):
        return None
    out: dict[str, Any] = {"media_type": "image/webp"}
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        out["width"] = int.from_bytes(data[26:28], "little") & 0x3FFF
        out["height"] = int.from_bytes(data[28:30], "little") & 0x3FFF
    elif chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        out["width"], out["height"] = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    elif chunk == b"VP8X" and len(data) >= 30:
        out["width"] = int.from_bytes(data[24:27], "little") + 1
        out["height"] = int.from_bytes(data[27:30], "little") + 1
    return out


def _bmp(data: bytes) -> dict[str, Any] | None:
    if not (data.startswith(b"BM") and len(data) >= 26 and int.from_bytes(data[14:18], "little") >= 12):
        return None
    out: dict[str, Any] = {"media_type": "image/bmp"}
    if int.from_bytes(data[14:18], "little") == 12:
        out["width"], out["height"] = struct.unpack("<HH", data[18:22])
    else:
        width, height = struct.unpack("<ii", data[18:26])
        out["width"], out["height"] = width, abs(height)
    return out


def _tiff(data: bytes) -> dict[str, Any] | None:
    if data.startswith((b"II*\x00", b"MM\x00*")):
        return {"media_type": "image/tiff"}
    return None


def _wav(data: bytes) -> dict[str, Any] | None:
    if not (data.startswith(b"RIFF") and data[8:12] == b"WAVE"):
        return None
    out: dict[str, Any] = {"media_type": "audio/wav"}
    at, rate, block = 12, 0, 0
    while at + 8 <= len(data):
        kind, length = data[at : at + 4], int.from_bytes(data[at + 4 : at + 8], "little")
        if kind == b"fmt " and at + 24 <= len(data):
            channels, rate = struct.unpack("<HI", data[at + 10 : at + 16])
            block = int.from_bytes(data[at + 20 : at + 22], "little")
            out["channels"], out["sample_rate"] = channels, rate
        elif kind == b"data":
            if rate and block:
                out["duration"] = round(length / block / rate, 6)
            break
        at += 8 + length + (length & 1)
    return out


def _flac(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(b"fLaC"):
        return None
    out: dict[str, Any] = {"media_type": "audio/flac"}
    if len(data) >= 26 and data[4] & 0x7F == 0:  # STREAMINFO
        info = int.from_bytes(data[18:26], "big")
        rate = info >> 44
        channels = ((info >> 41) & 0x7) + 1
        samples = info & 0xFFFFFFFFF
        out["sample_rate"], out["channels"] = rate, channels
        if rate:
            out["duration"] = round(samples / rate, 6)
    return out


def _mp3(data: bytes) -> dict[str, Any] | None:
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return {"media_type": "audio/mpeg"}
    return None


def _ogg(data: bytes) -> dict[str, Any] | None:
    return {"media_type": "audio/ogg"} if data.startswith(b"OggS") else None


def _mp4(data: bytes) -> dict[str, Any] | None:
    if data[4:8] != b"ftyp":
        return None
    brand = data[8:12]
    out: dict[str, Any] = {"media_type": "video/quicktime" if brand == b"qt  " else "video/mp4"}
    duration = _mvhd_duration(data)
    if duration is not None:
        out["duration"] = duration
    return out


def _mvhd_duration(data: bytes) -> float | None:
    """The movie duration from ``moov/mvhd``, when the ``moov`` box is within ``data``."""
    at = 0
    while at + 8 <= len(data):
        size, kind = int.from_bytes(data[at : at + 4], "big"), data[at + 4 : at + 8]
        header = 8
        if size == 1 and at + 16 <= len(data):
            size, header = int.from_bytes(data[at + 8 : at + 16], "big"), 16
        if size < header:
            return None
        if kind == b"moov":
            inner = at + header
            while inner + 8 <= min(at + size, len(data)):
                box, name = int.from_bytes(data[inner : inner + 4], "big"), data[inner + 4 : inner + 8]
                if name == b"mvhd" and inner + 32 <= len(data):
                    version = data[inner + 8]
                    if version == 1 and inner + 44 <= len(data):
                        scale = int.from_bytes(data[inner + 28 : inner + 32], "big")
                        length = int.from_bytes(data[inner + 32 : inner + 40], "big")
                    else:
                        scale = int.from_bytes(data[inner + 20 : inner + 24], "big")
                        length = int.from_bytes(data[inner + 24 : inner + 28], "big")
                    return round(length / scale, 6) if scale else None
                if box < 8:
                    return None
                inner += box
            return None
        at += size
    return None


def _matroska(data: bytes) -> dict[str, Any] | None:
    if not data.startswith(b"\x1a\x45\xdf\xa3"):
        return None
    return {"media_type": "video/webm" if b"webm" in data[:64] else "video/x-matroska"}


def _avi(data: bytes) -> dict[str, Any] | None:
    if data.startswith(b"RIFF") and data[8:12] == b"AVI ":
        return {"media_type": "video/x-msvideo"}
    return None


_SNIFFERS = (_png, _jpeg, _gif, _webp, _bmp, _tiff, _wav, _flac, _ogg, _mp4, _matroska, _avi, _mp3)
