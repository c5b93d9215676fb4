from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dsm.contract import Contract
from dsm.errors import ContractError, DatasetNotFound, InputError
from dsm.registry import Registry, parse_reference

BASE = "dsm: 1\nname: {name}\nlocation: /d\nformat: parquet\nschema: {{fields: []}}\nshards: []\n"


def contract(name: str = "ds") -> Contract:
    return Contract.from_yaml(BASE.format(name=name))


def test_versions_increase_and_are_never_overwritten(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path))
    first = reg.publish(contract())
    second = reg.publish(contract())
    assert (first.version, second.version) == (1, 2)
    assert reg.versions("ds") == [1, 2]
    assert reg.resolve("ds").version == 2
    assert reg.resolve("ds@1").version == 1
    assert reg.resolve("ds@latest").version == 2
    assert first.created is not None and reg.get("ds", 1).created == first.created


def test_concurrent_publish_gets_distinct_versions(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path))
    barrier = threading.Barrier(8)
    versions: list[int] = []

    def publish() -> None:
        barrier.wait()
        versions.append(Registry(str(tmp_path)).publish(contract()).version or 0)

    threads = [threading.Thread(target=publish) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(versions) == list(range(1, 9))
    assert reg.versions("ds") == list(range(1, 9))


def test_alias_moves_report_previous(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path))
    reg.publish(contract())
    reg.publish(contract())
    assert reg.set_alias("ds", "prod", 1).previous is None
    move = reg.set_alias("ds", "prod", 2)
    assert (move.version, move.previous) == (2, 1)
    assert reg.resolve("ds@prod").version == 2
    assert reg.aliases("ds") == {"prod": 2}


@pytest.mark.parametrize("bad", ["latest", "3", "has space"])
def test_bad_alias_names(tmp_path: Path, bad: str) -> None:
    reg = Registry(str(tmp_path))
    reg.publish(contract())
    with pytest.raises(InputError):
        reg.set_alias("ds", bad, 1)


def test_alias_to_missing_version(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path))
    reg.publish(contract())
    with pytest.raises(DatasetNotFound, match="ds@7 does not exist"):
        reg.set_alias("ds", "prod", 7)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nope", "no dataset named 'nope'"),
        ("ds@9", "ds@9 does not exist"),
        ("ds@staging", "ds has no alias 'staging'"),
        ("missing/contract.yaml", "does not exist"),
    ],
)
def test_unknown_references(tmp_path: Path, ref: str, message: str) -> None:
    reg = Registry(str(tmp_path))
    reg.publish(contract())
    with pytest.raises(DatasetNotFound, match=message):
        reg.resolve(ref)


def test_reference_forms() -> None:
    assert parse_reference("a") == ("a", None)
    assert parse_reference("a@3") == ("a", "3")
    assert parse_reference("a@prod") == ("a", "prod")
    with pytest.raises(InputError):
        parse_reference("a@")


def test_contract_file_reference(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(BASE.format(name="filed"))
    assert Registry(str(tmp_path / "reg")).resolve(str(path)).name == "filed"


def test_memory_registry() -> None:
    reg = Registry("memory://registry-test-unique")
    reg.publish(contract("m"))
    reg.set_alias("m", "prod", 1)
    assert reg.names() == ["m"]
    assert reg.resolve("m@prod").version == 1


def test_corrupt_aliases_file_is_a_contract_error(tmp_path: Path) -> None:
    reg = Registry(str(tmp_path))
    reg.publish(contract())
    (tmp_path / "ds" / "aliases.yaml").write_text("prod: [1\n")
    with pytest.raises(ContractError, match=r"aliases\.yaml"):
        reg.resolve("ds@prod")
