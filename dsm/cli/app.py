"""The typer app: every command module of the CLI, added to one app. No command module imports this one.

Each module (named like its library module in :mod:`dsm.commands`) parses its options, makes one library
call and renders the result; :class:`dsm.cli.CommandGroup` gives every exception its exit code.
"""

from __future__ import annotations

from typing import Annotated

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
    epilog="Exit codes: 0 done, every check held; 1 the data failed a check; 2 bad usage or input (nothing "
    "changed); 3 storage or environment failure (safe to retry); 130 interrupted (what was done is kept); "
    "70 a bug in dsm (please report it). Examples: dsm --version; dsm verify web-text@prod --deep; "
    "dsm --debug ls (tracebacks too).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from dsm._version import tool_name

        print(tool_name())
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print dsm's version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar="DSM_DEBUG", help="On an error, print its traceback too (credentials hidden)."
        ),
    ] = False,
) -> None:
    """Register, verify, rewrite, benchmark and move ML datasets under YAML contracts."""


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
