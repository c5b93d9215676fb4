"""The typer app: every command of the CLI, named in :data:`COMMANDS`, imported only when it runs.

Each command module (named like its library module in :mod:`dsm.commands`) has ``add_to(app)``, which adds
its commands to a typer app; it parses its options, makes one library call and renders the result.
:class:`dsm.cli.CommandGroup` gives every exception its exit code. No command module imports this one.

Start-up is part of every command's cost (``dsm verify`` is timed against ``xxhsum``), so the app does not
import a command module until that command is run: ``dsm --help`` lists the commands from
:data:`COMMANDS` (name, module, first paragraph of its help; a test keeps the table equal to what the
modules register), and ``dsm ls`` imports :mod:`dsm.cli.catalog` alone. A new command module adds its
commands to the table.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final

import typer
from typer import _click as click
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer.core import TyperCommand

from dsm.cli import CommandGroup

__all__ = ["COMMANDS", "CommandEntry", "LazyCommandGroup", "app", "load_module"]


@dataclass(frozen=True, kw_only=True)
class CommandEntry:
    """A command of the app: its ``name``, the module of :mod:`dsm.cli` that adds it, and the first
    paragraph of its help (what ``dsm --help`` lists)."""

    name: str
    module: str
    help: str


COMMANDS: Final[tuple[CommandEntry, ...]] = (
    CommandEntry(
        name="register",
        module="register",
        help="Scan shards and write a new version of the dataset's contract.",
    ),
    CommandEntry(
        name="verify",
        module="verify",
        help="Prove the data matches its contract: sizes and checksums (and, with --deep, rows).",
    ),
    CommandEntry(
        name="ls",
        module="catalog",
        help="List the datasets in the registry. A dataset whose files cannot be read is named with its "
        "problem\n(on stderr; ``problem`` in JSON) and the command exits 2 after listing the others.",
    ),
    CommandEntry(
        name="show",
        module="catalog",
        help="Print a contract (YAML, or JSON with --json).",
    ),
    CommandEntry(
        name="alias",
        module="catalog",
        help="Point an alias at a version atomically; says where it pointed before.",
    ),
    CommandEntry(
        name="schema",
        module="catalog",
        help="Print the JSON Schema that contract files are validated against.",
    ),
    CommandEntry(
        name="convert-format",
        module="rewrite",
        help="Rewrite a dataset in another format without changing one row, and register it.",
    ),
    CommandEntry(
        name="reshard",
        module="rewrite",
        help="Rewrite a dataset as other shards (count, size or rows; optionally shuffled) and register it.",
    ),
    CommandEntry(
        name="bench",
        module="bench",
        help="Measure how a dataset reads (throughput, latency, time to first byte, knee); compare two.",
    ),
    CommandEntry(
        name="diff",
        module="diff",
        help="Two contracts side by side, with a compatibility verdict for readers of the first; with "
        "--rows, the\nrows added, removed and changed between them.",
    ),
    CommandEntry(
        name="head",
        module="inspect",
        help="Show rows from a position, rendered by the fields' roles; reads only the pieces holding them.",
    ),
    CommandEntry(
        name="sample",
        module="inspect",
        help="Show rows drawn uniformly from the whole dataset (seeded), reading only the pieces "
        "holding them.",
    ),
    CommandEntry(
        name="find",
        module="inspect",
        help="Find a row by position or key, with its shard, row group and position, so a bug report "
        "can name it.",
    ),
    CommandEntry(
        name="episodes",
        module="inspect",
        help="Summarise the episodes of RL data: length, return, where done fires, and anomalies (an "
        "episode that\nnever terminates, NaN rewards, steps out of order). Exit code 1 when an "
        "episode is anomalous.",
    ),
    CommandEntry(
        name="log",
        module="inspect",
        help="Every version of a dataset as a lineage tree, newest first: operation, parent, "
        "parameters, created,\nstatus and the aliases pointing to it.",
    ),
    CommandEntry(
        name="audit",
        module="inspect",
        help="Who unmasked which classified fields of a dataset, when, with which command and why.",
    ),
    CommandEntry(
        name="footprint",
        module="footprint",
        help="Logical against physical bytes per version; shared, copied and unreferenced bytes; cost.",
    ),
    CommandEntry(
        name="deprecate",
        module="lifecycle",
        help="Mark a version deprecated: superseded, still readable, its data kept.",
    ),
    CommandEntry(
        name="retire",
        module="lifecycle",
        help="Mark a version retired: no longer read; gc may delete the files dsm wrote for it.",
    ),
    CommandEntry(
        name="gc",
        module="lifecycle",
        help="Delete the files dsm wrote for retired versions nothing else uses (a dry run unless --yes).",
    ),
    CommandEntry(
        name="view",
        module="view",
        help="Browse rows in the terminal: a table over datasets of any size, the row by role (text, "
        "chat,\nimages, JSON), RL episodes with playback, and the row diff against another version.",
    ),
    CommandEntry(
        name="serve",
        module="serve",
        help="Serve the registry in a browser, read-only: datasets, versions and lineage, rows by role "
        "(text, chat,\nimages, audio, video, JSON), RL episodes, row diffs, cutovers and bench reports; "
        "every page has a .json\ntwin. Classified fields stay masked unless --unmask FIELD (audited). "
        "Ctrl-C or SIGTERM stops it\ncleanly (requests in flight finish; exit 0).",
    ),
    CommandEntry(
        name="cutover",
        module="cutover",
        help="Move a dataset and its alias to a new location or format in stages, with evidence and "
        "rollback.",
    ),
    CommandEntry(
        name="storage",
        module="storage_check",
        help="Storage readiness: what a bucket, container or folder answers before data moves there.",
    ),
    CommandEntry(
        name="policy",
        module="policy",
        help="The registry's data policy: where each classification may live, encryption, public "
        "access, retention (docs/policy.md).",
    ),
)
"""Every command of the app, in the order ``dsm --help`` lists them."""

_MARKUP: Final = "rich"
_LISTING: Final = "dsm.listing"
"""``ctx.meta`` key set while the group's help is written: commands are listed, not loaded."""


