"""The data policy where data moves: register, convert-format, reshard and cutover; --scan-pii."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.contract import Field, Schema
from dsm.errors import InputError
from tests.conftest import StorageRoot, write_parquet_shards
from tests.cutover_support import FAST, FAST_CLI, sample_schema
from tests.readiness_support import block_public_access, bucket_of, encrypt_bucket
from tests.servers import MotoServer

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def _policy(registry: Path, allowed: list[str], **extra: Any) -> None:
    registry.mkdir(parents=True, exist_ok=True)
    rule = {"allowed_locations": allowed, **extra}
    (registry / "policy.yaml").write_text(json.dumps({"policy": 1, "classifications": {"pii": rule}}))


@pytest.fixture
def pii_data(tmp_path: Path, sample_table: pa.Table) -> tuple[Path, pa.Table]:
    table = sample_table.slice(0, 400)
    write_parquet_shards(tmp_path / "vault" / "web", table, 2)
    return tmp_path / "vault" / "web", table


def test_register_refuses_a_pii_dataset_where_the_policy_forbids_it(
    tmp_path: Path, pii_data: tuple[Path, pa.Table]
) -> None:
    data, table = pii_data
    registry = tmp_path / "registry"
    _policy(registry, [str(tmp_path / "secure") + "/"])
    schema_file = tmp_path / "schema.yaml"
    schema_file.write_text(json.dumps(sample_schema(table).to_dict()))
    out = cli(
        "register", str(data), "--name", "web", "--schema", str(schema_file), "--registry", str(registry)
    )
    assert out.exit_code == 2
    assert "classifications.pii.allowed_locations" in out.stderr and "field(s) text" in " ".join(
        out.stderr.split()
    )
    assert not (registry / "web").exists()  # nothing was written
    # Unclassified data is not restricted; the same folder registers without the tag.
    assert cli("register", str(data), "--name", "plain", "--registry", str(registry)).exit_code == 0


def test_classification_tags_are_carried_to_every_new_version(
    tmp_path: Path, pii_data: tuple[Path, pa.Table]
) -> None:
    data, table = pii_data
    registry = str(tmp_path / "registry")
    dsm.register(str(data), name="web", registry=registry, schema=sample_schema(table))
    again = dsm.register(str(data), name="web", registry=registry)  # no --schema: tags carried
    assert again.version == 2 and again.schema.field("text").classification == "pii"
    partial = Schema(fields=(Field(name="id", type="int64", nullable=False, role="key"),))
    retagged = dsm.register(str(data), name="web", registry=registry, schema=_full(table, partial))
    assert retagged.schema.field("text").classification == "pii" and retagged.schema.field("id").role == "key"
    converted = dsm.convert_format(
        "web@3", str(tmp_path / "vault" / "jsonl"), format="jsonl", registry=registry
    )
    assert converted.contract.schema.field("text").classification == "pii"
    _policy(Path(registry), [str(tmp_path / "secure") + "/"])
    with pytest.raises(InputError, match=r"classifications\.pii\.allowed_locations"):
        dsm.register(str(data), name="web", registry=registry)  # the carried tag is enforced too


def _full(table: pa.Table, annotations: Schema) -> Schema:
    return Schema.from_arrow(table.schema, annotations=annotations)


def test_rewrites_refuse_a_forbidden_destination_before_writing(
    tmp_path: Path, pii_data: tuple[Path, pa.Table]
) -> None:
    data, table = pii_data
    registry = tmp_path / "registry"
    dsm.register(str(data), name="web", registry=str(registry), schema=sample_schema(table))
    _policy(registry, [str(tmp_path / "vault") + "/"])
    for args in (
        ["convert-format", "web", str(tmp_path / "scratch" / "jsonl"), "--format", "jsonl"],
        ["reshard", "web", str(tmp_path / "scratch" / "two"), "--num-shards", "2"],
    ):
        out = cli(*args, "--registry", str(registry))
        assert out.exit_code == 2 and "refused by the data policy" in out.stderr
        assert "classifications.pii.allowed_locations" in out.stderr
    assert not (tmp_path / "scratch").exists()  # not even a folder
    ok = cli(
        "reshard", "web", str(tmp_path / "vault" / "two"), "--num-shards", "2", "--registry", str(registry)
    )
    assert ok.exit_code == 0, ok.output


def test_a_rewrite_to_s3_needs_the_encryption_the_policy_requires(
    tmp_path: Path, pii_data: tuple[Path, pa.Table], s3_storage: StorageRoot, moto_server: MotoServer
) -> None:
    data, table = pii_data
    registry = tmp_path / "registry"
    dsm.register(str(data), name="web", registry=str(registry), schema=sample_schema(table))
    bucket = bucket_of(s3_storage.url)
    _policy(registry, [f"s3://{bucket}/", str(tmp_path)], require_encryption=True, block_public_access=True)
    dest = s3_storage.join("web")
    with pytest.raises(InputError, match=r"classifications\.pii\.require_encryption") as refused:
        dsm.convert_format(
            "web", dest, format="parquet", registry=str(registry), storage_options=s3_storage.options
        )
    assert "and 1 more rule" in str(refused.value)  # public access is not blocked either
    client = moto_server.client()
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0  # the readiness scratch is gone too
    encrypt_bucket(client, bucket)
    block_public_access(client, bucket)
    done = dsm.convert_format(
        "web", dest, format="parquet", registry=str(registry), storage_options=s3_storage.options
    )
    assert done.fingerprint_match


def test_a_cutover_to_a_forbidden_destination_stops_at_plan(
    tmp_path: Path, pii_data: tuple[Path, pa.Table]
) -> None:
    data, table = pii_data
    registry = tmp_path / "registry"
    dsm.register(str(data), name="web", registry=str(registry), schema=sample_schema(table))
    dsm.alias("web", "prod", 1, registry=str(registry))
    _policy(registry, [str(tmp_path / "vault") + "/"])
    forbidden = tmp_path / "public" / "web"
    plan = cli(
        "cutover",
        "plan",
        "web@prod",
        "--to",
        str(forbidden),
        *FAST_CLI[:6],
        "--registry",
        str(registry),
        "--json",
    )
    assert plan.exit_code == 1
    body = json.loads(plan.stdout)
    assert body["ok"] is False and any(
        "classifications.pii.allowed_locations" in p for p in body["compatibility"]["problems"]
    )
    assert body["policy"]["violations"][0]["rule"] == "classifications.pii.allowed_locations"
    started = cli(
        "cutover",
        "start",
        "web@prod",
        "--to",
        str(forbidden),
        "--run",
        *FAST_CLI,
        "--registry",
        str(registry),
    )
    assert started.exit_code == 1 and "classifications.pii.allowed_locations" in " ".join(
        started.stdout.split()
    )
    report = dsm.cutover_status(registry=str(registry))
    assert report.state.phase == "failed" and report.state.stage("plan").status == "failed"
    assert report.state.stage("copy").status == "pending" and not forbidden.exists()
    assert dsm.show("web@prod", registry=str(registry)).version == 1

    assert dsm.rollback_cutover(report.id, registry=str(registry)).state.phase == "rolled_back"
    allowed = tmp_path / "vault" / "web-jsonl"
    ran = dsm.start_cutover(
        "web@prod", to=str(allowed), format="jsonl", run=True, registry=str(registry), **FAST
    )
    assert ran.ok and ran.state.phase == "completed"
    assert dsm.show("web@prod", registry=str(registry)).location == str(allowed)


def test_scan_pii_finds_planted_values_and_prints_none(tmp_path: Path) -> None:
    emails = [f"user{i}@example.org" for i in range(7)]
    cards = ["4111 1111 1111 1111", "5500-0000-0000-0004", "378282246310005"]
    notes = [f"ticket {i}" for i in range(40)]
    notes[3], notes[11] = f"please mail {emails[0]}", f"card {cards[0]} declined"
    table = pa.table(
        {
            "id": list(range(40)),
            "contact": emails + ["none"] * 33,
            "note": notes,
            "billing": cards + ["-"] * 37,
            "owner": ["classified@example.org"] * 40,
        }
    )
    (tmp_path / "chats").mkdir()
    pq.write_table(table.slice(0, 20), tmp_path / "chats" / "part-0.parquet")
    pq.write_table(table.slice(20), tmp_path / "chats" / "part-1.parquet")
    schema = tmp_path / "schema.yaml"
    schema.write_text(
        json.dumps(
            Schema.from_arrow(
                table.schema,
                annotations=Schema(fields=(Field(name="owner", type="string", classification="pii"),)),
            ).to_dict()
        )
    )
    registry = str(tmp_path / "registry")
    out = runner.invoke(
        app,
        [
            "register",
            str(tmp_path / "chats"),
            "--name",
            "chats",
            "--schema",
            str(schema),
            "--scan-pii",
            "--registry",
            registry,
        ],
        terminal_width=200,
    )
    assert out.exit_code == 0, out.output
    text = " ".join((out.stdout + out.stderr).split())  # whatever the console's width
    assert "field contact: 7 of 40 sampled values look like e-mail addresses" in text
    assert "field billing: 3 of 40 sampled values look like payment card numbers (Luhn)" in text
    assert "field note: 1 of 40 sampled values look like e-mail addresses" in text
    assert "field note: 1 of 40 sampled values look like payment card numbers" in text
    assert "owner" not in text  # classified already: not scanned
    contract_text = (Path(registry) / "chats" / "versions" / "1.yaml").read_text()
    for value in [*emails, *cards, "4111", "example.org"]:
        assert value not in text and value not in contract_text
    scan = dsm.show("chats", registry=registry).metadata["pii_scan"]
    assert scan["rows"] == 40 and {(f["field"], f["kind"], f["count"]) for f in scan["findings"]} == {
        ("billing", "card", 3),
        ("contact", "email", 7),
        ("note", "card", 1),
        ("note", "email", 1),
    }
    quiet = runner.invoke(app, ["register", str(tmp_path / "chats"), "--name", "c2", "--registry", registry])
    assert "warning" not in quiet.stdout and "pii_scan" not in dsm.show("c2", registry=registry).metadata
