"""``dsm footprint``: shared, copied and unreferenced bytes exact; cost as the price table gives by hand."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dsm
import dsm.commands.footprint as footprint_command
from dsm.cli.app import app
from dsm.commands.footprint import footprint, load_storage_classes
from dsm.commands.lifecycle import retire
from dsm.errors import ContractError, DatasetNotFound, InputError
from tests.conftest import StorageRoot, write_parquet_shards
from tests.cutover_support import FAST, sample_schema
from tests.servers import MotoServer

runner = CliRunner()

PRICES = """version: 1
currency: EUR
gb: 1000
stores:
  default: {transfer_out_per_gb: 0, transfer_within_per_gb: 0, write_per_gb: 0, read_requests_per_1000: 0,
            write_requests_per_1000: 0, storage_per_gb_month: 0.25}
  file: {storage_per_gb_month: 0.5}
  s3: {storage_per_gb_month: 0.02}
"""
CLASSES = """version: 1
stores:
  file: {default: local, classes: {local: {copies: 2}}}
"""


@dataclass
class Registry3:
    """web@1 = a/part-0..2 (retired); web@2 = b/, a byte copy of a/part-0..2 (no alias); web@3 = a/part-1..3
    (web@prod). Sizes of every file, to do the sums by hand."""

    root: Path
    registry: str
    size: dict[str, int]


@pytest.fixture
def three(tmp_path: Path, sample_table: pa.Table) -> Registry3:
    registry = str(tmp_path / "registry")
    a, b = tmp_path / "a", tmp_path / "b"
    write_parquet_shards(a, sample_table.slice(0, 800), 4)
    dsm.register(f"{a}/part-0000[0-2].parquet", name="web", registry=registry)
    b.mkdir()
    for i in range(3):
        shutil.copyfile(a / f"part-0000{i}.parquet", b / f"part-0000{i}.parquet")
    dsm.register(str(b), name="web", registry=registry)
    dsm.register(f"{a}/part-0000[1-3].parquet", name="web", registry=registry)
    dsm.alias("web", "prod", 3, registry=registry)
    retire("web@1", registry=registry)
    size = {
        f"{d.name}{i}": (d / f"part-0000{i}.parquet").stat().st_size
        for d in (a, b)
        for i in range(4)
        if (d / f"part-0000{i}.parquet").exists()
    }
    return Registry3(root=tmp_path, registry=registry, size=size)


def test_shared_copied_and_unreferenced_bytes_are_exact(three: Registry3) -> None:
    s = three.size
    (three.root / "prices.yaml").write_text(PRICES)
    (three.root / "classes.yaml").write_text(CLASSES)
    report = footprint(
        registry=three.registry,
        prices=str(three.root / "prices.yaml"),
        storage_classes=str(three.root / "classes.yaml"),
    )
    physical = s["a0"] + s["a1"] + s["a2"] + s["a3"] + s["b0"] + s["b1"] + s["b2"]
    assert report.physical_bytes == physical
    assert report.listed_bytes == (s["a0"] + s["a1"] + s["a2"]) * 2 + s["a1"] + s["a2"] + s["a3"]
    assert report.shared_bytes == s["a1"] + s["a2"]  # one file, two versions (web@1 and web@3)
    assert report.copy_bytes == s["b0"] + s["b1"] + s["b2"]  # b/ holds the same content as a/part-0..2
    assert report.unreferenced_retired_bytes == s["a0"]  # only the retired web@1 lists it
    assert report.unreferenced_unaliased_bytes == s["b0"] + s["b1"] + s["b2"]  # web@2: no alias, not newest
    assert report.unreferenced_bytes == s["a0"] + s["b0"] + s["b1"] + s["b2"]
    assert report.missing_files == 0

    by = {v.ref: v for v in report.versions}
    assert [(r, by[r].live, by[r].status, by[r].aliases) for r in ("web@1", "web@2", "web@3")] == [
        ("web@1", False, "retired", ()),
        ("web@2", False, "active", ()),
        ("web@3", True, "active", ("prod",)),
    ]
    assert by["web@1"].shared_bytes == s["a1"] + s["a2"] and by["web@2"].shared_bytes == 0
    assert by["web@3"].copy_bytes == s["a1"] + s["a2"] and by["web@2"].copy_bytes == by["web@2"].stored_bytes
    for ref, files in (("web@1", ("a0", "a1", "a2")), ("web@3", ("a1", "a2", "a3"))):
        assert by[ref].stored_bytes == by[ref].bytes == sum(s[f] for f in files)
        uncompressed = 0
        for f in files:
            meta = pq.ParquetFile(three.root / f[0] / f"part-0000{f[1]}.parquet").metadata
            uncompressed += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        assert by[ref].logical_bytes == uncompressed and by[ref].logical_source == "parquet metadata"

    # Cost and amplification, by hand from the two tables.
    (cls,) = report.classes
    assert (cls.store, cls.storage_class, cls.files, cls.copies) == ("file", "local", 7, 2.0)
    assert cls.raw_bytes == 2 * physical and report.amplification == 2.0
    assert cls.price_per_gb_month == 0.5 and report.currency == "EUR"
    assert report.monthly_cost == pytest.approx(physical / 1000 * 0.5, rel=1e-12)


def test_built_in_tables_and_missing_files(three: Registry3) -> None:
    (three.root / "b" / "part-00001.parquet").unlink()
    report = footprint(["web"], registry=three.registry)
    (cls,) = report.classes
    assert cls.copies == 1.0 and cls.monthly_cost == 0.0 and report.prices == "built-in"
    assert report.missing_files == 1 and any("not on storage" in n for n in report.notes)
    web2 = next(v for v in report.versions if v.ref == "web@2")
    assert web2.missing == 1 and web2.stored_bytes == three.size["b0"] + three.size["b2"]
    assert report.copy_bytes == three.size["b0"] + three.size["b2"]


def test_storage_classes_on_s3_price_each_class(
    tmp_path: Path, s3_storage: StorageRoot, moto_server: MotoServer, sample_table: pa.Table
) -> None:
    registry = str(tmp_path / "registry")
    local = tmp_path / "local"
    write_parquet_shards(local, sample_table.slice(0, 600), 3)
    client = moto_server.client()
    bucket, _, prefix = s3_storage.url.removeprefix("s3://").partition("/")
    sizes = {}
    for i, path in enumerate(sorted(local.iterdir())):
        extra = {"StorageClass": "STANDARD_IA"} if i == 2 else {}
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.name}", Body=path.read_bytes(), **extra)
        sizes[i] = path.stat().st_size
    dsm.register(s3_storage.url, name="s3web", registry=registry, storage_options=s3_storage.options)
    (tmp_path / "prices.yaml").write_text(PRICES)
    report = footprint(
        registry=registry, prices=str(tmp_path / "prices.yaml"), storage_options=s3_storage.options
    )
    classes = {c.storage_class: c for c in report.classes}
    assert set(classes) == {"STANDARD", "STANDARD_IA"}
    standard, ia = classes["STANDARD"], classes["STANDARD_IA"]
    assert (standard.files, standard.bytes, standard.copies) == (2, sizes[0] + sizes[1], 3.0)
    assert standard.price_per_gb_month == 0.02 and standard.price_source == "price table s3"
    assert (ia.files, ia.bytes, ia.price_per_gb_month) == (1, sizes[2], 0.0125)  # the class's own price
    assert report.monthly_cost == pytest.approx(
        (sizes[0] + sizes[1]) / 1000 * 0.02 + sizes[2] / 1000 * 0.0125
    )
    assert report.raw_bytes == 3 * report.physical_bytes


def test_azure_redundancy_is_its_storage_class(
    tmp_path: Path, azure_storage: StorageRoot, sample_table: pa.Table
) -> None:
    registry = str(tmp_path / "registry")
    write_parquet_shards(azure_storage, sample_table.slice(0, 300), 2)
    dsm.register(azure_storage.url, name="azweb", registry=registry, storage_options=azure_storage.options)
    report = footprint(registry=registry, storage_options=azure_storage.options)
    (cls,) = report.classes
    assert (cls.store, cls.storage_class, cls.copies) == (
        "az",
        "RAGRS",
        6.0,
    )  # Azurite reports Standard_RAGRS
    assert cls.price_per_gb_month == 0.046 and report.raw_bytes == 6 * report.physical_bytes


def test_open_cutover_extra_storage_until_complete(tmp_path: Path, sample_table: pa.Table) -> None:
    table = sample_table.slice(0, 600)
    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "v1", table, 3)
    dsm.register(str(tmp_path / "v1"), name="web", registry=registry, schema=sample_schema(table))
    dsm.alias("web", "prod", 1, registry=registry)
    started = dsm.start_cutover(
        "web@prod", to=str(tmp_path / "jsonl"), format="jsonl", through="copy", registry=registry, **FAST
    )
    assert started.ok and started.state.target_version == 2
    (tmp_path / "prices.yaml").write_text(PRICES)
    report = footprint(registry=registry, prices=str(tmp_path / "prices.yaml"))
    (cut,) = report.cutovers
    target = sum(p.stat().st_size for p in (tmp_path / "jsonl").glob("*.jsonl"))
    assert (cut.id, cut.target, cut.extra_bytes, cut.extra_source) == (
        started.id,
        "web@2",
        target,
        "web@2 stored",
    )
    plan = started.state.stage("plan").evidence["estimate"]["seconds"]
    months = (plan["verify"] + plan["shadow"] + plan["switch"]) / (30 * 86400)  # copy is done; retain 0
    assert cut.months == pytest.approx(months) and cut.complete_after is None
    assert cut.cost_until_complete == pytest.approx(target / 1000 * 0.5 * months)
    jsonl = next(v for v in report.versions if v.ref == "web@2")
    assert jsonl.logical_source is not None and jsonl.logical_source.startswith("Arrow bytes estimated from")
    assert jsonl.logical_bytes is not None and jsonl.logical_bytes > 0


def test_html_report_and_cli(three: Registry3, monkeypatch: pytest.MonkeyPatch) -> None:
    page = three.root / "footprint.html"
    out = runner.invoke(
        app, ["footprint", "--registry", three.registry, "--output", str(page)], terminal_width=200
    )
    assert out.exit_code == 0, out.output
    assert "unreferenced" in out.stdout and "web@3" in out.stdout
    text = page.read_text()
    assert text.count("<svg") == 3 and all(ref in text for ref in ("web@1", "web@2", "web@3"))
    body = json.loads(runner.invoke(app, ["footprint", "web", "--registry", three.registry, "--json"]).stdout)
    assert (
        body["totals"]["unreferenced_bytes"]
        == three.size["a0"] + three.size["b0"] + three.size["b1"] + three.size["b2"]
    )
    assert [v["ref"] for v in body["versions"]] == ["web@1", "web@2", "web@3"]

    seen: dict[str, Any] = {}
    real = footprint_command.footprint

    def spy(names: Any, **kwargs: Any) -> Any:
        seen.update(names=list(names), **kwargs)
        return real(names, **kwargs)

    monkeypatch.setattr(footprint_command, "footprint", spy)
    runner.invoke(app, ["footprint", "web", "--prices", "p.yaml", "--registry", three.registry])
    assert seen["names"] == ["web"] and seen["prices"] == "p.yaml" and seen["storage_classes"] is None


def test_bad_input(three: Registry3) -> None:
    with pytest.raises(DatasetNotFound):
        footprint(["nope"], registry=three.registry)
    with pytest.raises(InputError, match="dataset names"):
        footprint(["web@1"], registry=three.registry)
    bad = three.root / "bad.yaml"
    bad.write_text("version: 1\nstores:\n  s3: {default: X, classes: {STANDARD: {copies: 0}}}\n")
    with pytest.raises(ContractError, match=r"stores.s3.classes.STANDARD.copies"):
        load_storage_classes(str(bad))
    bad.write_text("version: 1\nstores:\n  s3: {default: X, classes: {STANDARD: {copies: 3}}}\n")
    with pytest.raises(ContractError, match=r"stores\.s3\.default"):
        load_storage_classes(str(bad))
    out = runner.invoke(
        app, ["footprint", "--storage-classes", str(three.root / "none.yaml"), "--registry", three.registry]
    )
    assert out.exit_code == 2 and "does not exist" in out.stderr
