"""Helpers shared by the cutover tests: a small registered dataset with an alias, and fast options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

import dsm
from dsm.contract import Field, Schema
from tests.conftest import write_parquet_shards

FAST: dict[str, Any] = {"measure_seconds": 0.05, "shadow_duration": 0.05, "sample_rows": 200, "retain": 0}
"""Options that keep a cutover's measurements short (tests judge behaviour, never speed)."""

FAST_CLI = ["--measure-seconds", "0.05", "--shadow-duration", "0.05", "--sample-rows", "200", "--retain", "0"]


def sample_schema(table: pa.Table) -> Schema:
    """The sample table's schema with a key and a classification tag (both must survive a cutover)."""
    base = Schema.from_arrow(table.schema)
    fields = tuple(
        Field(
            name=f.name, type=f.type, nullable=f.nullable, classification="pii" if f.name == "text" else None
        )
        for f in base.fields
    )
    return Schema(fields=fields, key=("id",))


def make_dataset(tmp_path: Path, table: pa.Table, *, name: str = "web", shards: int = 4) -> tuple[str, Path]:
    """Register ``table`` as ``shards`` Parquet files, point ``NAME@prod`` at it; (registry, data folder)."""
    data = tmp_path / f"{name}-v1"
    write_parquet_shards(data, table, shards)
    registry = str(tmp_path / "registry")
    dsm.register(str(data), name=name, registry=registry, schema=sample_schema(table))
    dsm.alias(name, "prod", 1, registry=registry)
    return registry, data


def journal_records(registry: str, name: str, cutover_id: str) -> list[dict[str, Any]]:
    folder = Path(registry) / name / "cutovers" / cutover_id / "journal"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def flip_byte(path: Path, offset: int = 100) -> None:
    raw = bytearray(path.read_bytes())
    raw[min(offset, len(raw) - 1)] ^= 0xFF
    path.write_bytes(bytes(raw))
