"""The ``dsm`` command. Exit codes are assigned here, by :data:`EXIT_CODES`, and nowhere else.

Every command of the app (``dsm.cli.app``) runs inside :class:`CommandGroup`, which turns an exception into
the exit code of the first row of :data:`EXIT_CODES` it is an instance of, after saying what happened in
one line on stderr (credentials redacted; the traceback too with ``--debug`` or ``DSM_DEBUG=1``). With
``--json`` the error is also one JSON document on stdout::

    {"error": {"type": "StorageError", "message": "...", "exit_code": 3, "shard": "part-00003.parquet"}}

(``shard``, ``line``, ``field`` and ``path`` only when the error knows them). A command whose result was
shown and failed a check ends with :func:`checks_failed`: the same code as
:class:`~dsm.errors.CheckFailed`, nothing more printed. An exception outside the ``DsmError`` family is a
bug in dsm: it is reported as an internal error naming the command, with exit code 70 (``EX_SOFTWARE`` of
sysexits.h; never 1, which says the data failed a check).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

import typer
from typer.core import TyperGroup

from dsm.errors import CheckFailed, DsmError, InputError, StorageError

__all__ = [
    "EXIT_CODES",
    "INTERNAL_ERROR",
    "CommandGroup",
    "checks_failed",
    "error_document",
    "exit_code",
    "main",
]

INTERNAL_ERROR: Final = 70
"""The exit code of a bug in dsm (an exception no mapping knows)."""

EXIT_CODES: Final[tuple[tuple[type[BaseException], int, str], ...]] = (
    (CheckFailed, 1, "done, but the data failed a check"),
    (InputError, 2, "bad usage or bad input: nothing was changed"),
    (typer.TyperException, 2, "bad usage: an unknown option, a missing argument"),
    (StorageError, 3, "storage or environment failure: safe to retry"),
    (DsmError, 2, "any other dsm error: refused before anything changed"),
    (KeyboardInterrupt, 130, "interrupted: what was done is kept"),
    (Exception, INTERNAL_ERROR, "internal error: a bug in dsm, please report it"),
)
"""``(exception class, exit code, meaning)``, first match wins (subclasses before their bases). 0 is a
command that finished with every check held."""

_RESUME = "resume:"
"""Prefix of a note (``exc.add_note``) by which the library says how to go on after an interruption."""


def exit_code(error: BaseException | type[BaseException]) -> int | None:
    """The exit code of an exception (or exception class) by :data:`EXIT_CODES`; None when no row holds it."""
    kind = error if isinstance(error, type) else type(error)
    for cls, code, _ in EXIT_CODES:
        if issubclass(kind, cls):
            return code
    return None


def _code(error: BaseException | type[BaseException]) -> int:
    code = exit_code(error)
    return INTERNAL_ERROR if code is None else code


def checks_failed() -> NoReturn:
    """End a command whose result was rendered and failed a check: exit as :class:`CheckFailed` does."""
    raise typer.Exit(_code(CheckFailed))


def _arguments(ctx: Any) -> list[str]:
    """The words after ``dsm [global options]``: the command's name, its arguments and options."""
    return [*getattr(ctx, "_protected_args", ()), *ctx.args]


def _command_path(ctx: Any) -> str:
    words = ["dsm"]
    group: Any = ctx.command
    for arg in _arguments(ctx):
        commands = getattr(group, "commands", None)
        if arg.startswith("-") or not isinstance(commands, Mapping) or arg not in commands:
            break
        words.append(arg)
        group = commands[arg]
    return " ".join(words)


def _wants_json(ctx: Any) -> bool:
    args = _arguments(ctx)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _message(exc: BaseException, command: str) -> str:
    from dsm.storage import redact

    if isinstance(exc, KeyboardInterrupt):
        # The last note is from the outermost work (a cutover around its copy): it knows best.
        notes = [n[len(_RESUME) :].strip() for n in getattr(exc, "__notes__", ()) if n.startswith(_RESUME)]
        how = notes[-1] if notes else f"run `{command} ...` again to go on"
        return f"interrupted; what was done is kept: {how}"
    if isinstance(exc, typer.TyperException):
        return str(exc.format_message())
    if isinstance(exc, DsmError):
        # One line, whatever a library below put in the text (pyarrow's decoding errors hold newlines).
        return " ".join(redact(str(exc)).split())
    text = redact(f"{type(exc).__name__}: {exc}".splitlines()[0])
    return (
        f"internal error in `{command}` ({text}): this is a bug in dsm, not a problem with your data; "
        f"please report it with the output of `dsm --debug {command.removeprefix('dsm ')} ...`"
    )


def error_document(exc: BaseException, command: str) -> dict[str, Any]:
    """The ``--json`` document of an error: ``{"error": {"type", "message", "exit_code", ...}}``."""
    if isinstance(exc, KeyboardInterrupt):
        kind = "Interrupted"
    elif isinstance(exc, typer.TyperException):
        kind = "UsageError"
    elif isinstance(exc, DsmError):
        kind = type(exc).__name__
    else:
        kind = "InternalError"
    error: dict[str, Any] = {"type": kind, "message": _message(exc, command), "exit_code": _code(exc)}
    if isinstance(exc, DsmError):
        from dsm.storage import redact

        error.update({k: redact(v) if isinstance(v, str) else v for k, v in exc.details.items()})
    elif kind == "InternalError":
        error["exception"] = type(exc).__name__
    return {"error": error}


def _debug(ctx: Any) -> bool:
    return bool(ctx.params.get("debug")) or os.environ.get("DSM_DEBUG", "") not in ("", "0")


