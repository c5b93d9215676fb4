"""Rendering by role: chats, images, RL episodes, JSON, text; media facts from magic bytes; role inference."""

from __future__ import annotations

import json
import math
import struct
import tarfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsm.contract import Schema
from dsm.demo import make_png
from dsm.errors import InputError
from dsm.inspect import open_rows
from dsm.inspect.episodes import EpisodeLayout, EpisodeTracker
from dsm.inspect.media import sniff
from dsm.inspect.roles import infer_roles, parse_messages
from dsm.inspect.source import RowSource
from dsm.inspect.view import FieldView, cell_view
from tests.inspect_data import (
    CHAT_WRONG_ROLE_ROW,
    NEVER_ENDING_EPISODE,
    chat_schema,
    chat_table,
    image_schema,
    image_table,
    make_jpeg,
    register_path,
    rl_list_table,
    rl_schema,
    rl_table,
    schema_of,
    webdataset_table,
)


def _source(
    tmp_path: Path, table: pa.Table, schema: Schema, fmt: str = "parquet", name: str = "ds"
) -> RowSource:
    registry = str(tmp_path / "registry")
    contract = register_path(
        tmp_path / name, table, fmt, name=name, registry=registry, schema=schema, shards=2
    )
    return open_rows(contract.ref, registry=registry, cache_dir=str(tmp_path / "cache"))


def test_chat_rows_render_as_threads_with_system_tool_and_wrong_roles_marked(tmp_path: Path) -> None:
    table = chat_table()
    source = _source(tmp_path, table, chat_schema(table), fmt="jsonl", name="chat")
    page = source.read(0, table.num_rows)
    cells = [row.cell("messages") for row in page.rows]
    assert all(c.kind == "messages" for c in cells)
    assert cells[0].summary == "3 turns: system, user, assistant"
    assert cells[0].value[0]["marks"] == ["system turn"] and cells[0].value[0]["kind"] == "system"
    assert cells[0].value[2]["content"] == "0 + 0 = 0.\nAnything else?"
    wrong = cells[CHAT_WRONG_ROLE_ROW]
    assert any("'asistant'" in a for a in wrong.anomalies)
    assert [a for c in cells for a in c.anomalies if "asistant" in a] == list(wrong.anomalies[:1])
    tool_turn = cells[5].value[-1]
    assert tool_turn["kind"] == "tool" and tool_turn["marks"][0] == "tool result"
    assert page.rows[0].cell("email").kind == "masked"


def test_messages_parse_sharegpt_and_multimodal_and_report_problems() -> None:
    turns, anomalies = parse_messages(
        json.dumps(
            [
                {"from": "human", "value": "hi"},
                {"from": "gpt", "value": [{"type": "text", "text": "hello"}, {"type": "image_url"}]},
                {"from": "gpt", "value": ""},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                },
            ]
        )
    )
    assert [t["kind"] for t in turns] == ["user", "assistant", "assistant", "assistant"]
    assert turns[1]["marks"] == ["image_url part"] and turns[3]["marks"] == ["tool call: f({})"]
    assert "turn 3 (gpt) has empty content" in anomalies
    assert "turns 2 and 3 are both assistant turns" in anomalies
    assert parse_messages("not json")[1][0].startswith("not a chat: not valid JSON")


def test_images_render_with_media_type_dimensions_and_zero_bytes_flagged(tmp_path: Path) -> None:
    table = image_table()
    source = _source(tmp_path, table, image_schema(table), name="images")
    page = source.read(0, table.num_rows)
    for row in page.rows:
        cell = row.cell("image")
        i = row.position
        assert cell.kind == "image" and cell.value is None
        if i == 2:
            assert cell.anomalies == ("all 256 bytes are zero",)
        elif i % 2:
            assert cell.details["media_type"] == "image/jpeg"
            assert (cell.details["width"], cell.details["height"]) == (16 + 8 * i, 8 + 8 * (i % 3))
        else:
            assert cell.details["media_type"] == "image/png"
            assert (cell.details["width"], cell.details["height"]) == (8 + i, 6 + i)
            assert cell.summary.startswith(f"image/png {8 + i}x{6 + i}, ")
    declared = schema_of(table, {"image": {"role": "image", "media_type": "image/png"}})
    mismatched = _source(tmp_path, table, declared, name="declared").read(1, 1).rows[0].cell("image")
    assert "declared image/png, but the bytes are image/jpeg" in mismatched.anomalies


