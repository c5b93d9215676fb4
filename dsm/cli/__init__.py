"""The ``dsm`` command. Exit codes are assigned here (``exits``) and nowhere else:

0 all checks held; 1 the data failed a check; 2 bad usage or input; 3 storage failure; 130 interrupted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from dsm.errors import DsmError
from dsm.storage import redact

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STORAGE",
    "EXIT_USAGE",
    "CheckFailedExit",
    "exits",
    "main",
]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_STORAGE = 3
EXIT_INTERRUPTED = 130

P = ParamSpec("P")
R = TypeVar("R")


class CheckFailedExit(Exception):
    """Raised by a command whose work finished but whose data failed a check (exit 1)."""


def exits(command: Callable[P, R]) -> Callable[P, R]:
    """Wrap a CLI command so that every failure leaves with the exit code the design gives it."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from rich.markup import escape

        from dsm.cli.render import err_console

        try:
            return command(*args, **kwargs)
        except CheckFailedExit:
            raise typer.Exit(EXIT_CHECK_FAILED) from None
        except DsmError as exc:
            err_console.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("interrupted; what was done is kept")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper


def main() -> None:
    """The console script's entry point."""
    from dsm.cli.app import app

    app()
