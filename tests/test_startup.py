"""The CLI starts light: each command imports only what it needs (benchmarks/startup.py times it).

`dsm verify` is timed against xxhsum (benchmarks/verify.py) with start-up included, so heavy imports belong
inside the commands that need them: the app imports a command module only when its command runs (CLI
modules import their library lazily), and `--help` lists the commands from the app's table. These tests
guard the import sets, not timings.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st
from typer import _click as click
from typer.testing import CliRunner

import dsm.cli
from dsm.cli.app import COMMANDS, _coerce_plainly, app

from .conftest import write_parquet_shards

HEAVY = ("pyarrow", "numpy", "pandas", "duckdb", "s3fs", "adlfs", "torch")
NOT_FOR_SHORT_COMMANDS = (*HEAVY, "pydantic")
"""Never imported by --help, ls or a bytes-only verify (typer would import pydantic to coerce options)."""


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(k for k, v in sys.modules.items() if v is not None)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def _imported_after(code: str) -> set[str]:
    return {name.split(".")[0] for name in _modules_after(code)}


def _running(*argv: str) -> set[str]:
    """The modules loaded by the console script's main() run with ``argv`` (output discarded)."""
    code = (
        "import sys, io, contextlib\n"
        f"sys.argv = ['dsm', *{list(argv)!r}]\n"
        "from dsm.cli import main\n"
        "try:\n    with contextlib.redirect_stdout(io.StringIO()):\n        main()\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
    )
    return _modules_after(code)


def _command_modules(loaded: set[str]) -> set[str]:
    return {name for name in loaded if name.startswith("dsm.cli.") and name not in ("dsm.cli.app",)} - {
        "dsm.cli.options",
        "dsm.cli.render",
    }


@pytest.fixture(scope="module")
def tiny_registry(tmp_path_factory: pytest.TempPathFactory, sample_table) -> str:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("tiny")
    write_parquet_shards(folder / "data", sample_table, 1)
    registry = str(folder / "registry")
    import dsm

    dsm.register(str(folder / "data"), name="tiny", registry=registry)
    return registry


def test_help_imports_no_command_module() -> None:
    loaded = _running("--help")
    assert not {n.split(".")[0] for n in loaded} & {*NOT_FOR_SHORT_COMMANDS, "fsspec", "yaml"}
    assert _command_modules(loaded) == set()
    assert not {n for n in loaded if n.startswith("dsm.commands")}


def test_ls_imports_its_module_alone(tiny_registry: str) -> None:
    loaded = _running("ls", "--registry", tiny_registry)
    assert not {n.split(".")[0] for n in loaded} & set(NOT_FOR_SHORT_COMMANDS)
    assert _command_modules(loaded) == {"dsm.cli.catalog"}


def test_bytes_verify_imports_its_module_alone(tiny_registry: str) -> None:
    loaded = _running("verify", "tiny", "--registry", tiny_registry)
    assert not {n.split(".")[0] for n in loaded} & set(NOT_FOR_SHORT_COMMANDS)
    assert _command_modules(loaded) == {"dsm.cli.verify"}


