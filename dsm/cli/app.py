"""The typer app: every command module of the CLI, added to one app. No command module imports this one.

Each module (named like its library module in :mod:`dsm.commands`) parses its options, makes one library
call and renders the result; :class:`dsm.cli.CommandGroup` gives every exception its exit code.
"""

from __future__ import annotations

import typer

from dsm.cli import (
    CommandGroup,
    bench,
    catalog,
    cutover,
    diff,
    footprint,
    inspect,
    lifecycle,
    policy,
    register,
    rewrite,
    serve,
    storage_check,
    verify,
    view,
)

__all__ = ["app"]

app = typer.Typer(
    name="dsm",
    cls=CommandGroup,
    help="Register, verify, rewrite, benchmark and move ML datasets under YAML contracts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

for _module in (
    register,
    verify,
    catalog,
    rewrite,
    bench,
    diff,
    inspect,
    cutover,
    storage_check,
    footprint,
    lifecycle,
    policy,
    serve,
    view,
):
    _module.add_to(app)
