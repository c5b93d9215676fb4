"""SVG snapshots of the main screens of ``dsm view`` at fixed terminal sizes (pytest-textual-snapshot): a
change in rendering shows in review as a changed file under ``tests/__snapshots__/``. Update them with
``pytest tests/test_view_snapshots.py --snapshot-update`` after looking at the new pictures; the chat, image
and episode screenshots of ``docs/`` are copies of three of them (``make screenshots``), checked here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.view_support import Datasets, make_datasets, settle

pytest.importorskip("textual")
pytest.importorskip("pytest_textual_snapshot")

from dsm.viewers.tui.app import ViewerApp

SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_view_snapshots"
DOCS = Path(__file__).parent.parent / "docs"
SCREENSHOTS = {
    "view-chat.svg": "test_chat_thread.svg",
    "view-image.svg": "test_image_view.svg",
    "view-episode.svg": "test_episode_view.svg",
}
"""The screenshots of docs/ and the snapshots they copy."""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Datasets:
    return make_datasets(tmp_path_factory.mktemp("snapshots"))


@pytest.fixture(autouse=True)
def _steady(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ViewerApp, "SHOW_READ_TIME", False)  # a read time is not the same twice
    monkeypatch.delenv("NO_COLOR", raising=False)


def _then(*keys: str) -> Callable[[Any], Any]:
    async def run(pilot: Any) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run


def test_main_table(snap_compare: Any, data: Datasets) -> None:
    assert snap_compare(data.app("texts@1", row=5), terminal_size=(80, 24), run_before=_then())


def test_chat_thread(snap_compare: Any, data: Datasets) -> None:
    assert snap_compare(data.app("chats", row=3), terminal_size=(110, 36), run_before=_then())


def test_image_view(snap_compare: Any, data: Datasets) -> None:
    app = data.app("images", row=4, images="halfcell")
    assert snap_compare(app, terminal_size=(110, 44), run_before=_then())


def test_episode_view(snap_compare: Any, data: Datasets) -> None:
    app = data.app("rollouts", row=8)
    assert snap_compare(app, terminal_size=(110, 30), run_before=_then("e", "right", "right"))


def test_diff_view(snap_compare: Any, data: Datasets) -> None:
    app = data.app("texts@2")
    assert snap_compare(app, terminal_size=(120, 36), run_before=_then("d", "enter"))


def test_help(snap_compare: Any, data: Datasets) -> None:
    assert snap_compare(data.app("chats"), terminal_size=(110, 30), run_before=_then("question_mark"))


@pytest.mark.parametrize("screenshot", sorted(SCREENSHOTS))
def test_the_screenshots_in_docs_are_the_current_snapshots(screenshot: str) -> None:
    snapshot = SNAPSHOTS / SCREENSHOTS[screenshot]
    assert (DOCS / screenshot).read_text(encoding="utf-8") == snapshot.read_text(encoding="utf-8"), (
        f"docs/{screenshot} differs from {snapshot.name}: run `make screenshots`"
    )
