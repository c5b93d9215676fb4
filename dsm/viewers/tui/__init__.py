"""``dsm view``: a terminal viewer for text, chat, multimodal and RL rows, over datasets of any size.

A Textual app (the ``view`` extra: ``pip install 'dsm[view]'``) on the inspect layer: a lazy table that reads
only the blocks of rows on screen (:mod:`~dsm.viewers.tui.window`, :mod:`~dsm.viewers.tui.table`), the
selected row by role in a detail pane (texts, chat threads, pictures, JSON; :mod:`~dsm.viewers.tui.detail`),
RL episodes with playback (:mod:`~dsm.viewers.tui.episode`), and the keyed row diff side by side
(:mod:`~dsm.viewers.tui.diff`). Classified fields are masked by the layer; ``unmask`` is audited there with
``command="view"``.

>>> view("chats@prod", row=3)  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dsm.errors import InputError

if TYPE_CHECKING:
    from dsm.inspect.source import RowSource
    from dsm.registry import Registry
    from dsm.viewers.tui.app import ViewerApp

__all__ = ["EXTRA_HINT", "make_app", "require_textual", "view"]

EXTRA_HINT = "pip install 'dsm[view]'"


def require_textual() -> None:
    """Refuse (exit 2 in the CLI) when the ``view`` extra is not installed, naming it."""
    try:
        import textual  # noqa: F401
        import textual_image  # noqa: F401
    except ImportError as exc:
        raise InputError(
            f"dsm view needs the 'view' extra (Textual and textual-image; missing {exc.name}): {EXTRA_HINT}"
        ) from None


def make_app(
    ref: str,
    *,
    columns: Sequence[str] | None = None,
    row: int | None = None,
    key: Sequence[str] | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    images: str = "auto",
    diff: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> ViewerApp:
    """The app :func:`view` runs, with every argument checked (nothing is read but the contract)."""
    require_textual()
    from dsm.inspect.source import open_rows
    from dsm.registry import open_registry
    from dsm.viewers.tui.app import ViewerApp
    from dsm.viewers.tui.pictures import check_mode

    check_mode(images)
    reg = open_registry(registry, storage_options)

    def opener(other: str) -> RowSource:
        return open_rows(
            other,
            registry=reg,
            unmask=unmask,
            reason=reason,
            command="view",
            storage_options=storage_options,
            cache_dir=cache_dir,
        )

    source = opener(ref)
    if columns is not None:
        for name in columns:
            source.field(name)
    if row is not None and not 0 <= row < source.num_rows:
        raise InputError(f"--row {row}: {source.ref} has rows 0 to {source.num_rows - 1:,}")
    if row is not None and key:
        raise InputError("give --row or --key, not both")
    return ViewerApp(source, columns=columns, row=row, key=key, images=images, diff=diff, opener=opener)


def view(
    ref: str,
    *,
    columns: Sequence[str] | None = None,
    row: int | None = None,
    key: Sequence[str] | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    images: str = "auto",
    diff: str | None = None,
    registry: str | Registry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
) -> None:
    """Open the terminal viewer on ``ref`` and return when the person quits.

    Refuses (:class:`InputError`) without the ``view`` extra, on an unknown dataset or column, a row out
    of range or an unknown image mode, and without a terminal, before anything but the contract is read.
    """
    app = make_app(
        ref,
        columns=columns,
        row=row,
        key=key,
        unmask=unmask,
        reason=reason,
        images=images,
        diff=diff,
        registry=registry,
        storage_options=storage_options,
        cache_dir=cache_dir,
    )
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise InputError(
            "dsm view needs a terminal (stdin and stdout); for piped output use dsm head, sample or find"
        )
    from dsm.viewers.tui.pictures import prepare

    prepare(images)
    app.run()
