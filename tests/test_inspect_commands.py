"""The inspect commands as library calls (``dsm.head`` is ``dsm head``): results are data, errors are dsm
errors, unmasking is audited."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import dsm
from dsm.errors import DatasetNotFound, InputError
from dsm.inspect import open_rows
from tests.inspect_data import EMAILS, chat_schema, chat_table, register_path, rl_schema, rl_table


@pytest.fixture
def chats(tmp_path: Path) -> str:
    table = chat_table()
    registry = str(tmp_path / "registry")
    register_path(
        tmp_path / "chats", table, "parquet", name="chats", registry=registry, schema=chat_schema(table)
    )
    return registry


def test_head_sample_and_find_return_pages(chats: str) -> None:
    page = dsm.head("chats", n=4, offset=2, columns=["id", "email"], registry=chats)
    assert [r.position for r in page.rows] == [2, 3, 4, 5] and [f.name for f in page.fields] == [
        "id",
        "email",
    ]
    assert page.masked == ("email",) and page.rows[0].cell("email").summary == f"*** ({len(EMAILS[2])} chars)"
    json.dumps(page.to_dict(), allow_nan=False)
    again = dsm.sample("chats", n=5, seed=9, registry=chats)
    assert [r.position for r in again.rows] == [
        r.position for r in dsm.sample("chats", n=5, seed=9, registry=chats).rows
    ]
    found = dsm.find("chats", key={"id": 7}, registry=chats)
    assert found.found and [r.position for r in found.page.rows] == [7] and not found.complete
    by_text = dsm.find("chats", key=["lang=de"], all=True, registry=chats)
    assert [r.position for r in by_text.page.rows] == [0, 3, 6, 9] and by_text.complete
    assert by_text.notes == ("lang is not the contract's key (id)",)
    masked_query = dsm.find("chats", key={"email": EMAILS[3]}, registry=chats)
    assert masked_query.query == {"key": {"email": "***"}} and masked_query.found
    assert EMAILS[3] not in json.dumps(masked_query.to_dict())
    with pytest.raises(InputError, match="exactly one"):
        dsm.find("chats", registry=chats)
    with pytest.raises(DatasetNotFound):
        dsm.head("nope", registry=chats)


def test_unmasking_writes_the_audit_record_first(chats: str) -> None:
    assert dsm.audit("chats", registry=chats).records == ()
    page = dsm.head("chats", n=1, unmask=["email"], reason="support case 12", registry=chats)
    assert page.rows[0].cell("email").value == EMAILS[0] and page.unmasked == ("email",)
    (record,) = dsm.audit("chats", registry=chats).records
    assert (record.fields, record.command, record.reason, record.version) == (
        ("email",),
        "head",
        "support case 12",
        1,
    )
    open_rows("chats@1", registry=chats, unmask=["email"], command="view")
    assert [r.command for r in dsm.audit("chats@1", registry=chats).records] == ["head", "view"]
    with pytest.raises(InputError, match="no such field"):
        dsm.head("chats", unmask=["nope"], registry=chats)


def test_an_audit_log_that_cannot_be_written_unmasks_nothing(tmp_path: Path) -> None:
    table = chat_table()
    registry = tmp_path / "registry"
    register_path(
        tmp_path / "chats", table, "parquet", name="chats", registry=str(registry), schema=chat_schema(table)
    )
    (registry / "chats" / "audit").write_text("a file where the folder should be")
    with pytest.raises(dsm.DsmError):
        dsm.head("chats", unmask=["email"], registry=str(registry))


def test_episodes_and_log(tmp_path: Path) -> None:
    registry = str(tmp_path / "registry")
    table = rl_table()
    register_path(tmp_path / "rl", table, "arrow", name="rl", registry=registry, schema=rl_schema(table))
    report = dsm.episodes("rl", registry=registry)
    assert (report.total, report.anomalous, report.layout.layout) == (5, 2, "rows")
    assert report.by_anomaly == {"no terminal step": 1, "reward is NaN": 1}
    assert len(dsm.episodes("rl", limit=2, registry=registry).episodes) == 2
    with pytest.raises(InputError, match="no field has an RL role"):
        plain = pa.table({"a": [1]})
        register_path(tmp_path / "plain", plain, "parquet", name="plain", registry=registry)
        dsm.episodes("plain", registry=registry)
    lineage = dsm.log("rl", registry=registry)
    assert [e.version for e in lineage.entries] == [1] and lineage.entries[0].operation == "register"
    with pytest.raises(InputError, match="takes a dataset name"):
        dsm.log("rl@1", registry=registry)
