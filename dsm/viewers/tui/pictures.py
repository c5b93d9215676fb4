"""Pictures of image cells in the terminal, through ``textual-image``.

``auto`` takes what the terminal supports, asked once before the app starts (textual-image queries it at
import): Sixel, Kitty's graphics protocol, coloured half blocks on any other terminal, grey Unicode shade
blocks when not on a terminal. ``kitty``, ``sixel``, ``halfcell`` and ``unicode`` force one; ``none`` shows no
picture. Every image cell also keeps its one-line description (``image/png 640x480, 23 KB``), so a terminal
that can show nothing still says what the image is.

The bytes come from :meth:`dsm.inspect.RowSource.media_bytes`, which refuses masked fields; images larger
than :data:`MAX_PICTURE_BYTES` or that Pillow cannot decode get a line saying why instead of a picture.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from dsm.errors import InputError

if TYPE_CHECKING:
    from textual.widget import Widget

__all__ = ["IMAGE_MODES", "MAX_PICTURE_BYTES", "check_mode", "decode", "picture"]

IMAGE_MODES = ("auto", "kitty", "sixel", "halfcell", "unicode", "none")

MAX_PICTURE_BYTES = 32 << 20
"""Larger images are described, not drawn (decoding them would stall the screen)."""


def check_mode(mode: str) -> str:
    if mode not in IMAGE_MODES:
        raise InputError(f"--images {mode}: choose one of {', '.join(IMAGE_MODES)}")
    return mode


def prepare(mode: str) -> None:
    """Ask the terminal what it can show (only ``auto`` does), before Textual takes the terminal over."""
    if mode == "auto":
        import textual_image.widget  # noqa: F401  (queries the terminal once, at import)


def decode(data: bytes) -> object:
    """The image as Pillow reads it (fully loaded), or an :class:`InputError` saying why it cannot be."""
    from PIL import Image, UnidentifiedImageError

    if len(data) > MAX_PICTURE_BYTES:
        raise InputError(f"{len(data):,} bytes: too large to draw (at most {MAX_PICTURE_BYTES:,})")
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputError(f"Pillow cannot decode it ({exc})") from None
    if image.width == 0 or image.height == 0:
        raise InputError("it has no pixels")
    return image


def picture(image: object, mode: str, *, classes: str = "picture") -> Widget:
    """A widget drawing ``image`` (from :func:`decode`) with ``mode``."""
    if mode == "auto":
        from textual_image.widget import Image
    elif mode == "kitty":
        from textual_image.widget import TGPImage as Image  # type: ignore[assignment]
    elif mode == "sixel":
        from textual_image.widget import SixelImage as Image  # type: ignore[assignment]
    elif mode == "halfcell":
        from textual_image.widget import HalfcellImage as Image  # type: ignore[assignment]
    elif mode == "unicode":
        from textual_image.widget import UnicodeImage as Image  # type: ignore[assignment]
    else:
        raise InputError(f"no pictures with --images {mode}")
    return Image(image, classes=classes)  # type: ignore[arg-type]
