"""The version of dsm, for every layer: nothing below the package face imports ``dsm`` for it."""

from __future__ import annotations

__all__ = ["__version__", "tool_name"]

__version__ = "0.1.0"


def tool_name() -> str:
    """``dsm 0.1.0``: what contracts and journals record as the tool that wrote them."""
    return f"dsm {__version__}"