def test_commands_that_decode_data_never_import_pandas(tiny_registry: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """pyarrow imports pandas (a quarter of a second) on its first ``pa.array`` of non-Arrow data unless
    the process says there is none, which the console script does: a deep verify and a reshard, which
    build arrays from Python and numpy values, run with pyarrow and without pandas."""
    for argv in (
        ("verify", "tiny", "--deep", "--registry", tiny_registry),
        (
            "reshard",
            "tiny@1",
            str(tmp_path / "out"),
            "--num-shards",
            "2",
            "--shuffle",
            "--registry",
            tiny_registry,
        ),
    ):
        loaded = {n.split(".")[0] for n in _running(*argv)}
        assert "pyarrow" in loaded and "numpy" in loaded, argv
        assert "pandas" not in loaded, argv


def test_a_deep_verify_and_a_register_load_no_compute_functions(tiny_registry: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``pyarrow.compute`` makes a Python function of each of its hundreds of kernels when imported (30 ms
    of a second's job): decoding, checking and fingerprinting Parquet call none of them, so neither
    command imports it."""
    deep = _running("verify", "tiny", "--deep", "--registry", tiny_registry)
    data = str(Path(tiny_registry).parent / "data")  # the fixture's shards
    again = _running("register", data, "--name", "again", "--registry", str(tmp_path / "registry"))
    for loaded in (deep, again):
        assert "pyarrow.parquet" in loaded and "pyarrow.compute" not in loaded


def _eager_commands() -> dict[str, tuple[str, str]]:
    """Every command the CLI modules add, by name: ``(module, first paragraph of its help)``."""
    found: dict[str, tuple[str, str]] = {}
    for info in pkgutil.iter_modules(dsm.cli.__path__):
        module = importlib.import_module(f"dsm.cli.{info.name}")
        if not hasattr(module, "add_to"):
            continue
        sub = typer.Typer(rich_markup_mode="rich")
        module.add_to(sub)
        for name, command in typer.main.get_group(sub).commands.items():
            found[name] = (info.name, inspect.cleandoc(command.help or "").split("\n\n")[0].strip())
    return found


def test_the_command_table_is_what_the_modules_add() -> None:
    """A command module's commands are all in COMMANDS, under their module, with their own help."""
    table = {e.name: (e.module, e.help) for e in COMMANDS}
    assert len(table) == len(COMMANDS)
    assert table == _eager_commands()


def test_help_lists_what_loading_every_command_would() -> None:
    runner = CliRunner()
    lazy = runner.invoke(app, ["--help"], terminal_width=100)
    eager = typer.main.get_command(app)
    for name in eager.list_commands(None):  # type: ignore[arg-type]
        eager.commands[name]  # loads the module of each
    loaded = runner.invoke(app, ["--help"], terminal_width=100)
    assert lazy.exit_code == loaded.exit_code == 0
    assert lazy.output == loaded.output
    assert all(e.name in lazy.output for e in COMMANDS)


def test_options_are_coerced_as_typer_would() -> None:
    """The plain coercion (no pydantic for values already typed) leaves typer's checks in place."""
    runner = CliRunner()
    bad = runner.invoke(app, ["verify", "x", "--workers", "0"])
    assert bad.exit_code == 2 and "--workers" in bad.output


def _answer(command: click.Command, text: str) -> tuple[str, object]:
    try:
        return "value", command.main(["--n", text], standalone_mode=False)
    except click.ClickException as error:
        return "error", error.format_message()


@settings(max_examples=150, deadline=None)
@given(
    text=st.one_of(
        st.integers(-(10**30), 10**30).map(str),
        st.from_regex(r"\A[ +\-_0-9.e٣]{0,12}\Z"),
        st.text(max_size=8),
    ),
    low=st.none() | st.integers(-5, 5),
    high=st.none() | st.integers(0, 10**20),
)
def test_a_whole_number_option_reads_every_text_as_typer_does(
    text: str, low: int | None, high: int | None
) -> None:
    """Whole numbers from the command line are read without pydantic; on any text and bounds, the value (or
    the error) is typer's own."""

    def command(n: int = 0) -> int:
        return n

    # the bounds are drawn: an annotation object, not the string ``from __future__`` would make
    command.__annotations__["n"] = Annotated[int, typer.Option(min=low, max=high)]
    plain_app, typer_app = typer.Typer(), typer.Typer()
    plain_app.command()(command)
    typer_app.command()(command)
    plain = typer.main.get_command(plain_app)
    _coerce_plainly(plain)
    assert _answer(plain, text) == _answer(typer.main.get_command(typer_app), text)


def test_a_rewrite_with_a_count_imports_no_pydantic(tiny_registry: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--num-shards 2`` is read without pydantic (it took 0.15-0.2 s of every rewrite's start-up)."""
    out, registry = str(tmp_path / "out"), tiny_registry
    loaded = _running("reshard", "tiny@1", out, "--num-shards", "2", "--workers", "1", "--registry", registry)
    assert "pydantic" not in {name.split(".")[0] for name in loaded}


def test_loading_the_cli_imports_nothing_heavy() -> None:
    loaded = _imported_after("import dsm.cli.app")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_command_sets_arrows_allocator_for_bulk_work() -> None:
    """mimalloc (pyarrow's allocator) reads its options when pyarrow loads: the command's set-up asks for
    ordinary pages unless the command is a shuffled reshard, and keeps freed pages unless the command is a
    viewer that stays up; the environment's own settings win; ``import dsm`` changes nothing."""
    show = "import pyarrow as pa\npa.allocate_buffer(1 << 20)\n"
    names = ("MIMALLOC_ALLOW_THP", "MIMALLOC_PURGE_DELAY")
    env = {k: v for k, v in os.environ.items() if k not in names}

    def options(prelude: str, **extra: str) -> tuple[str, str]:
        run = subprocess.run(
            [sys.executable, "-c", prelude + show],
            env={**env, "MIMALLOC_VERBOSE": "1", **extra},
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
        found = [re.search(rf"option '{name}': (-?\d+)", run.stderr) for name in ("allow_thp", "purge_delay")]
        if None in found:
            pytest.skip("this pyarrow's allocator is not a mimalloc with these options")
        return found[0].group(1), found[1].group(1)  # type: ignore[union-attr]

    def cli(*args: str) -> str:
        return f"from dsm.cli import _arrow_allocator_for_bulk_work as set_up\nset_up({list(args)!r})\n"

    thp, delay = options("")
    assert delay != "-1"  # what the command changes is not mimalloc's own default
    assert options(cli("reshard", "web@1", "out", "--num-shards", "8")) == ("0", "-1")
    assert options(cli("--debug", "convert-format", "web@1", "out", "--format", "jsonl")) == ("0", "-1")
    assert options(cli("reshard", "web@1", "out", "--num-shards", "8", "--shuffle")) == (thp, "-1")
    assert options(cli("verify", "web@1"), MIMALLOC_ALLOW_THP="1", MIMALLOC_PURGE_DELAY="250") == ("1", "250")
    assert options(cli("serve", "--port", "0")) == ("0", delay)
    assert options(cli("--debug", "view", "web@1")) == ("0", delay)
    assert options("import dsm\n") == (thp, delay)


def test_the_command_starts_no_blas_threads() -> None:
    """NumPy's OpenBLAS starts a spinning thread per core on import; the command needs none (it does no
    linear algebra) and starts none, unless the environment asks for them; ``import dsm`` changes nothing."""
    count = "import os, numpy\nprint(len(os.listdir('/proc/self/task')))"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def threads(prelude: str, **extra: str) -> int:
        run = subprocess.run(
            [sys.executable, "-c", prelude + count], env={**env, **extra}, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        return int(run.stdout)

    cli = "from dsm.cli import _one_blas_thread\n_one_blas_thread()\n"
    assert threads(cli) == threads("", OPENBLAS_NUM_THREADS="1")
    assert threads("import dsm\n") == threads("")
    assert threads(cli, OPENBLAS_NUM_THREADS="2") == threads("", OPENBLAS_NUM_THREADS="2")
    if (os.cpu_count() or 1) > 1:
        assert threads("") > threads(cli)
