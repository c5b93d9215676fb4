"""A registry for the web viewer's tests (``dsm serve``): chat, images, audio and video, RL steps with frames,
long texts, two versions to diff, a finished cutover, and the raw values of every classified field.

Built once per session (it takes a few seconds) by the ``web`` fixture of ``tests/conftest.py``; the
datasets come from :mod:`tests.inspect_data` where it has them.
"""

from __future__ import annotations

import io
import json
import math
import struct
import subprocess
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

import dsm
from dsm.demo import make_png

from .cutover_support import FAST
from .inspect_data import (
    EMAILS,
    chat_schema,
    chat_table,
    image_schema,
    image_table,
    register_table,
    rl_list_table,
    rl_schema,
    rl_table,
    schema_of,
)

__all__ = ["WebRegistry", "build_web_registry", "make_mp4_header", "make_wav", "read_start_document"]

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
"""A text value that must come out escaped on every page."""


def make_wav(seconds: float = 0.5, rate: int = 8000, tone: float = 440.0) -> bytes:
    """A mono 16-bit PCM WAV of a sine tone (Chromium plays it)."""
    frames = int(seconds * rate)
    samples = b"".join(
        struct.pack("<h", int(12000 * math.sin(2 * math.pi * tone * i / rate))) for i in range(frames)
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)
    return out.getvalue()


def make_mp4_header(payload: int = 6000) -> bytes:
    """An MP4 file's ``ftyp`` box and an ``mdat`` of ``payload`` bytes (a container, no playable track)."""
    ftyp = struct.pack(">I4s4sI", 24, b"ftyp", b"isom", 512) + b"isommp41"
    body = bytes((i * 7) % 256 for i in range(payload))
    return ftyp + struct.pack(">I4s", 8 + len(body), b"mdat") + body


@dataclass
class WebRegistry:
    """The registry of the web tests and what they assert against."""

    root: Path
    registry: str
    secrets: list[str] = field(default_factory=list)
    """Raw values of classified fields: no response may contain one."""
    media: dict[str, bytes] = field(default_factory=dict)
    cutover: str | None = None


def _frames_table() -> pa.Table:
    """Two episodes of steps whose observations are PNG frames (one row per step)."""
    rows: dict[str, list[Any]] = {k: [] for k in ("episode_id", "step", "frame", "action", "reward", "done")}
    for episode, length in enumerate((6, 4)):
        for step in range(length):
            rows["episode_id"].append(episode)
            rows["step"].append(step)
            rows["frame"].append(make_png(12, 9, 10 * step + episode))
            rows["action"].append(step % 3)
            rows["reward"].append(0.5 * step - (1.0 if step == length - 1 else 0.0))
            rows["done"].append(step == length - 1)
    return pa.table(
        {
            "episode_id": pa.array(rows["episode_id"], pa.int64()),
            "step": pa.array(rows["step"], pa.int32()),
            "frame": pa.array(rows["frame"], pa.binary()),
            "action": pa.array(rows["action"], pa.int32()),
            "reward": pa.array(rows["reward"], pa.float64()),
            "done": pa.array(rows["done"], pa.bool_()),
        }
    )


def _docs_table(rows: int = 120) -> pa.Table:
    texts = [f"document {i}: " + "lorem ipsum dolor sit amet " * (i % 7 * 40) for i in range(rows)]
    texts[7] = HOSTILE
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "text": pa.array(texts, pa.string()),
            "meta": pa.array([f'{{"n": {i}, "tags": ["a", "b"]}}' for i in range(rows)], pa.string()),
        }
    )


def _media_table() -> pa.Table:
    count = 4
    return pa.table(
        {
            "__key__": pa.array([f"clip{i:03d}" for i in range(count)], pa.string()),
            "wav": pa.array([make_wav(0.5, tone=300.0 + 100 * i) for i in range(count)], pa.binary()),
            "mp4": pa.array([make_mp4_header(4000 + i) for i in range(count)], pa.binary()),
            "png": pa.array([make_png(16, 12, i) for i in range(count)], pa.binary()),
            "txt": pa.array([f"clip number {i}" for i in range(count)], pa.string()),
        }
    )