def test_media_bytes_and_byte_ranges(tmp_path: Path) -> None:
    table = webdataset_table(30)
    schema = schema_of(table, {"png": {"role": "image"}, "json": {"role": "json"}})
    source = _source(tmp_path, table, schema, fmt="webdataset", name="wds")
    ref = source.media_ref(17, "png")
    assert (
        ref.source == "member" and ref.media_type == "image/png" and ref.size == len(table["png"][17].as_py())
    )
    path = source.location.path(source.shards[source.locate(17).shard_index].path)
    with tarfile.open(path) as archive:
        member = archive.getmember(f"{table['__key__'][17].as_py()}.png")
    assert (ref.offset, ref.length) == (member.offset_data, member.size)
    whole = source.media_bytes(17, "png")
    assert whole == table["png"][17].as_py()
    assert source.media_bytes(17, "png", start=8, end=24) == whole[8:24]
    json_cell = source.read(3, 1).rows[0].cell("json")
    assert json_cell.kind == "json" and json_cell.value == {"i": 3, "tags": ["a", "a", "a"]}
    images = image_table()
    parquet = _source(tmp_path, images, image_schema(images), name="pq-images")
    value = parquet.media_ref(1, "image")
    assert value.source == "value" and value.media_type == "image/jpeg" and value.url is None
    assert parquet.media_bytes(1, "image") == images["image"][1].as_py()
    with pytest.raises(InputError, match="classified"):
        parquet.media_ref(1, "uploader")


def test_rl_episodes_as_rows_report_the_one_that_never_ends(tmp_path: Path) -> None:
    table = rl_table()
    source = _source(tmp_path, table, rl_schema(table), name="rl")
    episodes = source.episodes()
    assert [e.episode for e in episodes] == [0, 1, 2, 3, 4]
    assert [e.length for e in episodes] == [6, 5, 4, 7, 3]
    never = episodes[NEVER_ENDING_EPISODE]
    assert never.terminal_step is None and never.anomalies == ("no terminal step: the episode never ends",)
    assert math.isnan(episodes[1].total_reward or 0.0)
    assert episodes[1].anomalies == ("reward is NaN at step 2",)
    assert episodes[0].total_reward == pytest.approx(sum(1.0 + s / 10 for s in range(6)))
    assert episodes[0].terminal_step == 5 and episodes[0].terminated and not episodes[0].anomalies
    page = source.read(16, 3)  # rows of episodes 3
    assert [e.episode for e in page.episodes] == [3]
    assert page.rows[0].cell("reward").kind == "reward" and page.rows[0].cell("obs").summary.startswith(
        "array[3]"
    )


def test_rl_episodes_as_list_rows_and_as_a_stream(tmp_path: Path) -> None:
    lists = rl_list_table()
    schema = schema_of(
        lists,
        {
            "episode_id": {"role": "episode"},
            "reward": {"role": "reward"},
            "done": {"role": "done"},
            "action": {"role": "action"},
        },
    )
    source = _source(tmp_path, lists, schema, fmt="arrow", name="rl-lists")
    assert source.episode_layout is not None and source.episode_layout.layout == "list"
    episodes = source.episodes()
    assert [e.length for e in episodes] == [6, 5, 4, 7, 3]
    assert episodes[NEVER_ENDING_EPISODE].anomalies == ("no terminal step: the episode never ends",)
    cell = source.read(NEVER_ENDING_EPISODE, 1).rows[0].cell("done")
    assert cell.summary == "done never true in 7 steps"
    assert [e.episode for e in source.read(1, 1).episodes] == [1]
    steps = rl_table().drop_columns(["episode_id"])
    stream = EpisodeTracker(EpisodeLayout(layout="stream", step="step", reward="reward", done="done"))
    stream.add(steps.slice(0, 10), 0)
    stream.add(steps.slice(10), 10)
    found = stream.finish()
    # Without an episode id, an episode that never ends runs into the next one: one long episode.
    assert [e.length for e in found] == [6, 5, 4, 10]
    assert any("steps out of order" in a for a in found[3].anomalies)


def test_episode_anomalies_out_of_order_repeated_and_early_terminal() -> None:
    layout = EpisodeLayout(layout="rows", episode="ep", step="t", reward="r", done="d")
    tracker = EpisodeTracker(layout)
    tracker.add(
        pa.table(
            {
                "ep": ["a"] * 5,
                "t": [0, 2, 1, 1, 3],
                "r": [1.0, None, 1.0, 1.0, 1.0],
                "d": [False, True, False, False, False],
            }
        ),
        100,
    )
    (episode,) = tracker.finish()
    text = " | ".join(episode.anomalies)
    assert "before the last step" in text and "steps out of order: step 1 after step 2 (row 102)" in text
    assert "1 repeated step number(s)" in text and "1 step(s) have no reward (null)" in text
    assert episode.first_position == 100 and episode.last_position == 104


