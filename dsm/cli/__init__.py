"""The ``dsm`` command. Exit codes are assigned here, by :data:`EXIT_CODES`, and nowhere else.

Every command of the app (``dsm.cli.app``) runs inside :class:`CommandGroup`, which turns an exception into
the exit code of the first row of :data:`EXIT_CODES` it is an instance of, after printing its message
(credentials redacted) on stderr. A command whose result was shown and failed a check ends with
:func:`checks_failed`: the same code as :class:`~dsm.errors.CheckFailed`, nothing more printed. An
exception of no row (a bug) is not hidden.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

import typer
from typer.core import TyperGroup

from dsm.errors import CheckFailed, DsmError, InputError, StorageError

__all__ = ["EXIT_CODES", "CommandGroup", "checks_failed", "exit_code", "main"]

EXIT_CODES: Final[tuple[tuple[type[BaseException], int, str], ...]] = (
    (CheckFailed, 1, "done, but the data failed a check"),
    (InputError, 2, "bad usage or bad input: nothing was changed"),
    (StorageError, 3, "storage or environment failure: safe to retry"),
    (DsmError, 2, "any other dsm error: refused before anything changed"),
    (KeyboardInterrupt, 130, "interrupted: what was done is kept"),
)
"""``(exception class, exit code, meaning)``, first match wins (subclasses before their bases). 0 is a
command that finished with every check held."""


def exit_code(error: BaseException | type[BaseException]) -> int | None:
    """The exit code of an exception (or exception class) by :data:`EXIT_CODES`; None when no row holds it."""
    kind = error if isinstance(error, type) else type(error)
    for cls, code, _ in EXIT_CODES:
        if issubclass(kind, cls):
            return code
    return None


def _code(error: BaseException | type[BaseException]) -> int:
    code = exit_code(error)
    return 2 if code is None else code  # every DsmError has a row; 2 only guards the type


def checks_failed() -> NoReturn:
    """End a command whose result was rendered and failed a check: exit as :class:`CheckFailed` does."""
    raise typer.Exit(_code(CheckFailed))


class CommandGroup(TyperGroup):
    """The app's group: runs the chosen command and maps what it raises through :data:`EXIT_CODES`."""

    def invoke(self, ctx: Any) -> Any:
        from rich.markup import escape

        from dsm.cli.render import err_console
        from dsm.storage import redact

        try:
            return super().invoke(ctx)
        except (DsmError, KeyboardInterrupt) as exc:
            code = _code(exc)
            if isinstance(exc, KeyboardInterrupt):
                err_console.print("interrupted; what was done is kept")
            else:
                err_console.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False)
            raise typer.Exit(code) from None


def main() -> None:
    """The console script's entry point."""
    from dsm.cli.app import app

    app()
