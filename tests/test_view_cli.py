"""``dsm view`` through the CLI: its options reach the viewer unchanged, it refuses without a terminal or
without the ``view`` extra (exit 2, naming it), and bad arguments are refused before the app starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dsm.cli.app import app
from tests.inspect_data import chat_schema, chat_table, register_path

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def registry(tmp_path: Path) -> str:
    url = str(tmp_path / "registry")
    table = chat_table()
    register_path(tmp_path / "chats", table, "parquet", name="chats", registry=url, schema=chat_schema(table))
    return url


def test_options_reach_the_viewer_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    import dsm.viewers.tui as tui

    seen: dict[str, Any] = {}
    monkeypatch.setattr(tui, "view", lambda ref, **kwargs: seen.update(ref=ref, **kwargs))
    result = cli(
        "view", "chats@2", "--columns", "id, messages", "--row", "7", "--images", "halfcell", "--diff",
        "chats@1", "--unmask", "email", "--reason", "ticket 9", "--cache-dir", "/c", "--registry", "/r",
        "--storage-option", "anon=true",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert seen == {
        "ref": "chats@2",
        "columns": ["id", "messages"],
        "row": 7,
        "key": None,
        "unmask": ["email"],
        "reason": "ticket 9",
        "images": "halfcell",
        "diff": "chats@1",
        "registry": "/r",
        "storage_options": {"anon": True},
        "cache_dir": "/c",
    }
    cli("view", "chats", "--key", "id=3", "--key", "lang=de")
    assert seen["key"] == ["id=3", "lang=de"] and seen["row"] is None


def test_without_a_terminal_it_exits_2_and_says_what_to_use(registry: str) -> None:
    result = cli("view", "chats", "--registry", registry)
    assert result.exit_code == 2
    assert "needs a terminal" in result.output and "dsm head" in result.output


def test_without_the_view_extra_it_exits_2_naming_it(registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "textual", None)  # `import textual` now fails as if not installed
    result = cli("view", "chats", "--registry", registry)
    assert result.exit_code == 2
    assert "pip install 'dsm[view]'" in result.output and "textual" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"row": 12}, "rows 0 to 11"),
        ({"columns": ["id", "nope"]}, "no field 'nope'"),
        ({"images": "ascii"}, "choose one of auto, kitty"),
        ({"row": 1, "key": ["id=1"]}, "not both"),
        ({"unmask": ["lang"]}, "has no classification"),
    ],
)
def test_bad_arguments_are_refused_before_the_app_starts(
    registry: str, tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    pytest.importorskip("textual")
    from dsm.errors import InputError
    from dsm.viewers.tui import make_app

    with pytest.raises(InputError, match=message):
        make_app("chats", registry=registry, cache_dir=str(tmp_path / "cache"), **arguments)


def test_an_unknown_dataset_exits_2_before_the_terminal_is_asked_for(tmp_path: Path) -> None:
    pytest.importorskip("textual")
    result = cli("view", "nothing", "--registry", str(tmp_path / "empty"))
    assert result.exit_code == 2 and "nothing" in result.output and "terminal" not in result.output
