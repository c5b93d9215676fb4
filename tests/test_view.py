"""``dsm view`` through Textual's own harness (``App.run_test`` and ``Pilot``): keys pressed, the screen read
back. Navigation, jump to row, search, the detail pane, chat threads, pictures and their fallback, episode
playback, the row diff, key lookups, copy, the column picker, masking and its audited unmasking, NO_COLOR,
80x24, errors shown and not raised; the window reads only the blocks near the screen."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.inspect_data import EMAILS, NEVER_ENDING_EPISODE
from tests.view_support import Datasets, make_datasets, screen_text, settle

pytest.importorskip("textual")
pytestmark = pytest.mark.asyncio

from dsm.viewers.tui.app import ViewerApp  # noqa: E402
from dsm.viewers.tui.detail import DetailPane  # noqa: E402
from dsm.viewers.tui.diff import DiffScreen  # noqa: E402
from dsm.viewers.tui.episode import EpisodeScreen  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Datasets:
    return make_datasets(tmp_path_factory.mktemp("view"))


async def _open(app: ViewerApp, size: tuple[int, int] = (100, 30)) -> Any:
    return app.run_test(size=size)


async def _type(pilot: Any, text: str) -> None:
    await pilot.press(
        *[{" ": "space", "/": "slash", ":": "colon", "=": "equals_sign"}.get(c, c) for c in text]
    )


async def _fill(pilot: Any, text: str) -> None:
    """Put ``text`` in the open prompt at once (where typing it key by key is not what a test is about)."""
    from textual.widgets import Input

    pilot.app.screen.query_one(Input).value = text
    await pilot.pause()


def _status(app: ViewerApp) -> str:
    return str(app.query_one("#status").render())


# ------------------------------------------------------------------------------------------ navigation


async def test_arrows_pages_home_and_end_move_the_cursor_and_the_status_says_where(data: Datasets) -> None:
    app = data.app("texts@1")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.table
        assert table.cursor == 0 and "row 0 of 600" in _status(app)
        await pilot.press("down", "down", "down")
        assert table.cursor == 3
        await pilot.press("up")
        assert table.cursor == 2
        page = table.page_rows
        await pilot.press("pagedown")
        await settle(pilot)
        assert table.cursor == 2 + page
        assert table.first_shown == page
        await pilot.press("end")
        await settle(pilot)
        assert table.cursor == 599 and "row 599 of 600" in _status(app)
        assert "599" in screen_text(app).split("\n")[table.page_rows]  # the last row is on screen
        assert "shard part-00002.parquet" in screen_text(app)
        await pilot.press("pageup")
        assert table.cursor == 599 - page
        await pilot.press("home")
        await settle(pilot)
        assert table.cursor == 0 and table.first_shown == 0


async def test_only_the_blocks_near_the_screen_are_read(data: Datasets) -> None:
    app = data.app("texts@1")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        window = app.window
        last = window.block_of(599)
        # the first screen's block and its prefetch, then the last block and the one before it: no other
        assert set(window.history) <= {0, 1, last - 1, last}
        assert window.held_rows <= window.max_blocks * window.block_rows


async def test_g_jumps_to_a_row_typed_with_separators_and_refuses_one_that_does_not_exist(
    data: Datasets,
) -> None:
    app = data.app("texts@1")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await _type(pilot, "4_50")
        await pilot.press("enter")
        await settle(pilot)
        assert app.table.cursor == 450 and "row 450 of 600" in _status(app)
        assert "row 450 · shard" in screen_text(app)
        await pilot.press("g")
        await _type(pilot, "900")
        await pilot.press("enter")
        await settle(pilot)
        assert app.table.cursor == 450
        assert any("row 900 does not exist" in n.message for n in app._notifications)


async def test_search_finds_the_next_match_among_the_rows_read_and_says_when_none_does(
    data: Datasets,
) -> None:
    app = data.app("texts@1")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await _type(pilot, "row 37:")
        await pilot.press("enter")
        assert app.table.cursor == 37
        await pilot.press("slash")
        await _fill(pilot, "second line")
        await pilot.press("enter")
        assert app.table.cursor == 40  # every fifth row has a second line
        await pilot.press("n")
        assert app.table.cursor == 45
        await pilot.press("N")
        assert app.table.cursor == 40
        await pilot.press("slash")
        await _fill(pilot, "row 590:")  # not read yet: the search looks only at the rows read
        await pilot.press("enter")
        assert app.table.cursor == 40
        assert any("not in the" in n.message and "rows read so far" in n.message for n in app._notifications)


async def test_the_wheel_scrolls_the_rows_and_a_click_selects_the_row_under_the_mouse(
    data: Datasets,
) -> None:
    from textual.events import MouseScrollDown

    app = data.app("texts@1")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.click("#rows", offset=(12, 4))  # header line 0, so line 4 is row 3
        assert app.table.cursor == 3
        for _ in range(60):  # the wheel, as the terminal sends it: to the app, at a point of the screen
            app.post_message(MouseScrollDown(None, 12, 5, 0, 1, 0, False, False, False, 12, 5))
        await settle(pilot)
        top = app.table.first_shown
        assert top > app.table.page_rows and app.table.cursor == 3  # scrolled; the cursor stays
        assert f"{top + 1:,}" in screen_text(app).split("\n")[2]  # the rows there are read and drawn
        await pilot.click("#rows", offset=(12, 2))
        assert app.table.cursor == top + 1 and f"row {top + 1:,} of 600" in _status(app)


async def test_key_lookups_from_the_command_line_and_at_start(data: Datasets) -> None:
    app = data.app("texts@1", key=["id=77"])
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        assert app.table.cursor == 77
        await pilot.press("colon")
        await _type(pilot, "key 123")  # the contract's one key field
        await pilot.press("enter")
        await settle(pilot)
        assert app.table.cursor == 123
        await pilot.press("colon")
        await _fill(pilot, "key id=99999")
        await pilot.press("enter")
        await settle(pilot)
        assert app.table.cursor == 123
        assert any("no row with id=99999" in n.message for n in app._notifications)
        await pilot.press("colon")
        await _fill(pilot, "row 12")
        await pilot.press("enter")
        assert app.table.cursor == 12


async def test_the_row_option_starts_on_that_row(data: Datasets) -> None:
    app = data.app("texts@1", row=333)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.table.cursor == 333 and "row 333 · shard" in screen_text(app)


# -------------------------------------------------------------------------------------- detail pane


async def test_the_detail_pane_shows_the_whole_text_wrapped(data: Datasets) -> None:
    app = data.app("texts@1", row=10)
    async with app.run_test(size=(80, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        detail = text[text.index("row 10 · shard") :]
        assert "row 10: word word word word word word word word word word" in detail
        assert 'second line, with "quotes", commas' in detail  # the second line, on its own line
        assert "text  " in detail and "(text)" in detail


async def test_a_chat_is_a_thread_of_turns_with_roles_lengths_marks_and_anomalies(data: Datasets) -> None:
    app = data.app("chats", row=3)
    async with app.run_test(size=(100, 50)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        detail = text[text.index("row 3 · shard") :]
        for expected in (
            "system  turn 1 · 28 chars  [system turn]",
            "You are a careful assistant.",
            "user  turn 2 · 26 chars",
            "assistant  turn 3 · 25 chars",
            "Anything else?",
            "asistant  turn 5 · 2 chars",
            "! turn 5 has role 'asistant'",
        ):
            assert expected in detail, expected
        assert "!" in text.split("\n")[4][:6]  # the table marks row 3 as having an anomaly
        await pilot.press("down", "down")  # row 5: a tool call
        await settle(pilot)
        text = screen_text(app)
        assert "assistant (calculator)" in text and "tool (calculator)" in text and "(empty)" in text


async def test_images_are_drawn_or_described_and_bad_ones_say_why(data: Datasets) -> None:
    from textual_image.widget import UnicodeImage

    app = data.app("images", images="unicode")
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "image/png 8x6" in text
        assert len(app.query(UnicodeImage)) == 1  # the picture of row 0
        await pilot.press("down")
        await settle(pilot)
        assert "image/jpeg 24x16" in screen_text(app) and len(app.query(UnicodeImage)) == 1
        await pilot.press("down")
        await settle(pilot)
        text = screen_text(app)
        assert "! all 256 bytes are zero" in text
        assert "no picture: Pillow cannot decode it" in text and len(app.query(UnicodeImage)) == 0


async def test_with_pictures_off_an_image_is_its_one_line_description(data: Datasets) -> None:
    from textual_image.widget import UnicodeImage

    app = data.app("images", images="none", row=1)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot)
        assert "image/jpeg 24x16" in screen_text(app) and len(app.query(UnicodeImage)) == 0


async def test_json_is_folded_in_the_detail_pane(tmp_path: Path) -> None:
    import pyarrow as pa

    from tests.inspect_data import register_path, schema_of

    deep = {"a": {"b": {"c": {"d": {"e": 1}}}}, "items": list(range(30))}
    table = pa.table({"id": [0], "meta": [json.dumps(deep)]})
    registry = str(tmp_path / "registry")
    register_path(
        tmp_path / "d",
        table,
        "parquet",
        name="meta",
        registry=registry,
        schema=schema_of(table, {"meta": {"role": "json"}}),
        shards=1,
    )
    from dsm.viewers.tui import make_app

    app = make_app("meta", registry=registry, cache_dir=str(tmp_path / "cache"), images="none")
    async with app.run_test(size=(100, 90)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "object with 2 keys, depth 5" in text
        assert '"{... 1 keys}"' in text  # the levels below the third folded
        assert '"... 10 more items"' in text and '"e"' not in text


async def test_audio_and_video_are_their_header_facts(tmp_path: Path) -> None:
    import io
    import struct
    import wave

    import pyarrow as pa

    from dsm.viewers.tui import make_app
    from tests.inspect_data import register_path, schema_of

    sound = io.BytesIO()
    with wave.open(sound, "wb") as out:  # the standard library's writer, not dsm's
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(b"\x00\x00" * 2 * 16_000 * 3)  # three seconds
    mvhd = struct.pack(">I4sB3xIIII", 108, b"mvhd", 0, 0, 0, 600, 7_200) + b"\x00" * 80
    movie = struct.pack(">I4s4s", 16, b"ftyp", b"isom") + b"\x00" * 4
    movie += struct.pack(">I4s", 8 + len(mvhd), b"moov") + mvhd
    table = pa.table({"id": [0], "clip": [sound.getvalue()], "film": [movie]})
    registry = str(tmp_path / "registry")
    roles = {"clip": {"role": "audio"}, "film": {"role": "video"}}
    register_path(
        tmp_path / "d",
        table,
        "parquet",
        name="av",
        registry=registry,
        schema=schema_of(table, roles),
        shards=1,
    )
    app = make_app("av", registry=registry, cache_dir=str(tmp_path / "cache"), images="unicode")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        detail = text[text.index("row 0 · shard") :]
        assert "audio/wav 3.00 s 16000 Hz x2" in detail and "(audio)" in detail
        assert "duration 3.0 · sample_rate 16000 · channels 2" in detail
        assert "video/mp4 12.00 s" in detail and "(video)" in detail
        assert "picture below" not in detail  # only images are drawn


# ----------------------------------------------------------------------------------------- episodes


async def test_the_episode_view_steps_plays_and_moves_between_episodes(data: Datasets) -> None:
    app = data.app("rollouts", row=8)  # episode 1 (rows 6-10) has a NaN reward at step 2
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen)
        text = screen_text(app)
        assert "episode 1: 5 steps (rows 6-10)" in text
        assert "NaN" in text and "×" in text  # the reward and its mark in the sparkline
        assert screen.table.cursor == 0
        await pilot.press("right", "right")
        await settle(pilot)
        assert screen.table.cursor == 2 and "! reward is NaN" in screen_text(app)
        await pilot.press("space")
        assert screen.playing
        await settle(pilot, ready=lambda: not screen.playing)  # plays to the last step, then stops
        assert screen.table.cursor == 4 and "terminal step" in screen_text(app)
        assert "■" in screen_text(app)
        await pilot.press("right_square_bracket")
        await settle(pilot, ready=lambda: app.screen is not screen and app.screen.screen_ready())
        assert "episode 2: 4 steps" in screen_text(app)
        await pilot.press("right_square_bracket")
        await settle(pilot, ready=lambda: "episode 3" in screen_text(app) and app.screen.screen_ready())
        text = screen_text(app)
        assert f"episode {NEVER_ENDING_EPISODE}: 7 steps" in text and "never ends" in text
        assert "! no terminal step" in text
        await pilot.press("escape")
        assert isinstance(app.screen, type(app.screen)) and not isinstance(app.screen, EpisodeScreen)


async def test_an_episode_of_the_list_layout_is_its_row_s_lists(data: Datasets) -> None:
    app = data.app("episodes", row=1)
    async with app.run_test(size=(110, 30)) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen) and screen.window.total == 5
        assert "! reward is NaN" in "\n".join(str(s) for s in screen._steps_of_list()[2].anomalies) or any(
            "NaN" in a for a in screen._steps_of_list()[2].anomalies
        )
        await pilot.press("end")
        await settle(pilot)
        assert screen.table.cursor == 4 and "terminal step" in screen_text(app)


async def test_e_on_data_without_rl_roles_says_so(data: Datasets) -> None:
    app = data.app("chats")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("e")
        assert not isinstance(app.screen, EpisodeScreen)
        assert any("no episodes here" in n.message for n in app._notifications)


# --------------------------------------------------------------------------------------------- diff


async def test_d_diffs_against_the_previous_version_side_by_side(data: Datasets) -> None:
    app = data.app("texts@2")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await pilot.press("enter")  # the suggestion: texts@1
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen) and screen.run is not None
        text = screen_text(app)
        assert "texts@1 → texts@2: rows compared by key id" in text
        assert "changed 2 · added 2 · removed 1" in text
        assert "id=3" in text and "EDITED" in text  # the first changed row, side by side
        assert "OLD texts@1" in text and "NEW texts@2" in text
        await pilot.press("down")
        await settle(pilot)
        assert "id=7" in screen_text(app) and "99.5" in screen_text(app)
        await pilot.press("2")
        await settle(pilot)
        assert "id=5000" in screen_text(app) and "id=5001" in screen_text(app)
        await pilot.press("3")
        await settle(pilot)
        assert "id=5" in screen_text(app) and "removed" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, DiffScreen)


# ------------------------------------------------------------------------------------ copy, columns


async def test_c_copies_the_row_as_json(data: Datasets) -> None:
    app = data.app("texts@1", row=5)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("c")
        copied = json.loads(app.clipboard)
        assert copied["position"] == 5 and copied["cells"]["id"]["value"] == 5
        assert copied["location"]["shard"] == "part-00000.parquet"


async def test_the_column_picker_chooses_the_columns_of_the_table(data: Datasets) -> None:
    app = data.app("texts@1")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert [c.name for c in app.table.columns] == ["id", "text", "score", "flag", "at", "blob"]
        await pilot.press("f")
        await settle(pilot)
        await pilot.press("space")  # id off
        await pilot.press("down", "down", "space")  # score off
        await pilot.press("enter")
        await settle(pilot)
        assert [c.name for c in app.table.columns] == ["text", "flag", "at", "blob"]
        header = screen_text(app).split("\n")[0]
        assert "score" not in header and "text" in header
        await pilot.press("colon")
        await _fill(pilot, "columns id,score")
        await pilot.press("enter")
        assert [c.name for c in app.table.columns] == ["id", "score"]


async def test_help_lists_the_keys_and_q_quits(data: Datasets) -> None:
    app = data.app("texts@1")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        text = screen_text(app)
        assert "copy the row as JSON" in text and "diff against another version" in text
        await pilot.press("escape")
        await pilot.press("q")
    assert app.return_code == 0


# ------------------------------------------------------------------------------- masking and audit


async def test_a_masked_value_never_appears_on_any_screen_of_a_session(data: Datasets) -> None:
    seen: list[str] = []
    app = data.app("chats")
    async with app.run_test(size=(120, 40)) as pilot:

        async def look() -> None:
            await settle(pilot)
            seen.append(screen_text(app))

        await look()
        for _ in range(12):  # every row in the detail pane
            await pilot.press("down")
            await look()
        await pilot.press("slash")
        await _type(pilot, "person3")  # a search for a masked value finds nothing
        await look()
        searched = seen[-1]
        await pilot.press("enter")
        await look()
        await pilot.press("c")
        seen.append(app.clipboard)
        await pilot.press("f")
        await look()
        await pilot.press("escape", "colon")
        await _fill(pilot, "columns email")
        await pilot.press("enter")
        await look()
        await pilot.press("colon")
        await _fill(pilot, "diff chats@1")
        await pilot.press("enter")
        await look()
        await pilot.press("escape", "question_mark")
        await look()
        seen.append(app.export_screenshot())  # the SVG has what the text has, and the title
    assert seen and all(value not in page for page in seen for value in EMAILS)
    assert "person3" in searched  # the search text itself was on screen: the check reads what is shown
    assert "*** (26 chars)" in seen[0]


async def test_masked_fields_stay_masked_in_the_episode_view(data: Datasets) -> None:
    app = data.app("rollouts", row=2)
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        text = screen_text(app) + app.export_screenshot()
        assert "@lab.example.org" not in text and "***" in text


async def test_unmasking_shows_the_field_and_is_audited_as_view(data: Datasets) -> None:
    import dsm

    app = data.app("chats", unmask=["email"], reason="ticket 4411", row=2)
    async with app.run_test(size=(140, 30)) as pilot:
        await settle(pilot)
        assert EMAILS[2] in screen_text(app)
        assert "unmasked (audited): email" in _status(app)
    records = dsm.audit("chats", registry=data.registry).records
    assert any(r.command == "view" and r.reason == "ticket 4411" and r.fields == ("email",) for r in records)


# ----------------------------------------------------------------------------- terminal, no writes


async def test_no_color_makes_every_colour_grey(data: Datasets, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = data.app("chats", row=3)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        svg = app.export_screenshot()
    frame = {"ff5f57", "febc2e", "28c840", "c5c8c6"}  # the SVG's window buttons and title, not the screen
    colours = set(re.findall(r"#([0-9a-f]{6})", svg)) - frame
    assert colours and all(c[0:2] == c[2:4] == c[4:6] for c in colours), colours


async def test_it_works_in_80x24_and_puts_the_detail_beside_the_table_when_wide(data: Datasets) -> None:
    app = data.app("chats", row=3)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = screen_text(app).split("\n")
        assert len(lines) == 24 and all(len(line) <= 80 for line in lines)
        assert "chats@1 · row 3 of 12" in lines[-2]
        assert not app.screen.has_class("wide")
        await pilot.resize_terminal(160, 40)
        await settle(pilot)
        assert app.screen.has_class("wide")
        detail = app.query_one(DetailPane)
        assert detail.region.x > 0 and detail.region.y == 0


async def test_a_session_never_writes_to_the_dataset(data: Datasets) -> None:
    def state() -> dict[str, str]:
        return {
            str(p): hashlib.sha256(p.read_bytes()).hexdigest() + str(p.stat().st_mtime_ns)
            for folder in ("texts1", "texts2")
            for p in sorted((data.root / folder).rglob("*"))
            if p.is_file()
        }

    before = state()
    app = data.app("texts@2")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("end", "c", "d", "enter")
        await settle(pilot)
        await pilot.press("escape")
    assert state() == before


async def test_a_shard_that_cannot_be_read_is_shown_and_the_app_goes_on(tmp_path: Path) -> None:
    from dsm.viewers.tui import make_app
    from tests.inspect_data import flat_table, register_path

    registry = str(tmp_path / "registry")
    register_path(tmp_path / "d", flat_table(300), "parquet", name="broken", registry=registry, shards=3)
    last = sorted((tmp_path / "d").glob("*.parquet"))[-1]
    last.write_bytes(last.read_bytes()[:-10])  # changed after registration
    app = make_app("broken", registry=registry, cache_dir=str(tmp_path / "cache"), images="none")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        text = screen_text(app)
        assert "! shard" in text and "the contract records" in text
        assert "cannot read row 299" in text
        await pilot.press("home")
        await settle(pilot)
        assert "row 0 · shard part-00000.parquet" in screen_text(app)


def _billion_rows(root: Path) -> Path:
    """A contract file of a real dataset of 1,000,000,000 rows: one Parquet file of a million rows
    (registered, so its shard entry is dsm's own), listed 1,000 times under 1,000 names (hard links), with
    the dataset fingerprint combined from the shards' as register would."""
    import os

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import dsm
    from dsm.contract import DatasetFingerprint
    from dsm.hashing.rowdigest import RowDigest

    ids = pa.array(range(1_000_000), pa.int64())
    text = pc.binary_join_element_wise("row ", pc.cast(ids, pa.string()), "")
    one = root / "one"
    one.mkdir()
    pq.write_table(pa.table({"id": ids, "text": text}), one / "part.parquet", row_group_size=65_536)
    registered = dsm.register(str(one), name="one", registry=str(root / "registry"))
    shard = registered.shards[0]
    many = root / "billion"
    many.mkdir()
    shards = []
    for number in range(1_000):
        name = f"part-{number:05d}.parquet"
        os.link(one / "part.parquet", many / name)
        shards.append(dataclasses.replace(shard, path=name))
    digest = RowDigest.combine(
        RowDigest.from_hex(
            rows=s.rows or 0, unordered=s.fingerprint or "", ordered=s.ordered_fingerprint or ""
        )
        for s in shards
    )
    contract = registered.evolve(
        name="billion",
        version=None,
        location=str(many),
        shards=tuple(shards),
        fingerprint=DatasetFingerprint(
            algorithm="dsm-rows-v1", rows=digest.rows, unordered=digest.unordered, ordered=digest.ordered
        ),
        lineage=None,
    )
    path = root / "billion.yaml"
    path.write_text(contract.to_yaml())
    return path


async def test_a_billion_row_dataset_opens_and_jumps_reading_only_the_shards_and_blocks_shown(
    tmp_path: Path,
) -> None:
    from dsm.viewers.tui import make_app

    total = 1_000_000_000
    contract = _billion_rows(tmp_path)
    app = make_app(str(contract), cache_dir=str(tmp_path / "cache"), images="none")
    opened: list[int] = []
    index = app.source.index

    def counted(shard: int) -> Any:
        opened.append(shard)
        return index(shard)

    app.source.index = counted  # type: ignore[method-assign]
    spans: list[int] = []
    want = app.window.want

    def wanted(first: int, last: int, **kwargs: Any) -> None:
        spans.append(last - first + 1)
        want(first, last, **kwargs)

    app.window.want = wanted  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert "row 0 of 1,000,000,000" in _status(app) and "part-00000.parquet" in _status(app)
        await pilot.press("end")
        await settle(pilot)
        assert app.table.cursor == total - 1
        text = screen_text(app)
        assert "999,999,999" in text and "row 999999" in text  # the last row, its text on screen
        assert "part-00999.parquet, row group 15" in _status(app)
        await pilot.press("g")
        await _fill(pilot, "500000000")
        await pilot.press("enter", "pagedown")
        await settle(pilot)
        assert app.table.cursor == 500_000_000 + app.table.page_rows
        assert "part-00500.parquet" in _status(app)
        # the footers of four of the thousand files were read, and a few blocks of 128 rows
        assert set(opened) <= {0, 999, 499, 500}  # 499: the block before the screen, prefetched
        assert app.window.held_rows <= 8 * app.window.block_rows
        # the rows asked for were always one screen, never the span of a jump (its cursor apart)
        assert spans and max(spans) <= app.table.page_rows
