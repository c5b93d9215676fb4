"""Versions mean what users expect: each rule through the library and the CLI.

- ``NAME`` alone is the newest version that is not retired;
- re-registering the newest version's shards returns it (and says so) instead of a new version;
- a schema ``dsm diff`` calls breaking under an existing name is refused (exit 2, the breaking changes
  named) unless ``--allow-breaking``;
- a version file whose body disagrees with its path (name, version) is refused;
- opening a deprecated version warns.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

import dsm
from dsm.cli.app import app
from dsm.commands.register import AlreadyRegisteredWarning
from dsm.errors import ContractError, SchemaError
from dsm.registry import DeprecatedVersionWarning, Registry
from tests.conftest import write_parquet_shards

runner = CliRunner()


@pytest.fixture
def registered(tmp_path: Path, sample_table: pa.Table) -> tuple[Path, str]:
    data = tmp_path / "data"
    write_parquet_shards(data, sample_table.slice(0, 400), 2)
    registry = str(tmp_path / "registry")
    assert dsm.register(str(data), name="web", registry=registry).version == 1
    return data, registry


def test_name_alone_is_the_newest_version_not_retired(
    registered: tuple[Path, str], tmp_path: Path, sample_table: pa.Table
) -> None:
    _, registry = registered
    other = tmp_path / "other"
    write_parquet_shards(other, sample_table.slice(400, 200), 1)
    assert dsm.register(str(other), name="web", registry=registry).version == 2
    assert dsm.show("web", registry=registry).version == 2
    Registry(registry).set_status("web", 2, "retired", reason="data deleted")
    assert dsm.show("web", registry=registry).version == 1
    shown = runner.invoke(app, ["show", "web", "--registry", registry, "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["version"] == 1


def test_registering_the_same_shards_again_returns_the_existing_version(registered: tuple[Path, str]) -> None:
    data, registry = registered
    with pytest.warns(AlreadyRegisteredWarning, match="web@1 already holds exactly these shards"):
        again = dsm.register(str(data), name="web", registry=registry)
    assert again.version == 1 and Registry(registry).versions("web") == [1]
    ran = runner.invoke(app, ["register", str(data), "--name", "web", "--registry", registry])
    assert ran.exit_code == 0 and "web@1 already holds exactly these shards" in ran.stdout
    assert "nothing new was registered" in ran.stdout and Registry(registry).versions("web") == [1]
    # A changed description is something new: a new version says it.
    described = dsm.register(str(data), name="web", registry=registry, description="now described")
    assert described.version == 2 and described.description == "now described"
    # Changed bytes are new too.
    shard = data / "part-00001.parquet"
    table = pq.read_table(shard)
    pq.write_table(table, shard, compression="gzip")
    assert dsm.register(str(data), name="web", registry=registry, description="now described").version == 3


def test_a_breaking_schema_under_an_existing_name_is_refused_unless_allowed(
    registered: tuple[Path, str], tmp_path: Path
) -> None:
    data, registry = registered
    narrow = tmp_path / "narrow"
    narrow.mkdir()
    table = pq.read_table(data / "part-00000.parquet")
    pq.write_table(
        table.drop_columns(["score"]).cast(table.drop_columns(["score"]).schema), narrow / "p.parquet"
    )
    with pytest.raises(SchemaError, match="breaking for readers of web@1: score: removed") as caught:
        dsm.register(str(narrow), name="web", registry=registry)
    assert caught.value.field == "score"
    ran = runner.invoke(app, ["register", str(narrow), "--name", "web", "--registry", registry, "--json"])
    error = json.loads(ran.stdout)["error"]
    assert ran.exit_code == 2 and error["type"] == "SchemaError" and error["field"] == "score"
    assert "--allow-breaking" in error["message"] and Registry(registry).versions("web") == [1]
    allowed = runner.invoke(
        app, ["register", str(narrow), "--name", "web", "--registry", registry, "--allow-breaking"]
    )
    assert allowed.exit_code == 0 and Registry(registry).versions("web") == [1, 2]
    # A compatible change (a field added) needs no flag.
    wider = tmp_path / "wider"
    wider.mkdir()
    grown = pq.read_table(narrow / "p.parquet")
    pq.write_table(grown.append_column("extra", pa.array(["x"] * grown.num_rows)), wider / "p.parquet")
    assert dsm.register(str(wider), name="web", registry=registry).version == 3


@pytest.mark.parametrize("field, value", [("name", "other"), ("version", 7)])
def test_a_version_file_that_disagrees_with_its_path_is_refused(
    registered: tuple[Path, str], field: str, value: object
) -> None:
    _, registry = registered
    path = Path(registry) / "web" / "versions" / "1.yaml"
    body = yaml.safe_load(path.read_text())
    body[field] = value
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    with pytest.raises(ContractError, match=r"its path web@1") as caught:
        dsm.show("web@1", registry=registry)
    assert caught.value.path == str(path)
    ran = runner.invoke(app, ["verify", "web@1", "--registry", registry, "--json"])
    assert ran.exit_code == 2 and json.loads(ran.stdout)["error"]["path"] == str(path)


def test_opening_a_deprecated_version_warns(registered: tuple[Path, str]) -> None:
    _, registry = registered
    Registry(registry).set_status("web", 1, "deprecated", reason="superseded by the dedup run")
    with pytest.warns(DeprecatedVersionWarning, match="web@1 is deprecated .superseded by the dedup run"):
        dsm.show("web@1", registry=registry)
    with pytest.warns(DeprecatedVersionWarning):
        dataset = dsm.open("web@1", registry=registry)
    assert dataset is not None
    ran = runner.invoke(app, ["verify", "web@1", "--registry", registry])
    assert ran.exit_code == 0
    warned = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(warned) == 1 and warned[0].startswith("warning: web@1 is deprecated"), ran.stderr
    # Listing is not opening: ls shows the status and warns about nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dsm.ls(registry=registry)
