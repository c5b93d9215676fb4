"""CLI output is the same whatever the terminal's width and the length of paths: captured or piped, dsm never
wraps a line (a person at a terminal still gets lines that fit it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsm.cli.app import app
from dsm.cli.render import PIPE_WIDTH, console, err_console
from tests.conftest import write_parquet_shards

runner = CliRunner()


@pytest.mark.parametrize("columns", ["20", "80", "300"])
def test_a_long_path_in_an_error_stays_on_one_line_at_any_width(tmp_path: Path, columns: str) -> None:
    deep = tmp_path.joinpath(*["a-folder-name-long-enough-to-wrap-any-terminal"] * 6)
    result = runner.invoke(app, ["show", str(deep / "contract.yaml")], env={"COLUMNS": columns})
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(deep / "contract.yaml") in lines[0]


def test_tables_keep_whole_values_when_captured(tmp_path: Path, sample_table) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path.joinpath(*["another-long-folder-name-for-the-shards"] * 5)
    write_parquet_shards(data, sample_table, 2)
    registry = str(tmp_path / "registry")
    assert (
        runner.invoke(app, ["register", str(data), "--name", "long", "--registry", registry]).exit_code == 0
    )
    result = runner.invoke(app, ["ls", "--registry", registry], env={"COLUMNS": "30"})
    assert result.exit_code == 0
    row = next(line for line in result.stdout.splitlines() if "long" in line and "parquet" in line)
    assert "3,000" in row  # one table row holds the whole entry: nothing was folded onto a second line


def test_consoles_are_wide_only_when_they_do_not_write_to_a_terminal() -> None:
    assert not console.is_terminal and console.width == PIPE_WIDTH and err_console.width == PIPE_WIDTH
    probe = (
        "from dsm.cli.render import console; import io; "
        "from rich.console import Console; "
        "c = type(console)(file=io.StringIO(), force_terminal=True, width=50); print(c.width)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "50"  # on a terminal the terminal's width holds
