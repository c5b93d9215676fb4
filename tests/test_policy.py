"""The data policy: validation, location rules on canonical locations, storage requirements, commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.commands.policy import check_destination, check_location, check_policy, set_policy, show_policy
from dsm.contract import Field, Schema
from dsm.errors import ContractError, InputError
from dsm.policy import Policy, classified_fields, policy_json_schema
from tests.conftest import StorageRoot
from tests.readiness_support import bucket_of, encrypt_bucket
from tests.servers import MotoServer

runner = CliRunner()

PII = Schema(
    fields=(
        Field(name="id", type="int64"),
        Field(name="email", type="string", classification="pii"),
        Field(name="note", type="string", classification="pii"),
        Field(name="team", type="string", classification="internal"),
    )
)


def policy(**rules: Any) -> Policy:
    return Policy.from_dict({"policy": 1, **rules}, source="policy.yaml")


def test_policy_schema_errors_name_the_field() -> None:
    cases = {
        "field policy: expected 1": {"policy": 2},
        "field classifications.pii.require_encryption: must be boolean": {
            "policy": 1,
            "classifications": {"pii": {"require_encryption": "yes"}},
        },
        "field classifications.pii: must not contain {'allowed'}": {
            "policy": 1,
            "classifications": {"pii": {"allowed": ["/x"]}},
        },
        "classifications.pii.allowed_locations[0]: 'data/' is relative": {
            "policy": 1,
            "classifications": {"pii": {"allowed_locations": ["data/"]}},
        },
        "holds a credential": {
            "policy": 1,
            "classifications": {"pii": {"allowed_locations": ["s3://AKIA:secretsecret@bucket/"]}},
        },
        "classifications.pii.retention": {"policy": 1, "classifications": {"pii": {"retention": "soon"}}},
    }
    for message, data in cases.items():
        with pytest.raises(ContractError, match=message.replace("[", r"\[").replace("{", r"\{")):
            Policy.from_dict(data, source="policy.yaml")
    assert policy_json_schema()["properties"]["policy"] == {
        "const": 1,
        "description": "policy format version",
    }


def test_location_rules_compare_canonical_locations(tmp_path: Path) -> None:
    (tmp_path / "secure" / "web").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "secure")
    p = policy(
        classifications={
            "pii": {"allowed_locations": [str(tmp_path / "secure") + "/", "s3://vault/pii"]},
            "internal": {},
        }
    )
    classified = classified_fields(PII)
    assert classified == {"pii": ("email", "note"), "internal": ("team",)}
    assert p.location_violations(classified, str(tmp_path / "secure" / "web")) == []
    assert p.location_violations(classified, str(tmp_path / "link" / "web" / ".")) == []  # a symlink into it
    assert p.location_violations(classified, "s3a://vault/pii/v3/", {"anon": True}) == []
    (bad,) = p.location_violations(classified, str(tmp_path / "secure2"))  # not below /secure
    assert bad.rule == "classifications.pii.allowed_locations" and bad.fields == ("email", "note")
    assert "may be stored only under" in bad.message and str(tmp_path / "secure2") in bad.message
    (other,) = p.location_violations(classified, "s3://vault/pii-old/x", {"anon": True})
    assert other.classification == "pii"


def test_unruled_classifications_are_refused_unless_a_default_rule_exists() -> None:
    strict = policy(classifications={"pii": {}})
    (v,) = strict.location_violations({"secret": ("key",)}, "memory://anywhere")
    assert v.rule == "classifications.secret" and "has no rule" in v.message
    lenient = policy(classifications={"pii": {}}, default={"allowed_locations": ["memory://ok"]})
    assert lenient.location_violations({"secret": ("key",)}, "memory://ok/x") == []
    (nowhere,) = policy(default={"allowed_locations": []}).location_violations({"x": ("f",)}, "memory://ok")
    assert nowhere.rule == "default.allowed_locations" and "only under nowhere" in nowhere.message
    assert policy().location_violations({}, "memory://ok") == []  # unclassified data is not restricted


def test_storage_requirements_and_retention() -> None:
    p = policy(
        classifications={
            "pii": {"require_encryption": True, "block_public_access": True, "retention": "30d"},
            "internal": {"retention": "90d"},
        }
    )
    classified = classified_fields(PII)
    assert p.storage_requirements(classified) == {
        "encryption": ["classifications.pii.require_encryption"],
        "public-access": ["classifications.pii.block_public_access"],
    }
    assert p.retention_for(classified) == (90 * 86400, "classifications.internal.retention")
    assert Policy.from_yaml(p.to_yaml()).to_dict() == p.to_dict()


segment = st.text(alphabet="abcdef0123_-", min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(prefix=st.lists(segment, min_size=1, max_size=3), child=st.lists(segment, max_size=3), tail=segment)
def test_allowed_prefixes_hold_on_path_boundaries(prefix: list[str], child: list[str], tail: str) -> None:
    base = "memory://policy/" + "/".join(prefix)
    p = policy(classifications={"pii": {"allowed_locations": [base + "/"]}})
    inside = "/".join([base, *child]) + ("/" if child else "")
    assert p.location_violations({"pii": ("f",)}, inside) == []
    assert len(p.location_violations({"pii": ("f",)}, base + tail)) == 1  # same string prefix, other folder


def _registry(tmp_path: Path, text: str) -> str:
    registry = tmp_path / "registry"
    registry.mkdir(exist_ok=True)
    (registry / "policy.yaml").write_text(text)
    return str(registry)


def test_check_location_asks_the_store(tmp_path: Path) -> None:
    registry = _registry(
        tmp_path,
        "policy: 1\nclassifications:\n  pii: {require_encryption: true, block_public_access: true}\n"
        "  internal: {}\n",
    )
    verdict = check_location(PII, "memory://policy-mem/data", registry=registry)
    assert not verdict.ok and [v.rule for v in verdict.violations] == [
        "classifications.pii.require_encryption"
    ]
    assert verdict.answers["public-access"]["status"] == "pass"  # memory:// is not reachable from outside
    assert "answers encryption unknown" in verdict.violations[0].message
    unclassified = Schema(fields=(Field(name="id", type="int64"),))
    assert check_location(unclassified, "memory://policy-mem/data", registry=registry).ok


def test_check_destination_runs_only_the_checks_the_rules_need(
    tmp_path: Path, s3_storage: StorageRoot, moto_server: MotoServer
) -> None:
    registry = _registry(
        tmp_path, "policy: 1\nclassifications:\n  pii: {require_encryption: true}\n  internal: {}\n"
    )
    verdict = check_destination(PII, s3_storage.url, registry=registry, storage_options=s3_storage.options)
    (violation,) = verdict.violations
    assert violation.rule == "classifications.pii.require_encryption"
    assert "answers encryption fail" in violation.message
    assert set(verdict.answers) == {"write", "delete", "encryption"}  # not the whole readiness report
    bucket = bucket_of(s3_storage.url)
    client = moto_server.client()
    encrypt_bucket(client, bucket, "aws:kms")
    assert check_destination(PII, s3_storage.url, registry=registry, storage_options=s3_storage.options).ok
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0  # the scratch object is gone


def test_set_show_and_check_policy(tmp_path: Path, sample_table: Any) -> None:
    from tests.conftest import write_parquet_shards
    from tests.cutover_support import sample_schema

    registry = str(tmp_path / "registry")
    write_parquet_shards(tmp_path / "open", sample_table.slice(0, 100), 1)
    dsm.register(str(tmp_path / "open"), name="web", registry=registry, schema=sample_schema(sample_table))
    assert show_policy(registry=registry) is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: 1\nclassifications: {pii: {retention: forever}}\n")
    with pytest.raises(ContractError, match="retention"):
        set_policy(str(bad), registry=registry)
    assert not (tmp_path / "registry" / "policy.yaml").exists()  # nothing written
    good = tmp_path / "policy.yaml"
    good.write_text(f"policy: 1\nclassifications:\n  pii:\n    allowed_locations: [{tmp_path / 'vault'}/]\n")
    change = set_policy(str(good), registry=registry)
    assert (
        change.replaced is False and (tmp_path / "registry" / "policy.yaml").read_text() == good.read_text()
    )
    assert show_policy(registry=registry) is not None

    audit = check_policy(registry=registry)
    (only,) = audit.checks.values()
    assert not audit.ok and only.violations[0].rule == "classifications.pii.allowed_locations"
    out = runner.invoke(app, ["policy", "check", "--registry", registry, "--json"])
    assert out.exit_code == 1 and json.loads(out.stdout)["versions"]["web@1"]["ok"] is False
    table = runner.invoke(app, ["policy", "check", "--registry", registry], terminal_width=200)
    assert "violates" in table.stdout
    shown = runner.invoke(app, ["policy", "show", "--registry", registry], terminal_width=200)
    assert shown.exit_code == 0 and "allowed_locations" in shown.stdout
    replaced = runner.invoke(app, ["policy", "set", str(good), "--registry", registry])
    assert replaced.exit_code == 0 and "replaced" in replaced.stdout
    with pytest.raises(InputError, match=r"no policy\.yaml"):
        check_policy(registry=str(tmp_path / "empty"))