def build_web_registry(root: Path) -> WebRegistry:
    """Every dataset of the web tests under ``root`` (a registry at ``root/registry``)."""
    reg = str(root / "registry")
    out = WebRegistry(root=root, registry=reg)

    chats = chat_table(30)
    register_table(
        str(root / "chats-1"), chats, "jsonl", name="chats", registry=reg, schema=chat_schema(chats)
    )
    # Version 2: row 4's language changed, row 9 removed, a row 30 added.
    changed = chats.to_pylist()
    changed[4]["lang"] = "fr"
    del changed[9]
    extra = dict(changed[0], id=30, email=EMAILS[30])
    changed.append(extra)
    chats2 = pa.Table.from_pylist(changed, schema=chats.schema)
    register_table(
        str(root / "chats-2"), chats2, "parquet", name="chats", registry=reg, schema=chat_schema(chats2)
    )
    out.secrets += EMAILS[:31]

    images = image_table(8)
    register_table(
        str(root / "images"), images, "parquet", name="images", registry=reg, schema=image_schema(images)
    )
    out.secrets += images.column("uploader").to_pylist()
    out.media["image-1"] = images.column("image")[1].as_py()
    out.media["image-4"] = images.column("image")[4].as_py()

    steps = rl_table()
    register_table(
        str(root / "rollouts"), steps, "parquet", name="rollouts", registry=reg, schema=rl_schema(steps)
    )
    out.secrets += sorted(set(steps.column("operator").to_pylist()))

    lists = rl_list_table()
    register_table(
        str(root / "rl-lists"), lists, "parquet", name="rl-lists", registry=reg, schema=rl_schema(lists)
    )

    frames = _frames_table()
    roles = {
        "episode_id": {"role": "episode"},
        "step": {"role": "step"},
        "frame": {"role": "observation", "media_type": "image/png"},
        "action": {"role": "action"},
        "reward": {"role": "reward"},
        "done": {"role": "done"},
    }
    register_table(
        str(root / "frames"), frames, "parquet", name="frames", registry=reg, schema=schema_of(frames, roles)
    )

    docs = _docs_table()
    register_table(
        str(root / "docs"),
        docs,
        "parquet",
        name="docs",
        registry=reg,
        schema=schema_of(docs, {"text": {"role": "text"}, "meta": {"role": "json"}}, key=["id"]),
        batch_rows=40,
    )

    media = _media_table()
    media_roles = {
        "wav": {"role": "audio", "media_type": "audio/wav"},
        "mp4": {"role": "video", "media_type": "video/mp4"},
        "png": {"role": "image"},
        "txt": {"role": "text"},
    }
    register_table(
        str(root / "media"),
        media,
        "webdataset",
        name="media",
        registry=reg,
        schema=schema_of(media, media_roles),
        shards=2,
    )
    out.media["wav-1"] = media.column("wav")[1].as_py()
    out.media["mp4-2"] = media.column("mp4")[2].as_py()

    # A dataset and a finished cutover of it (its journal, its shadow bench report).
    moving = image_table(10)
    register_table(
        str(root / "moving-1"), moving, "parquet", name="moving", registry=reg, schema=image_schema(moving)
    )
    dsm.alias("moving", "prod", 1, registry=reg)
    report = dsm.start_cutover(
        "moving@prod", to=str(root / "moving-2"), format="jsonl", run=True, registry=reg, **FAST
    )
    out.cutover = report.id
    out.secrets += moving.column("uploader").to_pylist()
    return out


def read_start_document(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The JSON document ``dsm serve --json`` prints once it listens."""
    assert process.stdout is not None
    text = ""
    for _ in range(100):
        line = process.stdout.readline()
        if not line:
            break
        text += line
        try:
            return dict(json.loads(text))
        except json.JSONDecodeError:
            continue
    raise AssertionError(
        f"no start document from dsm serve: {text!r} {process.stderr.read() if process.stderr else ''}"
    )
