"""CLI output is the same whatever the terminal's width and the length of paths: captured or piped, dsm never
wraps a line (a person at a terminal still gets lines that fit it)."""

from __future__ import annotations

import json
import os
import shlex
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


# --- piped: whole values, nothing cut ------------------------------------------------------------------

LONG_NAME = "web-sample-deduplicated-english-2026-11-30-" + "x" * 60


def _piped(command: str, cwd: Path) -> str:
    """``command | cat`` in a shell at a narrow terminal width: what a script reading dsm's output gets."""
    done = subprocess.run(
        f"{command} | cat",
        shell=True,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "40"},
        check=True,
    )
    return done.stdout


def test_piped_tables_print_names_ids_and_details_whole(tmp_path: Path, sample_table) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data[v1]"  # brackets are not markup
    write_parquet_shards(data, sample_table.slice(0, 300), 2)
    registry = tmp_path / "registry"
    dsm = f"{shlex.quote(sys.executable)} -m dsm"
    reg = f"--registry {shlex.quote(str(registry))}"
    subprocess.run(
        f"{dsm} register {shlex.quote(str(data))} --name {LONG_NAME} {reg}",
        shell=True,
        check=True,
        capture_output=True,
    )
    subprocess.run(f"{dsm} alias {LONG_NAME} prod 1 {reg}", shell=True, check=True, capture_output=True)

    listed = _piped(f"{dsm} ls {reg}", tmp_path)
    assert "…" not in listed
    row = next(line for line in listed.splitlines() if LONG_NAME in line)
    assert "prod→1" in row and "300" in row  # the whole entry on the row of its whole name

    # A changed shard: verify's table names it and says why, on one line each, with the whole checksum.
    shard = data / "part-00001.parquet"
    shard.write_bytes(shard.read_bytes()[:-8] + b"PAR1PAR1")
    verified = subprocess.run(
        f"{dsm} verify {LONG_NAME} {reg} | cat",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "40"},
    ).stdout
    assert "…" not in verified
    assert f"{LONG_NAME}@1: shards that failed" in verified.splitlines()[0]
    line = next(line for line in verified.splitlines() if "part-00001.parquet" in line)
    assert (
        "corrupt" in line and "the bytes changed after registration; restore the shard or re-register" in line
    )
    as_json = json.loads(
        subprocess.run(
            f"{dsm} verify {LONG_NAME} {reg} --json", shell=True, capture_output=True, text=True
        ).stdout
    )
    bad = next(s for s in as_json["shards"] if s["path"] == "part-00001.parquet")
    assert bad["expected"].startswith("xxh3-128:") and len(bad["expected"]) == len("xxh3-128:") + 32
    assert bad["actual"].startswith("xxh3-128:") and bad["actual"] != bad["expected"]
    assert as_json["fingerprint_match"] is None and as_json["contract_consistent"] is True


def test_piped_cutover_list_prints_the_whole_id_a_user_types_next(tmp_path: Path, sample_table) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table.slice(0, 200), 1)
    registry = str(tmp_path / "registry")
    assert (
        runner.invoke(app, ["register", str(data), "--name", LONG_NAME, "--registry", registry]).exit_code
        == 0
    )
    assert runner.invoke(app, ["alias", LONG_NAME, "prod", "1", "--registry", registry]).exit_code == 0
    dest = tmp_path.joinpath(*["a-long-destination-folder"] * 4)
    started = runner.invoke(
        app,
        ["cutover", "start", f"{LONG_NAME}@prod", "--to", str(dest), "--json", "--registry", registry],
    )
    assert started.exit_code == 0, started.output
    cutover_id = json.loads(started.stdout)["id"]
    dsm = f"{shlex.quote(sys.executable)} -m dsm"
    listed = _piped(f"{dsm} cutover list --registry {shlex.quote(registry)}", tmp_path)
    assert "…" not in listed
    row = next(line for line in listed.splitlines() if cutover_id in line)
    assert f"{LONG_NAME}@prod" in row and str(dest) in row


def test_values_are_printed_as_they_are_not_as_markup(tmp_path: Path, sample_table) -> None:  # type: ignore[no-untyped-def]
    """A contract saying timestamp[ms] where the file holds timestamp[us, tz=UTC]: both type names whole."""
    import yaml

    data = tmp_path / "data"
    write_parquet_shards(data, sample_table.slice(0, 100), 1)
    registry = str(tmp_path / "registry")
    assert runner.invoke(app, ["register", str(data), "--name", "ts", "--registry", registry]).exit_code == 0
    contract = yaml.safe_load((Path(registry) / "ts" / "versions" / "1.yaml").read_text())
    for field in contract["schema"]["fields"]:
        if field["name"] == "created":
            field["type"] = "timestamp[ms]"
    claimed = tmp_path / "claimed.yaml"
    claimed.write_text(yaml.safe_dump(contract, sort_keys=False))
    result = runner.invoke(app, ["verify", str(claimed), "--deep"])
    assert result.exit_code == 1
    line = next(line for line in result.stdout.splitlines() if "schema_mismatch" in line)
    assert "timestamp[ms]" in line and "timestamp[us, tz=UTC]" in line, line


def test_on_a_narrow_terminal_a_long_cell_folds_instead_of_being_cut() -> None:
    import io

    from rich.console import Console

    from dsm.cli.render import SafeTable

    out = io.StringIO()
    terminal = Console(file=out, force_terminal=True, width=30, color_system=None)
    table = SafeTable("id", "phase", title="cutovers")
    table.add_row("20261130T100000Z-3fa2c1-" + "d" * 20, "copying")
    terminal.print(table)
    text = out.getvalue()
    assert "…" not in text
    assert "".join(ch for ch in text if ch.isalnum()).count("3fa2c1" + "d" * 20) == 1  # every character kept
