"""Every command has help text with an example and appears in the README."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from dsm.cli.app import app

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
COMMANDS = sorted(get_command(app).commands)  # type: ignore[attr-defined]


def test_readme_starts_with_the_two_setup_commands() -> None:
    first_block = README.split("```")[1]
    assert "make demo" in first_block and "make test" in first_block


@pytest.mark.parametrize("name", COMMANDS)
def test_command_has_help_with_example_and_is_in_readme(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0
    assert len(get_command(app).commands[name].help or "") > 10  # type: ignore[attr-defined]
    assert "Example" in result.output, f"dsm {name} --help has no example"
    assert f"dsm {name}" in README, f"dsm {name} is not in the README"


def test_fingerprint_spec_exists() -> None:
    spec = (Path(__file__).parent.parent / "docs" / "fingerprint.md").read_text(encoding="utf-8")
    assert "dsm-rows-v1" in spec
