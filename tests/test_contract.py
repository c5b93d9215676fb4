from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dsm.arrow_types import parse_type
from dsm.contract import Contract, Field, Schema, Shard, contract_json_schema
from dsm.errors import ContractError, SchemaError

MINIMAL = """\
dsm: 1
name: web-text
location: /data/web-text
format: parquet
schema:
  fields:
    - {name: id, type: int64, nullable: false}
    - {name: text, type: string, role: text}
    - {name: email, type: string, classification: pii}
  key: [id]
shards:
  - path: part-00000.parquet
    bytes: 100
    rows: 2
    checksum: xxh3-128:00ff
"""


def test_round_trip_yaml_and_dict() -> None:
    contract = Contract.from_yaml(MINIMAL, source="c.yaml")
    assert contract.schema.key == ("id",)
    assert contract.schema.field("email").classification == "pii"
    assert contract.shards[0] == Shard(path="part-00000.parquet", bytes=100, rows=2, checksum="xxh3-128:00ff")
    again = Contract.from_yaml(contract.to_yaml())
    assert again == contract
    assert Contract.from_dict(json.loads(contract.to_json())) == contract


def test_schema_to_arrow_and_back_keeps_annotations() -> None:
    contract = Contract.from_yaml(MINIMAL)
    arrow = contract.schema.to_arrow()
    assert arrow.field("id").nullable is False
    assert arrow.field("text").type == pa.string()
    back = Schema.from_arrow(arrow, annotations=contract.schema)
    assert back == contract.schema


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (MINIMAL.replace("bytes: 100", "bytes: -5"), "(line 13): field shards[0].bytes"),
        (MINIMAL.replace("format: parquet\n", ""), "must contain ['format'"),
        (MINIMAL.replace("checksum: xxh3-128:00ff", "checksum: nope"), "shards[0].checksum"),
        (MINIMAL.replace("key: [id]", "key: [nope]"), "schema.key"),
        (MINIMAL + "surprise: 1\n", "surprise"),
    ],
)
def test_invalid_contracts_name_field_and_line(text: str, message: str) -> None:
    with pytest.raises(ContractError) as info:
        Contract.from_yaml(text, source="c.yaml")
    assert "c.yaml" in str(info.value)
    assert message in str(info.value)


def test_yaml_syntax_error_names_line() -> None:
    with pytest.raises(ContractError, match=r"c\.yaml: YAML syntax error at line 4"):
        Contract.from_yaml("dsm: 1\nname: x\nschema: {fields: [\n", source="c.yaml")


def test_unknown_contract_version_is_refused_saying_which() -> None:
    with pytest.raises(ContractError, match=r"version 2 is not known.*reads version 1"):
        Contract.from_yaml(MINIMAL.replace("dsm: 1", "dsm: 2"))


def test_safe_loader_refuses_python_tags() -> None:
    with pytest.raises(ContractError):
        Contract.from_yaml("!!python/object/apply:os.system ['echo hi']\n")


def test_timestamps_stay_text() -> None:
    text = MINIMAL + "created: 2026-11-30T10:00:00Z\n"
    assert Contract.from_yaml(text).created == "2026-11-30T10:00:00Z"


def test_json_schema_is_a_valid_draft_07_schema() -> None:
    import jsonschema

    jsonschema.Draft7Validator.check_schema(contract_json_schema())


@pytest.mark.parametrize(
    "kind",
    [
        pa.int8(),
        pa.uint64(),
        pa.float16(),
        pa.bool_(),
        pa.large_string(),
        pa.binary(),
        pa.binary(16),
        pa.date32(),
        pa.timestamp("ns", "UTC"),
        pa.timestamp("us", "America/New_York"),
        pa.time32("ms"),
        pa.duration("us"),
        pa.decimal128(10, 2),
        pa.decimal256(40, 5),
        pa.list_(pa.int64()),
        pa.large_list(pa.string()),
        pa.list_(pa.int32(), 4),
        pa.struct([("a", pa.int64()), ("b", pa.list_(pa.struct([("c", pa.string())])))]),
        pa.map_(pa.string(), pa.list_(pa.float64())),
        pa.dictionary(pa.int32(), pa.string()),
        pa.list_(pa.field("item", pa.int64(), nullable=False)),
        pa.null(),
    ],
)
def test_type_names_round_trip(kind: pa.DataType) -> None:
    assert parse_type(str(kind)) == kind


def test_unknown_type_name_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="'int65' is not an Arrow type name"):
        parse_type("int65")


def test_field_defaults_are_not_written() -> None:
    assert Field(name="x", type="int64").to_dict() == {"name": "x", "type": "int64"}
