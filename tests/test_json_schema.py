"""The validators of dsm's JSON Schemas, generated ahead of time (dsm/json_schema): current, used, and
judging every document as fastjsonschema's validator compiled from the schema at run time does."""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsm
from dsm import json_schema
from dsm.contract import Contract

from .conftest import write_parquet_shards

Document = Any
Path_ = tuple[Any, ...]


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory, sample_table) -> dict[str, list[Document]]:  # type: ignore[no-untyped-def]
    """Valid documents of each schema that use most of it: a registered contract (every type of the sample
    table, shard fingerprints, the dataset fingerprint), one with its optional parts, and policies."""
    folder = tmp_path_factory.mktemp("schemas")
    write_parquet_shards(folder / "data", sample_table, 2)
    registry = str(folder / "registry")
    registered = dsm.register(str(folder / "data"), name="web", registry=registry)
    contract = registered.to_dict()
    described = copy.deepcopy(contract)
    described.update(description="rows", owners=["a@example.com"], status="deprecated")
    described["schema"]["key"] = [described["schema"]["fields"][0]["name"]]
    described["schema"]["fields"][1].update(role="text", classification="pii", description="the text")
    rule = {"allowed_locations": ["s3://vault/"], "require_encryption": True, "retention": "7d"}
    policies = [
        {"policy": 1},
        {"policy": 1, "description": "d", "classifications": {"pii": rule, "internal": {}}, "default": rule},
    ]
    for document in (contract, described):
        Contract.from_dict(copy.deepcopy(document))  # valid as they are
    return {"contract": [contract, described], "policy": policies}


def _outcome(check: Callable[[Any], Any], document: Document) -> tuple[Any, ...]:
    """What a validator says of ``document``: the document it returns, or its error's message, path and
    rule."""
    try:
        return ("valid", check(copy.deepcopy(document)))
    except fastjsonschema.JsonSchemaValueException as error:
        return ("invalid", error.message, error.path, error.rule, error.rule_definition)


def _paths(document: Document, at: Path_ = ()) -> Iterator[Path_]:
    yield at
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _paths(value, (*at, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _paths(value, (*at, index))


def _get(document: Document, path: Path_) -> Any:
    for step in path:
        document = document[step]
    return document


VALUES = st.sampled_from(
    [
        None, True, False, 0, 1, -1, 2, 2**70, 1.5, "", "x", "-x", "x y", "int64", "string", "parquet",
        "xxh3-128:00ff", "dsm-rows-v1", "0" * 32, "active", "7d", "s3://vault/", [], [1], ["x"], {},
        {"name": "id", "type": "int64"}, {"path": "p.parquet", "bytes": 1, "rows": 1},
    ]
)  # fmt: skip
"""Values a mutation puts in: of every JSON type, and of the schemas' own words (types, enums, patterns)."""


@st.composite
def mutated(draw: st.DrawFn, documents: list[Document]) -> Document:
    """A valid document changed at one to three places: a value replaced (by one of :data:`VALUES` or by
    another part of the document), a key removed, or a key or item added."""
    document = copy.deepcopy(draw(st.sampled_from(documents)))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(document))
        path = draw(st.sampled_from(paths))
        elsewhere = copy.deepcopy(_get(document, draw(st.sampled_from(paths))))
        value = copy.deepcopy(draw(VALUES | st.just(elsewhere)))  # VALUES' lists and dicts stay as they are
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if not path:
            document = value if action == "replace" else document
            continue
        parent, last = _get(document, path[:-1]), path[-1]
        if action == "replace":
            parent[last] = value
        elif action == "remove":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "name", "rows", "fingerprint", "x-y"]))] = value
        else:
            parent.append(value)
    return document


@pytest.mark.parametrize("name", sorted(json_schema.SCHEMAS))
def test_the_generated_validators_are_the_schemas_now_shipped(name: str) -> None:
    generated = importlib.import_module(f"dsm.json_schema._{name}")
    text = (Path(dsm.__file__).parent / json_schema.SCHEMAS[name]).read_text(encoding="utf-8")
    assert json_schema._digest(text) == generated.SCHEMA_SHA256, (
        f"dsm/{json_schema.SCHEMAS[name]} changed: run `make schemas` and commit dsm/json_schema/_{name}.py"
    )
    assert json_schema.validator(name) is generated.validate
    if generated.VERSION == fastjsonschema.VERSION:  # another fastjsonschema may write other text
        assert Path(generated.__file__).read_text(encoding="utf-8") == json_schema.generated_source(name)


@pytest.mark.parametrize("name", sorted(json_schema.SCHEMAS))
def test_a_generated_validator_of_other_bytes_is_never_used(name: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    generated = importlib.import_module(f"dsm.json_schema._{name}")
    monkeypatch.setattr(generated, "SCHEMA_SHA256", "0" * 64)
    json_schema.validator.cache_clear()
    try:
        compiled = json_schema.validator(name)
        assert compiled is not generated.validate
        with pytest.raises(fastjsonschema.JsonSchemaValueException, match="must be object"):
            compiled([])
    finally:
        json_schema.validator.cache_clear()


@pytest.mark.parametrize("name", sorted(json_schema.SCHEMAS))
def test_generated_and_compiled_validators_judge_every_document_alike(
    name: str, documents: dict[str, list[Document]]
) -> None:
    generated = json_schema.validator(name)
    compiled = fastjsonschema.compile(json_schema.schema(name))
    seen = set()

    @settings(max_examples=300, deadline=None)
    @given(document=mutated(documents[name]))
    def judged_alike(document: Document) -> None:
        said = _outcome(generated, document)
        assert said == _outcome(compiled, document)
        seen.add(said[0])

    for document in documents[name]:
        assert _outcome(generated, document)[0] == "valid"
    judged_alike()
    assert seen == {"valid", "invalid"}  # the mutations reach both answers
