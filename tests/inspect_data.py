"""Datasets for looking at rows: a chat, an image and an RL dataset, and one flat table in every format.

Shared by the inspect tests and the viewers' tests (``dsm view``, ``dsm serve``): each ``*_table`` function
returns an Arrow table with known anomalies, each ``*_schema`` the contract schema that gives its fields roles
and classifications, and :func:`register_table` writes a table as shards of any format on any storage root and
registers it.

Known content (the tests assert on it):

- chat: row 3 has a turn with role ``"asistant"``; every row has a system turn and row 5 a tool call;
  ``email`` is classified ``pii``.
- images: PNG (even rows) and JPEG (odd rows) bytes, real decodable files; row 2 is all zero bytes;
  ``uploader`` is classified ``pii``.
- RL: episodes 0-4 as rows sharing ``episode_id`` ordered by ``step``; episode 3 never terminates; episode 1
  has a NaN reward at step 2; ``operator`` is classified ``pii``.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import dsm
from dsm.contract import Contract, Field, Schema
from dsm.demo import make_png
from dsm.formats import get_format

__all__ = [
    "CHAT_WRONG_ROLE_ROW",
    "EMAILS",
    "FLAT_FORMATS",
    "NEVER_ENDING_EPISODE",
    "chat_schema",
    "chat_table",
    "flat_table",
    "image_schema",
    "image_table",
    "make_jpeg",
    "register_table",
    "rl_list_table",
    "rl_schema",
    "rl_table",
    "schema_of",
    "webdataset_table",
    "write_shards",
]

FLAT_FORMATS = ("parquet", "jsonl", "csv", "arrow", "webdataset")
CHAT_WRONG_ROLE_ROW = 3
NEVER_ENDING_EPISODE = 3
EPISODE_LENGTHS = (6, 5, 4, 7, 3)
EMAILS = [f"person{i}.secret@example.org" for i in range(60)]
"""The raw values of the classified ``email`` field of the chat table: no output may contain one."""


def schema_of(table: pa.Table, annotations: dict[str, dict[str, Any]], key: Sequence[str] = ()) -> Schema:
    """The contract schema of ``table`` with ``annotations`` (``{"text": {"role": "text"}}``) on fields."""
    plain = Schema.from_arrow(table.schema, key=key)
    fields = tuple(
        Field(**(f.to_dict() | {"nullable": f.nullable} | annotations.get(f.name, {}))) for f in plain.fields
    )
    return Schema(fields=fields, key=tuple(key))


# ----------------------------------------------------------------------------------------------- chat


def chat_table(rows: int = 12) -> pa.Table:
    """A chat dataset: ``id``, ``messages`` (list of {role, content, name}), ``email`` (pii), ``lang``."""
    turn = pa.struct([("role", pa.string()), ("content", pa.string()), ("name", pa.string())])
    conversations = []
    for i in range(rows):
        turns = [
            {"role": "system", "content": "You are a careful assistant.", "name": None},
            {"role": "user", "content": f"Question {i}: what is {i} + {i}?", "name": None},
            {"role": "assistant", "content": f"{i} + {i} = {2 * i}.\nAnything else?", "name": None},
        ]
        if i == CHAT_WRONG_ROLE_ROW:
            turns.append({"role": "user", "content": "And times two?", "name": None})
            turns.append({"role": "asistant", "content": f"{4 * i}", "name": None})
        if i == 5:
            turns.append({"role": "assistant", "content": "", "name": "calculator"})
            turns.append({"role": "tool", "content": "42", "name": "calculator"})
        conversations.append(turns)
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "messages": pa.array(conversations, pa.list_(turn)),
            "email": pa.array(EMAILS[:rows], pa.string()),
            "lang": pa.array(["en" if i % 3 else "de" for i in range(rows)], pa.string()),
        }
    )


def chat_schema(table: pa.Table) -> Schema:
    return schema_of(
        table, {"messages": {"role": "messages"}, "email": {"classification": "pii"}}, key=["id"]
    )


# --------------------------------------------------------------------------------------------- images


def _bits(value: int, count: int) -> str:
    return format(value, f"0{count}b") if count else ""


def make_jpeg(width: int, height: int, gray: int) -> bytes:
    """A baseline grayscale JPEG of one flat tone (``width`` and ``height`` multiples of 8).

    Every block has only a DC coefficient: the standard DC table codes it and an AC table holding the
    end-of-block code alone ends it; any JPEG decoder reads the result.
    """
    if width % 8 or height % 8 or not 0 <= gray <= 255:
        raise ValueError("width and height must be multiples of 8, gray 0..255")

    def segment(marker: int, body: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body

    dc_bits = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    dc_codes: dict[int, str] = {}
    code, symbol = 0, 0
    for length, count in enumerate(dc_bits, start=1):
        for _ in range(count):
            dc_codes[symbol] = _bits(code, length)
            code, symbol = code + 1, symbol + 1
        code <<= 1
    value = (gray - 128) * 8
    category = abs(value).bit_length()
    amplitude = value if value >= 0 else value + (1 << category) - 1
    stream = dc_codes[category] + _bits(amplitude, category) + "0"
    stream += (dc_codes[0] + "0") * ((width // 8) * (height // 8) - 1)
    stream += "1" * (-len(stream) % 8)
    data = bytearray()
    for i in range(0, len(stream), 8):
        byte = int(stream[i : i + 8], 2)
        data.append(byte)
        if byte == 0xFF:
            data.append(0)
    return b"".join(
        [
            b"\xff\xd8",
            segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"),
            segment(0xDB, b"\x00" + b"\x01" * 64),
            segment(0xC0, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00"),
            segment(0xC4, b"\x00" + bytes(dc_bits) + bytes(range(12))),
            segment(0xC4, b"\x10" + bytes([1] + [0] * 15) + b"\x00"),
            segment(0xDA, b"\x01\x01\x00\x00\x3f\x00"),
            bytes(data),
            b"\xff\xd9",
        ]
    )


def image_table(rows: int = 8) -> pa.Table:
    """An image dataset: ``id``, ``image`` (PNG or JPEG bytes), ``caption``, ``uploader`` (pii)."""
    images = []
    for i in range(rows):
        if i == 2:
            images.append(bytes(256))  # the image that is all zeros
        elif i % 2:
            images.append(make_jpeg(16 + 8 * i, 8 + 8 * (i % 3), 40 + 20 * i))
        else:
            images.append(make_png(8 + i, 6 + i, i))
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "image": pa.array(images, pa.binary()),
            "caption": pa.array([f"picture number {i}" for i in range(rows)], pa.string()),
            "uploader": pa.array([f"uploader-{i}@photos.example.org" for i in range(rows)], pa.string()),
        }
    )


def image_schema(table: pa.Table) -> Schema:
    return schema_of(table, {"image": {"role": "image"}, "uploader": {"classification": "pii"}}, key=["id"])


# ------------------------------------------------------------------------------------------------- RL


def rl_table() -> pa.Table:
    """Steps of five episodes, one row per step (``episode_id``, ``step``, ``obs``, ``action``, ``reward``,
    ``done``, ``operator`` (pii)); episode 3 never terminates, episode 1 has a NaN reward at step 2."""
    rows: dict[str, list[Any]] = {k: [] for k in ("episode_id", "step", "obs", "action", "reward", "done")}
    for episode, length in enumerate(EPISODE_LENGTHS):
        for step in range(length):
            rows["episode_id"].append(episode)
            rows["step"].append(step)
            rows["obs"].append([float(step), float(episode) / 10, -1.0 * step])
            rows["action"].append((episode + step) % 4)
            rows["reward"].append(float("nan") if (episode, step) == (1, 2) else 1.0 + step / 10)
            rows["done"].append(step == length - 1 and episode != NEVER_ENDING_EPISODE)
    count = len(rows["step"])
    return pa.table(
        {
            "episode_id": pa.array(rows["episode_id"], pa.int64()),
            "step": pa.array(rows["step"], pa.int32()),
            "obs": pa.array(rows["obs"], pa.list_(pa.float32())),
            "action": pa.array(rows["action"], pa.int32()),
            "reward": pa.array(rows["reward"], pa.float64()),
            "done": pa.array(rows["done"], pa.bool_()),
            "operator": pa.array([f"op-{i % 3}@lab.example.org" for i in range(count)], pa.string()),
        }
    )


def rl_list_table() -> pa.Table:
    """The same episodes, one row per episode with list columns (the ``list`` layout)."""
    steps = rl_table()
    out: dict[str, list[Any]] = {"episode_id": [], "reward": [], "done": [], "action": []}
    start = 0
    for episode, length in enumerate(EPISODE_LENGTHS):
        part = steps.slice(start, length)
        out["episode_id"].append(episode)
        out["reward"].append(part.column("reward").to_pylist())
        out["done"].append(part.column("done").to_pylist())
        out["action"].append(part.column("action").to_pylist())
        start += length
    return pa.table(
        {
            "episode_id": pa.array(out["episode_id"], pa.int64()),
            "reward": pa.array(out["reward"], pa.list_(pa.float64())),
            "done": pa.array(out["done"], pa.list_(pa.bool_())),
            "action": pa.array(out["action"], pa.list_(pa.int32())),
        }
    )


def rl_schema(table: pa.Table) -> Schema:
    roles = {
        "episode_id": {"role": "episode"},
        "step": {"role": "step"},
        "obs": {"role": "observation"},
        "action": {"role": "action"},
        "reward": {"role": "reward"},
        "done": {"role": "done"},
        "operator": {"classification": "pii"},
    }
    return schema_of(table, {k: v for k, v in roles.items() if k in table.column_names})


# ----------------------------------------------------------------------------------------------- flat


def flat_table(rows: int = 1200) -> pa.Table:
    """Types every format holds: text with newlines, quotes and commas, floats, booleans, UTC times, bytes."""
    texts = []
    for i in range(rows):
        text = f"row {i}: " + "word " * (i % 17)
        if i % 5 == 0:
            text += '\nsecond line, with "quotes", commas'
        if i % 11 == 0:
            text += " 漢字 🦀"
        texts.append(text)
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "text": pa.array(texts, pa.string()),
            "score": pa.array([i / 7 if i % 13 else None for i in range(rows)], pa.float64()),
            "flag": pa.array([i % 3 == 0 for i in range(rows)], pa.bool_()),
            "at": pa.array(
                [1_700_000_000_000_000 + i * 1_000 for i in range(rows)], pa.timestamp("us", "UTC")
            ),
            "blob": pa.array([bytes([i % 256]) * (i % 9) for i in range(rows)], pa.binary()),
        }
    )


def webdataset_table(rows: int = 300) -> pa.Table:
    """A WebDataset-shaped table: ``__key__``, ``txt``, ``json`` (text) and ``png`` (image bytes)."""
    return pa.table(
        {
            "__key__": pa.array([f"sample{i:05d}" for i in range(rows)], pa.string()),
            "txt": pa.array([f"caption {i}" + "\nmore" * (i % 3) for i in range(rows)], pa.string()),
            "json": pa.array(
                [json.dumps({"i": i, "tags": ["a"] * (i % 4)}) for i in range(rows)], pa.string()
            ),
            "png": pa.array([make_png(4 + i % 5, 3 + i % 4, i) for i in range(rows)], pa.binary()),
        }
    )


# ----------------------------------------------------------------------------------------- registering


def _shard_bytes(fmt: str, part: pa.Table, options: dict[str, Any], batch_rows: int) -> bytes:
    buffer = io.BytesIO()
    with get_format(fmt, **options).open_writer(buffer, part.schema) as writer:
        for batch in part.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    return buffer.getvalue()


def write_shards(
    fs: Any,
    root: str,
    table: pa.Table,
    fmt: str,
    *,
    shards: int = 3,
    options: dict[str, Any] | None = None,
    batch_rows: int = 100,
) -> list[tuple[str, int]]:
    """Write ``table`` as ``shards`` files of ``fmt`` under ``root`` on ``fs``, unequal in size; returns
    ``(name, rows)`` of each. Parquet row groups and Arrow batches hold ``batch_rows`` rows."""
    options = dict(options or {})
    if fmt == "parquet":
        options.setdefault("row_group_size", batch_rows)
    extension = get_format(fmt).extensions[0]
    cuts = [round(table.num_rows * k * k / (shards * shards)) for k in range(shards + 1)]
    out = []
    fs.makedirs(root, exist_ok=True)
    for index in range(shards):
        part = table.slice(cuts[index], cuts[index + 1] - cuts[index])
        name = f"part-{index:05d}{extension}"
        with fs.open(f"{root.rstrip('/')}/{name}", "wb") as handle:
            handle.write(_shard_bytes(fmt, part, options, batch_rows))
        out.append((name, part.num_rows))
    return out


def register_table(
    url: str,
    table: pa.Table,
    fmt: str,
    *,
    name: str,
    registry: str,
    schema: Schema | None = None,
    shards: int = 3,
    batch_rows: int = 100,
    storage_options: dict[str, Any] | None = None,
) -> Contract:
    """Write ``table`` under ``url`` (any storage) as shards of ``fmt`` and register it under ``schema``."""
    from dsm.storage import location

    loc = location(url, storage_options)
    write_shards(loc.fs, loc.root, table, fmt, shards=shards, batch_rows=batch_rows)
    contract = dsm.register(
        url,
        name=name,
        format=fmt,
        schema=schema or Schema.from_arrow(table.schema),
        registry=registry,
        storage_options=storage_options,
    )
    return contract


def register_path(
    path: Path, table: pa.Table, fmt: str, *, name: str, registry: str, **kwargs: Any
) -> Contract:
    """:func:`register_table` into a local folder."""
    return register_table(str(path), table, fmt, name=name, registry=registry, **kwargs)