def load_module(module: str) -> dict[str, click.Command]:
    """The click commands that ``dsm.cli.<module>.add_to`` adds, by name."""
    sub = typer.Typer(rich_markup_mode=_MARKUP)
    importlib.import_module(f"dsm.cli.{module}").add_to(sub)
    commands = dict(typer.main.get_group(sub).commands)
    for command in commands.values():
        _coerce_plainly(command)
    return commands


_PLAIN = (str, bool, int, float, list[str])


class _PlainValue(RuntimeParam):
    """A value that already has its option's type (text as the command line gives it, a default, a flag)
    is used as it is; anything else goes to typer's own coercion.

    typer builds a pydantic ``TypeAdapter`` for every option it coerces, even where the value is already
    of the right type; importing pydantic for that identity would cost a third of a short command's
    start-up (``dsm ls``). A whole number written in decimal digits (``--num-shards 8``) is read here too,
    within the option's bounds: pydantic would take 0.15-0.2 s to say the same (a test compares both on
    generated text and bounds). Anything else, and every value out of bounds, gets typer's own answer."""

    def _coerce_value(self, value: Any, param: Any, ctx: click.Context) -> Any:
        kind = self.annotation
        info = self.parameter_info
        if kind is int and isinstance(value, str) and _DECIMAL.fullmatch(value):
            number = int(value)
            if (info.min is None or number >= info.min) and (info.max is None or number <= info.max):
                return number
        elif info.min is not None or info.max is not None:
            pass  # a bounded number: typer checks the bounds
        elif kind == list[str]:
            if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
                return list(value)
        elif isinstance(kind, type) and type(value) is kind:
            return value
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")
"""A whole number as pydantic reads it from text, in the plainest spelling (no spaces, ``_`` or ``.0``)."""


def _plain(param: click.Parameter | None) -> None:
    descriptor = getattr(param, "type_descriptor", None)
    if (
        isinstance(descriptor, TypeDescriptor)
        and getattr(param, "_runtime_param", False) is None
        and descriptor.file_annotation is None
        and not descriptor.is_choice
        and any(descriptor.annotation == kind for kind in _PLAIN)
    ):
        param._runtime_param = _PlainValue(  # type: ignore[union-attr]
            parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
        )


def _coerce_plainly(command: click.Command, *, subcommands: bool = True) -> None:
    """Give the options of ``command`` (and of its subcommands) :class:`_PlainValue` coercion; the help
    option too, which click makes on first use (its names come from the context)."""
    for param in command.params:
        _plain(param)
    make_help = command.get_help_option

    def help_option(ctx: click.Context) -> Any:
        option = make_help(ctx)
        _plain(option)
        return option

    command.get_help_option = help_option  # type: ignore[method-assign]
    for sub in getattr(command, "commands", {}).values() if subcommands else ():
        _coerce_plainly(sub)


class _LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands: those of :data:`COMMANDS` are loaded (their module imported) on first access."""

    def __init__(self, loaded: dict[str, click.Command], entries: Sequence[CommandEntry]) -> None:
        self._loaded = loaded
        self._entries = {e.name: e for e in entries}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            entry = self._entries.get(name)
            if entry is None:
                raise KeyError(name)
            for key, command in load_module(entry.module).items():
                self._loaded.setdefault(key, command)
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._entries

    def __iter__(self) -> Iterator[str]:
        yield from self._entries
        yield from (name for name in self._loaded if name not in self._entries)

    def __len__(self) -> int:
        return len(self._entries) + sum(1 for name in self._loaded if name not in self._entries)

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._entries.pop(name, None)

    def listed(self, name: str) -> click.Command | None:
        """The command as ``--help`` lists it: the loaded one, else a stand-in with the table's help."""
        if name in self._loaded:
            return self._loaded[name]
        entry = self._entries.get(name)
        return None if entry is None else TyperCommand(name=name, help=entry.help, rich_markup_mode=_MARKUP)


class LazyCommandGroup(CommandGroup):
    """:class:`dsm.cli.CommandGroup` whose commands are those of :data:`COMMANDS`, each imported when run."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for command in self.commands.values():
            _coerce_plainly(command)
        self.commands: MutableMapping[str, click.Command] = _LazyCommands(dict(self.commands), COMMANDS)
        _coerce_plainly(self, subcommands=False)  # its commands get it as they load

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        commands = self.commands
        if ctx.meta.get(_LISTING) and isinstance(commands, _LazyCommands):
            return commands.listed(cmd_name)
        return commands.get(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        ctx.meta[_LISTING] = True
        try:
            super().format_help(ctx, formatter)
        finally:
            ctx.meta.pop(_LISTING, None)


app = typer.Typer(
    name="dsm",
    cls=LazyCommandGroup,
    help="Register, verify, rewrite, benchmark and move ML datasets under YAML contracts.",
    epilog="Exit codes: 0 done, every check held; 1 the data failed a check; 2 bad usage or input (nothing "
    "changed); 3 storage or environment failure (safe to retry); 130 interrupted (what was done is kept); "
    "70 a bug in dsm (please report it). Examples: dsm --version; dsm verify web-text@prod --deep; "
    "dsm --debug ls (tracebacks too).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=_MARKUP,
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