def test_infer_roles_from_names_and_values() -> None:
    proposals = {p.field: (p.role, p.media_type) for p in infer_roles(chat_table())}
    assert proposals == {"messages": ("messages", None)}
    proposals = {p.field: (p.role, p.media_type) for p in infer_roles(image_table())}
    assert proposals["image"] == ("image", None)  # PNG and JPEG: the role, no single media type
    rl = {p.field: p.role for p in infer_roles(rl_table())}
    assert rl == {
        "episode_id": "episode",
        "step": "step",
        "obs": "observation",
        "action": "action",
        "reward": "reward",
        "done": "done",
    }
    other = pa.table(
        {
            "meta": ['{"a": 1}', '{"b": [1, 2]}'],
            "wav": [b"RIFF\x24\x00\x00\x00WAVEfmt ", b"RIFF\x24\x00\x00\x00WAVEfmt "],
            "picture": ["a/b.jpg", "c.jpeg"],
            "body": ["x" * 300, "y\nz"],
            "text": pa.array([1, 2]),  # a text name on an int column proposes nothing
        }
    )
    found = {p.field: (p.role, p.media_type) for p in infer_roles(other)}
    assert found == {
        "meta": ("json", None),
        "wav": ("audio", "audio/wav"),
        "picture": ("image", "image/jpeg"),
        "body": ("text", None),
    }
    assert infer_roles(other, known={"meta": "text"})[0].field == "wav"


def _wav(seconds: float, rate: int = 8000, channels: int = 1) -> bytes:
    samples = int(seconds * rate)
    data = b"\x00\x00" * samples * channels
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * 2 * channels, 2 * channels, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_sniff_reads_dimensions_and_durations() -> None:
    assert (sniff(make_png(5, 7, 1)).width, sniff(make_png(5, 7, 1)).height) == (5, 7)
    jpeg = sniff(make_jpeg(32, 24, 10))
    assert (jpeg.media_type, jpeg.width, jpeg.height) == ("image/jpeg", 32, 24)
    wav = sniff(_wav(1.5, channels=2))
    assert (wav.media_type, wav.duration, wav.sample_rate, wav.channels) == ("audio/wav", 1.5, 8000, 2)
    gif = sniff(b"GIF89a" + struct.pack("<HH", 3, 4) + b"\x00" * 10)
    assert (gif.media_type, gif.width, gif.height) == ("image/gif", 3, 4)
    mvhd = struct.pack(">I4sB3xIIII", 108, b"mvhd", 0, 0, 0, 600, 1800) + b"\x00" * 80
    mp4 = (
        struct.pack(">I4s4s", 16, b"ftyp", b"isom")
        + b"\x00" * 4
        + struct.pack(">I4s", 8 + len(mvhd), b"moov")
        + mvhd
    )
    assert (sniff(mp4).media_type, sniff(mp4).duration) == ("video/mp4", 3.0)
    assert sniff(b"").anomalies == ("empty value (0 bytes)",)
    assert sniff(b"\x00" * 10, declared="image/png").anomalies == ("all 10 bytes are zero",)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), declared=st.sampled_from([None, "image/png", "audio/wav", "video/mp4"]))
def test_sniff_never_fails_on_any_bytes(data: bytes, declared: str | None) -> None:
    info = sniff(data, declared=declared)
    assert info.size == len(data)
    json.dumps(info.to_dict())
    assert info.describe()


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=12,
    ),
    role=st.sampled_from(
        [None, "text", "messages", "image", "json", "reward", "done", "observation", "episode"]
    ),
    masked=st.booleans(),
)
def test_every_cell_is_plain_json_whatever_the_value_and_role(
    value: object, role: str | None, masked: bool
) -> None:
    field = FieldView(name="f", type="x", role=role, masked=masked, classification="pii" if masked else None)
    cell = cell_view(field, value)
    text = json.dumps(cell.to_dict(), allow_nan=False)
    if masked:
        assert cell.kind == "masked" and cell.value == "***"
        if isinstance(value, str) and len(value) > 3:
            assert json.dumps(value)[1:-1] not in text
