"""What long work reports to: the CLI passes a progress bar, the library default ignores it."""

from __future__ import annotations

from typing import Protocol

__all__ = ["NullProgress", "Progress"]


class Progress(Protocol):
    """What long work reports to (the CLI passes a progress bar; the library default ignores it)."""

    def start(self, *, total_bytes: int, total_units: int, description: str) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def finish(self) -> None: ...


class NullProgress:
    def start(self, *, total_bytes: int, total_units: int, description: str) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        pass

    def finish(self) -> None:
        pass
