"""What the tests of ``dsm view`` share: registered chat, image, RL and text datasets, and the harness
helpers (wait until the screen shows everything, read the screen as text)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.inspect_data import (
    chat_schema,
    chat_table,
    flat_table,
    image_schema,
    image_table,
    register_path,
    rl_list_table,
    rl_schema,
    rl_table,
    schema_of,
)

pytest.importorskip("textual")


@dataclass(frozen=True)
class Datasets:
    """A registry holding ``chats``, ``images``, ``rollouts``, ``episodes`` (list layout) and ``texts``
    (two versions: @2 changes, adds and removes rows of @1)."""

    registry: str
    cache: str
    root: Path

    def app(self, ref: str, **kwargs: Any) -> Any:
        from dsm.viewers.tui import make_app

        kwargs.setdefault("images", "none")
        return make_app(ref, registry=self.registry, cache_dir=self.cache, **kwargs)


def texts_v2(table: pa.Table) -> pa.Table:
    """``texts@2``: rows 3 and 7 changed, row 5 removed, ids 5000 and 5001 added."""
    rows = table.to_pylist()
    rows[3]["text"] = rows[3]["text"] + " EDITED"
    rows[7]["score"] = 99.5
    del rows[5]
    for new_id in (5000, 5001):
        rows.append(dict(rows[0], id=new_id, text=f"new row {new_id}"))
    return pa.Table.from_pylist(rows, schema=table.schema)


def make_datasets(root: Path) -> Datasets:
    registry = str(root / "registry")
    chats = chat_table()
    register_path(
        root / "chats",
        chats,
        "parquet",
        name="chats",
        registry=registry,
        schema=chat_schema(chats),
        batch_rows=4,
    )
    images = image_table()
    register_path(
        root / "images",
        images,
        "parquet",
        name="images",
        registry=registry,
        schema=image_schema(images),
        shards=2,
        batch_rows=4,
    )
    steps = rl_table()
    register_path(
        root / "rollouts",
        steps,
        "parquet",
        name="rollouts",
        registry=registry,
        schema=rl_schema(steps),
        shards=2,
        batch_rows=8,
    )
    lists = rl_list_table()
    register_path(
        root / "episodes",
        lists,
        "jsonl",
        name="episodes",
        registry=registry,
        schema=rl_schema(lists),
        shards=1,
    )
    texts = flat_table(600)
    schema = schema_of(texts, {"text": {"role": "text"}}, key=["id"])
    register_path(
        root / "texts1", texts, "parquet", name="texts", registry=registry, schema=schema, batch_rows=64
    )
    register_path(
        root / "texts2",
        texts_v2(texts),
        "parquet",
        name="texts",
        registry=registry,
        schema=schema,
        batch_rows=64,
    )
    return Datasets(registry=registry, cache=str(root / "cache"), root=root)


async def settle(pilot: Any, ready: Any = None, rounds: int = 600) -> None:
    """Let the app finish what it started (rows read, pictures drawn, lookups done): poll ``ready`` (the
    screen's own ``screen_ready``) between short pauses. Fails after ``rounds`` polls: a guard against a
    hang, not a time limit on the work."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause(0.02)
        check = ready or getattr(app.screen, "screen_ready", None) or app.screen_ready
        if check():
            await pilot.pause()
            return
    raise AssertionError(f"the screen never finished: {type(app.screen).__name__}")


def screen_text(app: Any) -> str:
    """The characters on screen now, line by line (styles dropped)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())
