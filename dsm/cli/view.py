"""``dsm view``: parse the options and start the terminal viewer (:func:`dsm.viewers.tui.view`)."""

from __future__ import annotations

from typing import Annotated

import typer

from dsm.cli.options import (
    CacheDirOpt,
    ColumnsOpt,
    ReasonOpt,
    RefArg,
    RegistryOpt,
    StorageOpt,
    UnmaskOpt,
    storage_options,
)

__all__ = ["add_to", "view"]


def view(
    ref: RefArg,
    columns: ColumnsOpt = None,
    row: Annotated[int | None, typer.Option("--row", min=0, help="Start on this row (0-based).")] = None,
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key", help="Start on the row with FIELD=VALUE (repeatable); VALUE alone for the key."
        ),
    ] = None,
    images: Annotated[
        str,
        typer.Option(
            "--images",
            help="Pictures of image fields: auto (what the terminal supports), kitty, sixel, halfcell, "
            "unicode, or none.",
        ),
    ] = "auto",
    diff: Annotated[
        str | None, typer.Option("--diff", help="Open the row diff against this version first.")
    ] = None,
    unmask: UnmaskOpt = None,
    reason: ReasonOpt = None,
    cache_dir: CacheDirOpt = None,
    registry: RegistryOpt = None,
    storage_option: StorageOpt = None,
) -> None:
    """Browse rows in the terminal: a table over datasets of any size, the row by role (text, chat,
    images, JSON), RL episodes with playback, and the row diff against another version.

    Reads only the rows on screen. Classified fields are masked; --unmask is audited. Needs the view
    extra (pip install 'dsm[view]')."""
    import dsm.viewers.tui as tui

    names = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    tui.view(
        ref,
        columns=names or None,
        row=row,
        key=key or None,
        unmask=unmask or (),
        reason=reason,
        images=images,
        diff=diff,
        registry=registry,
        storage_options=storage_options(storage_option),
        cache_dir=cache_dir,
    )


_EPILOG = (
    "Examples:\n\n  dsm view web-text@prod\n\n  dsm view chats@3 --row 4000000 --columns id,messages\n\n"
    "  dsm view events --key id=123\n\n  dsm view images --images halfcell\n\n"
    "  dsm view web-text@4 --diff web-text@3\n\n"
    "Keys: arrows, PgUp/PgDn, Home/End, g row, / search, n next, :key 123, f columns, c copy as JSON, "
    "d diff, e episode, ? help, q quit.\n\n"
    "Exit codes: 0 closed, 2 bad input, no terminal or the view extra missing, 3 storage."
)


def add_to(app: typer.Typer) -> None:
    app.command(name="view", epilog=_EPILOG)(view)