class CommandGroup(TyperGroup):
    """The app's group: runs the chosen command and maps what it raises through :data:`EXIT_CODES`."""

    def invoke(self, ctx: Any) -> Any:
        # Read before the group hands the words on to the command (typer empties them then).
        command, as_json = _command_path(ctx), _wants_json(ctx)
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _show_warning
                return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except typer.TyperException as exc:
            if not as_json:
                raise  # typer prints the usage and the problem, exit 2
            _report(exc, command, as_json=True, debug=_debug(ctx))
        except (Exception, KeyboardInterrupt) as exc:
            _report(exc, command, as_json=as_json, debug=_debug(ctx))


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """A warning (a deprecated version, a non-atomic store, ...) as one line on stderr, not Python's two."""
    from dsm.cli.render import err_console, esc
    from dsm.storage import redact

    err_console.print(f"[bold yellow]warning:[/] {esc(redact(str(message)))}", highlight=False)


def _report(exc: BaseException, command: str, *, as_json: bool, debug: bool) -> NoReturn:
    """Say what ``exc`` means (one line on stderr; the JSON document on stdout) and exit with its code."""
    from dsm.cli.render import err_console, esc, print_json
    from dsm.storage import redact

    if debug:
        err_console.print(esc(redact("".join(traceback.format_exception(exc)))), highlight=False)
    message = _message(exc, command)
    if isinstance(exc, KeyboardInterrupt):
        err_console.print(esc(message), highlight=False)
    else:
        err_console.print(f"[bold red]error:[/] {esc(message)}", highlight=False)
    if as_json:
        print_json(error_document(exc, command))
    raise typer.Exit(_code(exc)) from None


def main() -> None:
    """The console script's entry point."""
    _without_pandas()
    _one_blas_thread()
    _arrow_allocator_for_bulk_work(sys.argv[1:])
    from dsm.cli.app import app

    app()


def _without_pandas() -> None:
    """Make pandas unimportable in this process (unless something imported it already).

    pyarrow imports pandas, where it is installed, on its first ``pa.array`` of anything but Arrow data,
    only to ask whether that is a pandas object: a quarter of a second of every command that reads data
    (a 0.5 GB reshard took 3.7 s). dsm never uses pandas and never hands pyarrow a pandas object. Only
    the ``dsm`` process does this: ``import dsm`` leaves a program's pandas alone, and a library that
    tries pandas and does without it (``except ImportError``, as pyarrow does) still works here.
    """
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


def _one_blas_thread() -> None:
    """One OpenBLAS thread for NumPy in this process, unless the environment says otherwise.

    NumPy starts a BLAS thread per core when it is imported, and they spin, on cores the command needs:
    with them a deep verify of a 1,000-row dataset took 0.45 CPU-s and a reshard of it 0.57, without
    them 0.37 and 0.43 (medians of 9 on 2 cores). dsm does no linear algebra. Only the ``dsm`` process
    does this (before NumPy loads): ``import dsm`` leaves a program's BLAS threads alone.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


_LONG_RUNNING: Final = frozenset({"view", "serve"})
"""Commands that stay up until their user stops them: their allocator hands freed pages back."""


def _arrow_allocator_for_bulk_work(args: Sequence[str]) -> None:
    """Set pyarrow's allocator (mimalloc) for bulk work in this process (``args``: the words after ``dsm``),
    unless the environment already says: ordinary pages except for a shuffled reshard, and freed pages kept
    for the next buffer, not handed back to the kernel, except in ``view`` and ``serve``.

    *Ordinary pages* (``MIMALLOC_ALLOW_THP=0``). mimalloc asks the kernel for transparent huge pages on its
    whole arena, and each first touch of one makes the kernel zero 2 MiB, whatever part of it is used.
    With ordinary pages, 0.5 GB corpora, 4 and 5 alternating pairs: a JSONL -> Parquet took 0.947x the CPU
    and 0.957x the wall time, a reshard 0.945x and 0.969x, and peak memory fell. A shuffle is the other
    way round: its buckets are large new buffers, which ordinary pages fault in 512 times as many pieces
    (a shuffled reshard took 0.926x the CPU and 0.932x the wall time with huge pages, 4 pairs).

    *Freed pages kept* (``MIMALLOC_PURGE_DELAY=-1``). By default mimalloc hands pages unused for a second back
    to the kernel (``release_unused`` at once), and the kernel zeroes each page it hands out again: 13% of a
    shuffled reshard's CPU samples (0.5 GB of text) were the kernel clearing pages, faulted in under Parquet
    decoding, ``take`` and concatenation. A bulk job allocates buffers of the same sizes over and over; kept
    pages are used again as they are. 1 GB corpora, alternating runs: the text shuffle's system time fell from
    6.4-7.4 to 4.3-4.7 s and its wall time from 15.9-16.3 to 14.8-15.1 s (3 rounds); JSONL -> Parquet on text
    took 10.0-10.2 s against 10.6-11.1, the small-groups reshard 10.2-10.4 against 10.8-11.0 (2 rounds); peak
    memory rose by 40-200 MiB (835 MiB the highest in the rewrite benchmark). A bulk command's memory goes
    when it ends; a viewer stays up, so it gives memory back as before.

    Only the ``dsm`` process does this (before pyarrow loads): ``import dsm`` leaves a program's allocator
    alone.
    """
    command = next((arg for arg in args if not arg.startswith("-")), "")
    if not (command == "reshard" and "--shuffle" in args):
        os.environ.setdefault("MIMALLOC_ALLOW_THP", "0")
    if command not in _LONG_RUNNING:
        os.environ.setdefault("MIMALLOC_PURGE_DELAY", "-1")


class _NoPandas:
    """A module finder that says pandas is not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(
                f"No module named {name!r} (the dsm command does without it)", name=name
            )
