"""``dsm head``, ``sample``, ``find``, ``episodes``, ``log``, ``audit`` and ``diff --rows`` through the CLI:
every format, local and on S3 (moto), rows equal independent reads; chats, images and RL rendered by role;
masked values never in any output; exit codes; options reaching the library unchanged."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import dsm.commands.diff as diff_command
import dsm.commands.inspect as inspect_command
from dsm.cli.app import app
from dsm.contract import Schema
from dsm.inspect import sample_positions
from tests.conftest import StorageRoot
from tests.inspect_data import (
    CHAT_WRONG_ROLE_ROW,
    EMAILS,
    FLAT_FORMATS,
    NEVER_ENDING_EPISODE,
    chat_schema,
    chat_table,
    flat_table,
    image_schema,
    image_table,
    register_path,
    register_table,
    rl_schema,
    rl_table,
    webdataset_table,
)

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def _options(root: StorageRoot) -> list[str]:
    out = []
    for key, value in root.options.items():
        out += ["--storage-option", f"{key}={value}"]
    return out


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StorageRoot:
    if request.param == "local":
        return StorageRoot(kind="local", url=str(tmp_path / "store"))
    return request.getfixturevalue("s3_storage")  # type: ignore[no-any-return]


@pytest.mark.parametrize("fmt", FLAT_FORMATS)
def test_each_command_on_each_format_shows_the_rows_pyarrow_reads(
    store: StorageRoot, tmp_path: Path, fmt: str
) -> None:
    table = webdataset_table(200) if fmt == "webdataset" else flat_table(900)
    key = "__key__" if fmt == "webdataset" else "id"
    text = "txt" if fmt == "webdataset" else "text"
    registry = str(tmp_path / "registry")
    contract = register_table(
        store.join("data"),
        table,
        fmt,
        name="rows",
        registry=registry,
        shards=3,
        batch_rows=64,
        storage_options=store.options,
    )
    common = ["--registry", registry, "--cache-dir", str(tmp_path / "cache"), *_options(store), "--json"]
    total = table.num_rows

    head = cli("head", "rows", "-n", "6", "--offset", str(total - 4), *common)
    assert head.exit_code == 0, head.output
    rows = json.loads(head.stdout)["rows"]
    assert [r["position"] for r in rows] == list(range(total - 4, total))
    for row in rows:
        assert row["cells"][key]["value"] == table.column(key)[row["position"]].as_py()
        assert row["cells"][text]["value"] == table.column(text)[row["position"]].as_py()

    sample = cli("sample", "rows", "-n", "7", "--seed", "3", "--columns", f"{key},{text}", *common)
    assert sample.exit_code == 0, sample.output
    page = json.loads(sample.stdout)
    assert [r["position"] for r in page["rows"]] == sample_positions(total, 7, 3)
    assert [f["name"] for f in page["fields"]] == [key, text]
    assert all(r["cells"][key]["value"] == table.column(key)[r["position"]].as_py() for r in page["rows"])

    position = int(contract.shards[0].rows or 0) + 65  # the second shard, second piece of 64 rows
    found = cli("find", "rows", "--row", str(position), *common)
    assert found.exit_code == 0, found.output
    place = json.loads(found.stdout)["page"]["rows"][0]["location"]
    assert (place["shard"], place["shard_index"], place["row"]) == (contract.shards[1].path, 1, 65)
    if fmt == "parquet":
        fs = store.fs()
        with fs.open(f"{store.join('data')}/{place['shard']}", "rb") as handle:
            meta = pq.ParquetFile(handle).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert (place["piece_kind"], place["piece"], place["piece_row"]) == ("row_group", 1, 65 - sizes[0])
    wanted = table.column(key)[position].as_py()
    by_key = cli("find", "rows", "--key", f"{key}={wanted}", *common)
    assert by_key.exit_code == 0, by_key.output
    result = json.loads(by_key.stdout)
    assert [r["position"] for r in result["page"]["rows"]] == [position] and result["found"]

    texts = table.column(text).to_pylist()
    texts[position] = texts[position] + " (edited)"
    edited = table.set_column(table.schema.get_field_index(text), text, pa.array(texts, pa.string()))
    options = store.options
    register_table(store.join("data2"), edited, fmt, name="rows", registry=registry, storage_options=options)
    diff = cli("diff", "rows@1", "rows@2", "--rows", "--key", key, "--fail-on-change", *common)
    assert diff.exit_code == 1, diff.output
    body = json.loads(diff.stdout)
    assert (body["changed"], body["added"], body["removed"], body["changed_cells"][text]) == (1, 0, 0, 1)
    assert body["sample_changed"][0]["new"][text]["value"] == texts[position]


def _register(tmp_path: Path, table: pa.Table, schema: Any, name: str, fmt: str = "parquet") -> str:
    registry = str(tmp_path / "registry")
    register_path(tmp_path / name, table, fmt, name=name, registry=registry, schema=schema, shards=2)
    return registry


def test_chat_rows_render_as_threads_in_head_and_find(tmp_path: Path) -> None:
    table = chat_table()
    registry = _register(tmp_path, table, chat_schema(table), "chat")
    text = cli("head", "chat", "-n", "4", "--registry", registry)
    assert text.exit_code == 0, text.output
    assert "system    │ You are a careful assistant." in text.stdout
    assert "! turn 5 has role 'asistant'" in text.stdout
    assert "[system turn]" in text.stdout and "masked: email" in text.stdout
    found = cli("find", "chat", "--key", str(CHAT_WRONG_ROLE_ROW), "--registry", registry, "--json")
    cell = json.loads(found.stdout)["page"]["rows"][0]["cells"]["messages"]
    assert cell["kind"] == "messages" and any("asistant" in a for a in cell["anomalies"])
    assert [t["role"] for t in cell["value"]] == ["system", "user", "assistant", "user", "asistant"]


def test_image_rows_render_by_media_type_in_head_and_find(tmp_path: Path) -> None:
    table = image_table()
    registry = _register(tmp_path, table, image_schema(table), "images")
    text = cli("head", "images", "--registry", registry)
    assert text.exit_code == 0, text.output
    assert "image/png 8x6, " in text.stdout and "image/jpeg 24x16, " in text.stdout
    assert "! all 256 bytes are zero" in text.stdout
    found = json.loads(cli("find", "images", "--row", "3", "--registry", registry, "--json").stdout)
    details = found["page"]["rows"][0]["cells"]["image"]["details"]
    assert (details["media_type"], details["width"], details["height"]) == ("image/jpeg", 40, 8)


def test_rl_rows_report_the_episode_that_never_ends(tmp_path: Path) -> None:
    table = rl_table()
    registry = _register(tmp_path, table, rl_schema(table), "rl")
    first_of_3 = 6 + 5 + 4
    text = cli("head", "rl", "-n", "3", "--offset", str(first_of_3), "--registry", registry)
    assert text.exit_code == 0, text.output
    assert f"episode {NEVER_ENDING_EPISODE}: 7 steps" in text.stdout and "never ends" in text.stdout
    found = json.loads(
        cli("find", "rl", "--row", str(first_of_3 + 6), "--registry", registry, "--json").stdout
    )
    (episode,) = found["page"]["episodes"]
    assert episode["episode"] == NEVER_ENDING_EPISODE and episode["terminal_step"] is None
    assert episode["anomalies"] == ["no terminal step: the episode never ends"]
    report = cli("episodes", "rl", "--registry", registry, "--unmask", "operator", "--json")
    assert report.exit_code == 1  # an anomalous episode is a failed check
    body = json.loads(report.stdout)
    assert body["total"] == 5 and body["anomalous"] == 2 and body["layout"]["layout"] == "rows"
    only = json.loads(cli("episodes", "rl", "--registry", registry, "--anomalies", "--json").stdout)
    assert [e["episode"] for e in only["episodes"]] == [1, 3]


def _outputs_of_every_command(registry: str, extra: list[str]) -> list[Any]:
    leaked_key = EMAILS[4]
    runs = [
        cli("head", "chat", "-n", "12", "--registry", registry, *extra),
        cli("sample", "chat", "-n", "5", "--registry", registry, *extra),
        cli("find", "chat", "--row", "2", "--registry", registry, *extra),
        cli("find", "chat", "--key", f"email={leaked_key}", "--registry", registry, *extra),
        cli("find", "chat", "--key", f"email={leaked_key}x", "--registry", registry, *extra),
        cli("diff", "chat@1", "chat@2", "--rows", "--registry", registry, *extra),
        cli("log", "chat", "--registry", registry),
        cli("audit", "chat", "--registry", registry),
    ]
    return runs


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_classified_values_appear_in_no_output_unless_unmasked_and_audited(
    tmp_path: Path, json_flag: list[str]
) -> None:
    table = chat_table()
    registry = _register(tmp_path, table, chat_schema(table), "chat")
    edited = table.set_column(
        2, "email", pa.array([e.upper() if i == 7 else e for i, e in enumerate(EMAILS[: table.num_rows])])
    )
    register_path(
        tmp_path / "chat2",
        edited,
        "parquet",
        name="chat",
        registry=registry,
        schema=chat_schema(table),
        shards=2,
    )
    runs = _outputs_of_every_command(registry, json_flag)
    assert [r.exit_code for r in runs] == [0, 0, 0, 0, 1, 0, 0, 0]
    raw_values = [*EMAILS, EMAILS[7].upper()]
    for result in runs:
        text = result.stdout + result.stderr
        assert not [v for v in raw_values if v in text], text[:2000]
        assert "secret@" not in text.lower()
    assert json.loads(cli("audit", "chat", "--registry", registry, "--json").stdout)["records"] == []

    shown = cli(
        "head",
        "chat",
        "-n",
        "2",
        "--registry",
        registry,
        "--unmask",
        "email",
        "--reason",
        "ticket 7",
        *json_flag,
    )
    assert shown.exit_code == 0 and EMAILS[0] in shown.stdout and EMAILS[1] in shown.stdout
    records = json.loads(cli("audit", "chat", "--registry", registry, "--json").stdout)["records"]
    assert len(records) == 1
    record = records[0]
    assert (record["dataset"], record["version"], record["fields"], record["command"], record["reason"]) == (
        "chat",
        2,
        ["email"],
        "head",
        "ticket 7",
    )
    assert record["classifications"] == {"email": "pii"} and record["user"] and record["at"].endswith("Z")
    assert "ticket 7" in cli("audit", "chat", "--registry", registry).stdout
    refused = cli("head", "chat", "--registry", registry, "--unmask", "lang")
    assert refused.exit_code == 2 and "has no classification" in refused.stderr


def test_diff_rows_exit_codes_and_rendering(tmp_path: Path) -> None:
    table = flat_table(500)
    registry = str(tmp_path / "registry")
    plain = Schema.from_arrow(table.schema, key=["id"])
    register_path(tmp_path / "a", table, "parquet", name="t", registry=registry, schema=plain, shards=2)
    edited = table.set_column(
        1,
        "text",
        pa.array(
            [t + ("!" if i in (3, 300) else "") for i, t in enumerate(table.column("text").to_pylist())]
        ),
    )
    register_path(
        tmp_path / "b", edited.slice(0, 499), "jsonl", name="t", registry=registry, schema=plain, shards=3
    )
    register_path(tmp_path / "c", table, "csv", name="t", registry=registry, schema=plain, shards=4)
    changed = cli("diff", "t@1", "t@2", "--rows", "--registry", registry)
    assert changed.exit_code == 0, changed.output
    assert "changed" in changed.stdout and "text" in changed.stdout and "rows differ" in changed.stdout
    assert '"row 3: word word word !"' in changed.stdout
    failing = cli("diff", "t@1", "t@2", "--rows", "--fail-on-change", "--registry", registry, "--json")
    assert failing.exit_code == 1
    body = json.loads(failing.stdout)
    assert (body["changed"], body["removed"], body["added"]) == (2, 1, 0)
    assert [r["key"]["id"] for r in body["sample_changed"]] == [3, 300]
    same = cli("diff", "t@1", "t@3", "--rows", "--fail-on-change", "--registry", registry, "--json")
    assert same.exit_code == 0 and json.loads(same.stdout)["differs"] is False
    misuse = cli("diff", "t@1", "t@2", "--fail-on-change", "--registry", registry)
    assert misuse.exit_code == 2 and "add --rows" in misuse.stderr


def test_log_is_a_lineage_tree_newest_first(tmp_path: Path) -> None:
    registry = str(tmp_path / "registry")
    table = flat_table(300)
    register_path(tmp_path / "a", table, "parquet", name="web", registry=registry, shards=2)
    assert (
        cli("reshard", "web@1", str(tmp_path / "b"), "--num-shards", "3", "--registry", registry).exit_code
        == 0
    )
    register_path(tmp_path / "c", table, "jsonl", name="web", registry=registry, shards=1)
    assert cli("alias", "web", "prod", "2", "--registry", registry).exit_code == 0
    body = json.loads(cli("log", "web", "--registry", registry, "--json").stdout)
    order = [(e["version"], e["depth"], e["operation"]) for e in body["entries"]]
    assert order == [(3, 0, "register"), (1, 0, "register"), (2, 1, "reshard")]
    assert body["entries"][2]["aliases"] == ["prod"] and body["entries"][2]["parent"] == "web@1"
    assert body["entries"][2]["parameters"]["num_shards"] == 3
    text = cli("log", "web", "--registry", registry).stdout
    assert "@2 (prod) reshard of web@1" in text and text.index("@3") < text.index("@1") < text.index("@2")
    assert cli("log", "nope", "--registry", registry).exit_code == 2


def test_register_infer_roles_proposes_and_write_roles_writes(tmp_path: Path) -> None:
    registry = str(tmp_path / "registry")
    folder = tmp_path / "rl"
    folder.mkdir()
    pq.write_table(rl_table(), folder / "part-00000.parquet")
    proposed = cli("register", str(folder), "--name", "rl", "--infer-roles", "--registry", registry, "--json")
    assert proposed.exit_code == 0, proposed.output
    body = json.loads(proposed.stdout)
    assert {p["field"]: p["role"] for p in body["proposed_roles"]}["done"] == "done"
    assert all("role" not in f for f in body["contract"]["schema"]["fields"])
    text = cli("register", str(folder), "--name", "rl", "--infer-roles", "--registry", registry)
    assert "proposed role for reward: reward" in text.stdout and "--write-roles" in text.stdout
    written = cli("register", str(folder), "--name", "rl", "--write-roles", "--registry", registry, "--json")
    roles = {f["name"]: f.get("role") for f in json.loads(written.stdout)["schema"]["fields"]}
    assert roles == {
        "episode_id": "episode",
        "step": "step",
        "obs": "observation",
        "action": "action",
        "reward": "reward",
        "done": "done",
        "operator": None,
    }
    report = cli("episodes", "rl", "--registry", registry, "--json")
    assert json.loads(report.stdout)["total"] == 5


def test_exit_codes_of_bad_input(tmp_path: Path) -> None:
    table = flat_table(100)
    registry = _register(tmp_path, table, None, "t")
    assert cli("find", "t", "--row", "100", "--registry", registry).exit_code == 2
    assert cli("find", "t", "--registry", registry).exit_code == 2
    assert cli("find", "t", "--row", "1", "--key", "id=1", "--registry", registry).exit_code == 2
    missing = cli("find", "t", "--key", "id=1000", "--registry", registry)
    assert missing.exit_code == 1 and "no row with id=1000" in missing.stdout
    assert cli("find", "t", "--key", "id=abc", "--registry", registry).exit_code == 2
    assert cli("head", "t", "--columns", "nope", "--registry", registry).exit_code == 2
    assert cli("head", "missing", "--registry", registry).exit_code == 2
    assert cli("episodes", "t", "--registry", registry).exit_code == 2


def test_whole_values_when_piped(tmp_path: Path) -> None:
    long_text = "\n".join(f"line {i}" for i in range(50))
    table = pa.table({"id": [0], "text": [long_text]})
    registry = _register(tmp_path, table, None, "long")
    out = cli("head", "long", "--registry", registry).stdout
    assert "line 49" in out and "more lines" not in out  # CliRunner is not a terminal: values are whole


def test_cli_options_reach_the_library_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, tuple[Any, dict[str, Any]]] = {}

    def fake(name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            calls[name] = (args, kwargs)
            raise SystemExit(0)

        return record

    for name in ("head", "sample", "find", "episodes", "log", "audit"):
        monkeypatch.setattr(inspect_command, name, fake(name))
    monkeypatch.setattr(diff_command, "diff_rows", fake("diff_rows"))
    common = ["--registry", "reg", "--storage-option", "anon=true"]
    runner.invoke(
        app,
        [
            "head",
            "d@2",
            "-n",
            "3",
            "--offset",
            "9",
            "--columns",
            "a,b",
            "--unmask",
            "e",
            "--reason",
            "r",
            "--cache-dir",
            "c",
            *common,
        ],
    )
    assert calls["head"] == (
        ("d@2",),
        {
            "n": 3,
            "offset": 9,
            "columns": ["a", "b"],
            "unmask": ["e"],
            "reason": "r",
            "registry": "reg",
            "storage_options": {"anon": True},
            "cache_dir": "c",
        },
    )
    runner.invoke(app, ["sample", "d", "-n", "4", "--seed", "5", *common])
    assert calls["sample"][1] | {} == {
        "n": 4,
        "seed": 5,
        "columns": None,
        "unmask": (),
        "reason": None,
        "registry": "reg",
        "storage_options": {"anon": True},
        "cache_dir": None,
    }
    runner.invoke(app, ["find", "d", "--key", "id=1", "--key", "day=2", "--all", "--limit", "7", *common])
    kwargs = calls["find"][1]
    assert (kwargs["row"], kwargs["key"], kwargs["all"], kwargs["limit"]) == (
        None,
        ["id=1", "day=2"],
        True,
        7,
    )
    runner.invoke(app, ["episodes", "d", "--anomalies", "--limit", "3", *common])
    assert (calls["episodes"][1]["anomalies_only"], calls["episodes"][1]["limit"]) == (True, 3)
    runner.invoke(app, ["log", "d", *common])
    assert calls["log"] == (("d",), {"registry": "reg", "storage_options": {"anon": True}})
    runner.invoke(
        app,
        [
            "diff",
            "a@1",
            "a@2",
            "--rows",
            "--key",
            "id",
            "--sample",
            "4",
            "--memory-limit",
            "64MB",
            "--workers",
            "2",
            "--workdir",
            "w",
            "--no-fingerprints",
            "--unmask",
            "e",
            *common,
        ],
    )
    args, kwargs = calls["diff_rows"]
    assert args == ("a@1", "a@2")
    assert {
        k: kwargs[k]
        for k in ("key", "sample", "memory_limit", "workers", "workdir", "use_fingerprints", "unmask")
    } == {
        "key": ["id"],
        "sample": 4,
        "memory_limit": "64MB",
        "workers": 2,
        "workdir": "w",
        "use_fingerprints": False,
        "unmask": ["e"],
    }


def test_json_is_one_document_and_nothing_else(tmp_path: Path) -> None:
    table = image_table()
    registry = _register(tmp_path, table, image_schema(table), "images")
    for args in (
        ["head", "images"],
        ["sample", "images", "-n", "3"],
        ["find", "images", "--row", "1"],
        ["log", "images"],
    ):
        result = cli(*args, "--registry", registry, "--json")
        json.load(io.StringIO(result.stdout))
        assert result.stdout.strip().startswith("{") and result.stdout.strip().endswith("}")


def test_a_terminal_shows_long_values_cut_and_says_so(tmp_path: Path) -> None:
    from rich.console import Console

    import dsm
    from dsm.cli.inspect import render_page

    long_text = "\n".join(f"line {i}" for i in range(50))
    table = pa.table({"id": [0], "text": [long_text]})
    registry = _register(tmp_path, table, None, "long")
    page = dsm.head("long", registry=registry)
    screen = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)
    render_page(page, screen, title="rows 0-0")
    shown = screen.file.getvalue()  # type: ignore[attr-defined]
    assert "line 11" in shown and "line 12" not in shown and "... 38 more lines" in shown
