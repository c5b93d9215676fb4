"""``dsm serve`` through Starlette's TestClient: every page and its JSON twin (values equal the inspect
layer's and the commands'), bad references, paging bounds, Range requests, the token, the Host and
cross-site checks, path traversal, read-only methods and masking; and the CLI around it."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

import dsm
from dsm.commands.catalog import ls
from dsm.commands.cutover import list_cutovers
from dsm.commands.inspect import log
from dsm.inspect import open_rows
from dsm.inspect.rowdiff import compare_rows
from dsm.registry import Registry
from dsm.viewers.web.app import create_app
from dsm.viewers.web.config import serve_config
from dsm.viewers.web.ranges import RangeNotSatisfiable, byte_range

from .web_data import HOSTILE, WebRegistry, read_start_document

TOKEN = "test-token-0123456789abcdef"


def _client(web: WebRegistry, **options: Any) -> Iterator[TestClient]:
    options.setdefault("allowed_hosts", ["testserver"])
    app = create_app(serve_config(registry=web.registry, cache_dir=str(web.root / "cache"), **options))
    with TestClient(app, follow_redirects=False) as client:
        yield client


@pytest.fixture(scope="module")
def client(web: WebRegistry) -> Iterator[TestClient]:
    yield from _client(web)


def _json(client: TestClient, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


def _html(client: TestClient, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def _wait_job(client: TestClient, url: str) -> Any:
    for _ in range(600):
        response = client.get(url)
        if response.status_code != 202:
            assert response.status_code == 200, response.text[:500]
            return response.json()
        time.sleep(0.05)
    raise AssertionError(f"{url} did not finish")


PAGES = [
    "/",
    "/d/chats",
    "/d/chats@1",
    "/d/chats@2",
    "/d/chats@latest",
    "/d/moving@prod",
    "/d/chats@1/rows",
    "/d/chats@1/rows?offset=20&length=5",
    "/d/chats@1/row/3",
    "/d/images@1/rows",
    "/d/images@1/row/1",
    "/d/media@1/rows",
    "/d/media@1/row/1",
    "/d/docs@1/rows?offset=0&length=100",
    "/d/docs@1/row/7",
    "/d/rollouts@1/rows",
    "/d/rollouts@1/episodes",
    "/d/rollouts@1/episodes?anomalies=1",
    "/d/rollouts@1/episode?id=3",
    "/d/rl-lists@1/episode?id=1",
    "/d/frames@1/episode?id=0",
    "/cutovers",
    "/bench",
]


@pytest.mark.parametrize("url", PAGES)
def test_every_page_and_its_json_twin(client: TestClient, url: str) -> None:
    html = _html(client, url)
    assert "<main>" in html and "Traceback" not in html
    path, _, query = url.partition("?")
    twin = ("/index" if path == "/" else path) + ".json" + (f"?{query}" if query else "")
    data = _json(client, twin)
    assert isinstance(data, dict) and data
    assert f'href="{twin.replace("&", "&amp;")}"' in html  # each page links its twin


def test_registry_and_dataset_pages_equal_the_commands(web: WebRegistry, client: TestClient) -> None:
    data = _json(client, "/index.json")
    expected = [e.to_dict() for e in ls(registry=web.registry)]
    assert [d["name"] for d in data["datasets"]] == [e["name"] for e in expected]
    assert [d["versions"] for d in data["datasets"]] == [e["versions"] for e in expected]
    lineage = log("chats", registry=web.registry).to_dict()
    page = _json(client, "/d/chats.json")
    assert [v["version"] for v in page["versions"]] == [e["version"] for e in lineage["entries"]] == [2, 1]
    html = _html(client, "/d/chats")
    assert "<svg" in html and 'href="/d/chats@2"' in html and 'href="/d/chats@1"' in html


def test_version_page_holds_the_contract_schema_and_shards(web: WebRegistry, client: TestClient) -> None:
    contract = Registry(web.registry).get("chats", 1)
    data = _json(client, "/d/chats@1.json")
    assert data["contract"]["shards"] == contract.to_dict()["shards"]
    assert data["contract"]["fingerprint"] == contract.to_dict()["fingerprint"]
    fields = {f["name"]: f for f in data["fields"]}
    assert fields["email"]["classification"] == "pii" and fields["email"]["masked"]
    assert fields["messages"]["role"] == "messages" and fields["id"]["key"]
    assert [s["first_position"] for s in data["shards"]["items"]] == [0, 3, 13]
    via_alias = _json(client, "/d/moving@prod.json")
    assert via_alias["ref"] == "moving@2" and via_alias["requested"] == "moving@prod"
    assert via_alias["cutover_verifies"] and via_alias["cutover_verifies"][0]["verify"]["ok"]


def test_verify_runs_on_request_and_the_version_page_shows_it(web: WebRegistry, client: TestClient) -> None:
    report = _wait_job(client, "/d/images@1/verify.json?deep=1")
    assert report["job"]["state"] == "done" and report["report"]["ok"] and report["deep"]
    assert (
        report["report"]["shards"]
        == dsm.verify("images@1", deep=True, registry=web.registry).to_dict()["shards"]
    )
    version = _json(client, "/d/images@1.json")
    assert version["verify"]["report"]["ok"] and version["verify"]["deep"]
    assert "OK" in _html(client, "/d/images@1") and "deep verify run by this server" in _html(
        client, "/d/images@1"
    )


def test_rows_page_equals_the_row_source_with_long_cells_cut(web: WebRegistry, client: TestClient) -> None:
    source = open_rows("docs@1", registry=web.registry, cache_dir=str(web.root / "cache"))
    data = _json(client, "/d/docs@1/rows.json?offset=10&length=30")
    expected = source.read(10, 30).to_dict()
    assert data["total_rows"] == expected["total_rows"] == 120
    assert [r["position"] for r in data["rows"]] == list(range(10, 40))
    assert [r["location"] for r in data["rows"]] == [r["location"] for r in expected["rows"]]
    cut = 0
    for got, want in zip(data["rows"], expected["rows"], strict=True):
        for name, cell in got["cells"].items():
            whole = want["cells"][name]
            if "truncated" in cell:
                cut += 1
                assert whole["value"].startswith(cell["value"]) and cell["truncated"]["chars"] == len(
                    whole["value"]
                )
                assert {k: v for k, v in cell.items() if k not in ("value", "truncated")} == {
                    k: v for k, v in whole.items() if k != "value"
                }
            else:
                assert cell == whole
    assert cut > 10
    assert data["paging"] == {
        "offset": 10,
        "length": 30,
        "shown": 30,
        "total": 120,
        "first": "/d/docs@1/rows?offset=0&length=30",
        "previous": "/d/docs@1/rows?offset=0&length=30",
        "next": "/d/docs@1/rows?offset=40&length=30",
        "last": "/d/docs@1/rows?offset=90&length=30",
    }
    html = _html(client, "/d/docs@1/rows?offset=10&length=30")
    assert "more chars" in html  # the cut is said


def test_row_page_is_the_whole_row_with_where_it_lives(web: WebRegistry, client: TestClient) -> None:
    source = open_rows("chats@1", registry=web.registry, cache_dir=str(web.root / "cache"))
    data = _json(client, "/d/chats@1/row/3.json")
    expected = source.take([3]).to_dict()
    assert data["rows"] == expected["rows"] and data["fields"] == expected["fields"]
    assert data["where"] == source.locate(3).describe()
    assert (
        data["links"]["permalink"] == "/d/chats@1/row/3"
        and data["links"]["key"] == "/d/chats@1/find?key=id%3D3"
    )
    html = _html(client, "/d/chats@1/row/3")
    assert "asistant" in html and "not one of system" in html  # the anomaly of row 3
    long_text = _json(client, "/d/docs@1/row/6.json")
    assert "truncated" not in long_text["rows"][0]["cells"]["text"]  # a row's page is whole
    assert long_text["rows"][0]["cells"]["text"]["value"] == source_text(web, 6)


def source_text(web: WebRegistry, position: int) -> str:
    page = open_rows("docs@1", registry=web.registry, cache_dir=str(web.root / "cache")).take([position])
    return str(page.rows[0].cell("text").value)


def test_find_by_key_and_by_row_redirects_to_the_row(client: TestClient) -> None:
    response = client.get("/d/chats@1/find?key=id=12")
    assert response.status_code == 303 and response.headers["location"] == "/d/chats@1/row/12"
    found = _json(client, "/d/chats@1/find.json?key=12")
    assert found["positions"] == [12] and found["links"] == ["/d/chats@1/row/12"]
    assert client.get("/d/chats@2/find?row=5").headers["location"] == "/d/chats@2/row/5"
    missing = _json(client, "/d/chats@1/find.json?key=id=999", 404)
    assert "no row with id=999" in missing["error"]["message"]
    every = _json(client, "/d/chats@1/find.json?key=lang=de&all=1")
    assert every["positions"] == [i for i in range(30) if i % 3 == 0]


def test_episode_pages_equal_the_layer(web: WebRegistry, client: TestClient) -> None:
    source = open_rows("rollouts@1", registry=web.registry, cache_dir=str(web.root / "cache"))
    listed = _json(client, "/d/rollouts@1/episodes.json")
    assert [{k: v for k, v in e.items() if k != "link"} for e in listed["episodes"]] == [
        e.to_dict() for e in source.episodes()
    ]
    assert listed["anomalous"] == 2
    anomalous = _json(client, "/d/rollouts@1/episodes.json?anomalies=1")
    assert [e["episode"] for e in anomalous["episodes"]] == [1, 3]
    episode = _json(client, "/d/rollouts@1/episode.json?id=3")
    assert episode["episode"]["terminal_step"] is None and len(episode["steps"]) == 7
    assert [s["position"] for s in episode["steps"]] == list(range(15, 22))
    assert [s["reward"] for s in episode["steps"]] == pytest.approx([1.0 + s / 10 for s in range(7)])
    nan = _json(client, "/d/rollouts@1/episode.json?id=1")
    assert nan["steps"][2]["reward"] == "NaN"
    frames = _json(client, "/d/frames@1/episode.json?id=0")
    assert frames["episode"]["terminal_step"] == 5
    assert frames["steps"][2]["observation"]["media"] == "/d/frames@1/media?row=2&field=frame"
    assert frames["steps"][2]["observation"]["media_kind"] == "image"
    listed_layout = _json(client, "/d/rl-lists@1/episode.json?id=0")
    assert listed_layout["layout"]["layout"] == "list" and len(listed_layout["steps"]) == 6
    html = _html(client, "/d/frames@1/episode?id=0")
    assert 'id="slider"' in html and 'class="terminal"' in html and "<polyline" in html
    assert _json(client, "/d/chats@1/episodes.json", 404)["error"]["message"].startswith("chats@1 has no RL")
    assert _json(client, "/d/rollouts@1/episode.json?id=77", 404)["error"]["kind"] == "DatasetNotFound"


def test_diff_runs_once_then_pages_through_the_differences(web: WebRegistry, client: TestClient) -> None:
    first = client.get("/d/chats@1/diff/chats@2.json")
    assert first.status_code in (200, 202)
    data = _wait_job(client, "/d/chats@1/diff/chats@2.json")
    old = open_rows("chats@1", registry=web.registry, cache_dir=str(web.root / "cache"))
    new = open_rows("chats@2", registry=web.registry, cache_dir=str(web.root / "cache"))
    with compare_rows(old, new) as run:
        expected = run.summary.to_dict()
        changed_page = run.page("changed", 0, 20).to_dict()
    assert {k: data["summary"][k] for k in ("added", "removed", "changed", "unchanged", "changed_cells")} == {
        k: expected[k] for k in ("added", "removed", "changed", "unchanged", "changed_cells")
    }
    assert (data["summary"]["added"], data["summary"]["removed"], data["summary"]["changed"]) == (1, 1, 1)
    assert [r["key"] for r in data["page"]["rows"]] == [r["key"] for r in changed_page["rows"]] == [{"id": 4}]
    assert data["page"]["rows"][0]["columns"] == ["lang"]
    removed = _json(client, "/d/chats@1/diff/chats@2.json?kind=removed")
    assert [r["key"] for r in removed["page"]["rows"]] == [{"id": 9}]
    html = _html(client, "/d/chats@1/diff/chats@2")
    assert "1 changed" in html and 'class="changed"' in html
    assert client.get("/d/chats@1/diff/chats@2.json?kind=bogus").status_code == 400
    assert client.get("/d/chats@1/diff/chats@2.json?length=101").status_code == 400


def test_cutover_pages_and_the_shadow_bench_report(web: WebRegistry, client: TestClient) -> None:
    listed = _json(client, "/cutovers.json")
    expected = [r.to_dict() for r in list_cutovers(registry=web.registry)]
    assert [c["id"] for c in listed["cutovers"]] == [r["id"] for r in reversed(expected)] == [web.cutover]
    one = _json(client, f"/cutovers/{web.cutover}.json")
    assert one["phase"] == "completed" and [s["status"] for s in one["state"]["stages"]] == ["done"] * 6
    assert one["links"]["bench"] == f"/cutovers/{web.cutover}/bench"
    html = _html(client, f"/cutovers/{web.cutover}")
    assert "Plan beside actual" in html and "shadow" in html
    report = client.get(f"/cutovers/{web.cutover}/bench")
    assert report.status_code == 200 and "<svg" in report.text
    assert "sandbox" in report.headers["content-security-policy"]
    assert client.get("/cutovers/nope-123.json").status_code == 404
    assert client.get("/cutovers/..%2Fmoving.json").status_code in (400, 404)


def test_bench_reports_folder_lists_and_serves_only_its_reports(web: WebRegistry, tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "run-1.html").write_text("<html><body><svg></svg>report one</body></html>")
    (folder / "notes.txt").write_text("not a report")
    (tmp_path / "outside.html").write_text("outside the folder")
    for client in _client(web, bench_reports=str(folder)):
        listed = _json(client, "/bench.json")
        assert [r["name"] for r in listed["reports"]] == ["run-1.html"]
        assert "report one" in client.get("/bench/run-1.html").text
        for bad in ("/bench/notes.txt", "/bench/..%2Foutside.html", "/bench/%2E%2E%2Foutside.html"):
            assert client.get(bad).status_code == 404, bad


def test_bad_references_are_404_with_a_message(client: TestClient) -> None:
    for url, words in [
        ("/d/nope.json", "no dataset named 'nope'"),
        ("/d/chats@99.json", "chats has no version 99"),
        ("/d/chats@staging.json", "chats has no alias 'staging'"),
        ("/d/chats@1/row/30.json", "chats@1 has no row 30"),
        ("/d/chats@1/row/x1.json", "is not a row number"),
        ("/d/chats@1/nothing-here.json", "no page at"),
        ("/d/-bad@1/rows.json", "is not a dataset reference"),
    ]:
        data = _json(client, url, 404)
        assert words in data["error"]["message"], (url, data)
    assert "no dataset named" in _html(client, "/d/nope", 404)


def test_paging_bounds(client: TestClient) -> None:
    assert len(_json(client, "/d/docs@1/rows.json?length=100")["rows"]) == 100
    assert _json(client, "/d/docs@1/rows.json?offset=120")["rows"] == []
    assert len(_json(client, "/d/docs@1/rows.json?offset=115")["rows"]) == 5
    for query, words in [
        ("length=101", "at most 100"),
        ("length=0", "at least 1"),
        ("offset=-1", "at least 0"),
        ("offset=121", "at most 120"),
        ("length=ten", "not a whole number"),
    ]:
        assert words in _json(client, f"/d/docs@1/rows.json?{query}", 400)["error"]["message"]
    assert _json(client, "/d/docs@1/rows.json?columns=nope", 400)["error"]["kind"] == "SchemaError"
    assert list(_json(client, "/d/docs@1/rows.json?columns=id")["rows"][0]["cells"]) == ["id"]


# ------------------------------------------------------------------------------------------- media


def test_range_requests_on_values_decoded_from_rows(web: WebRegistry, client: TestClient) -> None:
    image = web.media["image-1"]
    url = "/d/images@1/media?row=1&field=image"
    whole = client.get(url)
    assert (
        whole.status_code == 200 and whole.content == image and whole.headers["content-type"] == "image/jpeg"
    )
    assert whole.headers["accept-ranges"] == "bytes" and int(whole.headers["content-length"]) == len(image)
    part = client.get(url, headers={"Range": "bytes=10-49"})
    assert part.status_code == 206 and part.content == image[10:50]
    assert part.headers["content-range"] == f"bytes 10-49/{len(image)}"
    assert client.get(url, headers={"Range": "bytes=-16"}).content == image[-16:]
    assert client.get(url, headers={"Range": "bytes=100-"}).content == image[100:]
    past = client.get(url, headers={"Range": f"bytes={len(image)}-"})
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{len(image)}"
    several = client.get(url, headers={"Range": "bytes=0-1,5-6"})
    assert several.status_code == 200 and several.content == image
    head = client.head(url, headers={"Range": "bytes=0-9"})
    assert head.status_code == 206 and head.headers["content-length"] == "10" and head.content == b""
    again = client.get(url, headers={"If-None-Match": whole.headers["etag"]})
    assert again.status_code == 304
    info = _json(client, "/d/images@1/media.json?row=1&field=image")
    assert info["source"] == "value" and info["size"] == len(image) and info["src"] == url


def test_range_requests_on_webdataset_members_read_the_shard_range(
    web: WebRegistry, client: TestClient
) -> None:
    wav = web.media["wav-1"]
    info = _json(client, "/d/media@1/media.json?row=1&field=wav")
    assert info["source"] == "member" and info["size"] == len(wav) and info["media_type"] == "audio/wav"
    shard = Path(web.root / "media" / info["url"].rsplit("/", 1)[1])
    assert shard.read_bytes()[info["offset"] : info["offset"] + info["length"]] == wav  # a range of the shard
    part = client.get("/d/media@1/media?row=1&field=wav", headers={"Range": "bytes=44-1043"})
    assert part.status_code == 206 and part.content == wav[44:1044]
    assert part.headers["content-type"] == "audio/wav"
    video = web.media["mp4-2"]
    played = client.get("/d/media@1/media?row=2&field=mp4", headers={"Range": "bytes=0-"})
    assert (
        played.status_code == 206
        and played.content == video
        and played.headers["content-type"] == "video/mp4"
    )
    html = _html(client, "/d/media@1/row/1")
    assert '<audio controls preload="metadata" src="/d/media@1/media?row=1&amp;field=wav">' in html
    assert "<video controls" in html


def test_streamed_answers_are_cut_in_chunks_of_the_shard(
    web: WebRegistry, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsm.viewers.web import row_pages

    monkeypatch.setattr(row_pages, "MEDIA_CHUNK", 1000)
    wav = web.media["wav-1"]
    assert client.get("/d/media@1/media?row=1&field=wav").content == wav
    assert (
        client.get("/d/media@1/media?row=1&field=wav", headers={"Range": "bytes=1500-6500"}).content
        == wav[1500:6501]
    )


def test_byte_range_parsing() -> None:
    assert byte_range(None, 10) is None and byte_range("bytes=0-", 10) == (0, 10)
    assert byte_range("bytes=2-100", 10) == (2, 10) and byte_range("bytes=5-2", 10) is None
    with pytest.raises(RangeNotSatisfiable):
        byte_range("bytes=-0", 10)  # the last 0 bytes
    with pytest.raises(RangeNotSatisfiable):
        byte_range("bytes=10-", 10)
    with pytest.raises(RangeNotSatisfiable):
        byte_range("bytes=0-0", 0)


def test_media_of_another_type_is_a_download_never_a_page(web: WebRegistry, tmp_path: Path) -> None:
    import pyarrow as pa

    from .inspect_data import register_table, schema_of

    table = pa.table({"id": [0], "page": [b"<html><script>alert(1)</script></html>"]})
    register_table(
        str(tmp_path / "html"),
        table,
        "parquet",
        name="htmlish",
        registry=web.registry,
        schema=schema_of(table, {"page": {"role": "image", "media_type": "text/html"}}),
        shards=1,
    )
    for client in _client(web):
        answer = client.get("/d/htmlish@1/media?row=0&field=page")
        assert answer.headers["content-type"] == "application/octet-stream"
        assert answer.headers["content-disposition"].startswith("attachment")
        assert "sandbox" in answer.headers["content-security-policy"]


# ---------------------------------------------------------------------------------------- security


def test_token_is_required_on_a_non_loopback_host(web: WebRegistry, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(dsm.errors.InputError, match="--token"):
        serve_config(registry=web.registry, host="0.0.0.0")
    with pytest.raises(dsm.errors.InputError, match="at least 16"):
        serve_config(registry=web.registry, host="0.0.0.0", token="short")
    caplog.set_level("INFO", logger="dsm.serve.access")
    for client in _client(web, host="0.0.0.0", token=TOKEN, allowed_hosts=None):
        for url in (
            "/",
            "/index.json",
            "/d/chats@1/rows.json",
            "/static/app.css",
            "/d/images@1/media?row=1&field=image",
        ):
            denied = client.get(url)
            assert denied.status_code == 401 and TOKEN not in denied.text, url
        assert (
            client.get("/index.json", headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code
            == 401
        )
        assert client.get("/index.json", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        visit = client.get(f"/d/chats@1/rows?offset=3&token={TOKEN}")
        assert visit.status_code == 303 and visit.headers["location"] == "/d/chats@1/rows?offset=3"
        cookie = visit.cookies.get("dsm_serve_token")
        assert cookie and cookie != TOKEN  # a digest of the token, not the token
        assert client.get("/d/chats@1/rows?offset=3").status_code == 200  # the browser keeps the cookie
        client.cookies.clear()
        assert client.get("/").status_code == 401
        client.cookies.set("dsm_serve_token", TOKEN)  # the token itself is not the cookie
        assert client.get("/").status_code == 401
        client.cookies.clear()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "/d/chats@1/rows?offset=3" in logged and TOKEN not in logged and "401" in logged


def test_loopback_answers_only_to_its_own_host_names(web: WebRegistry) -> None:
    app = create_app(serve_config(registry=web.registry, port=8765), port=8765)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/index.json").status_code == 200
        assert client.get("/index.json", headers={"Host": "localhost:8765"}).status_code == 200
        rebound = client.get("/index.json", headers={"Host": "attacker.example:8765"})
        assert rebound.status_code == 421
        assert client.get("/index.json", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert client.get("/index.json", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "cache" not in p.relative_to(root).parts
    }


def test_read_only_no_method_writes_and_no_page_changes_a_file(web: WebRegistry, client: TestClient) -> None:
    before = _tree_digest(web.root)
    for url in [*PAGES, "/d/chats@1/rows.json", "/d/images@1/media?row=1&field=image"]:
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            answer = client.request(method, url)
            assert answer.status_code == 405 and answer.headers["allow"] == "GET, HEAD", (method, url)
        client.get(url)
    _wait_job(client, "/d/chats@1/diff/chats@2.json")
    _wait_job(client, "/d/chats@2/verify.json")
    assert _tree_digest(web.root) == before


@pytest.mark.parametrize(
    "url",
    [
        "/d/..%2F..%2Fetc%2Fpasswd",
        "/d/%2E%2E/rows",
        "/d/chats@1/../../../etc/passwd",
        "/d/evil.yaml",
        "/d/evil.yaml/rows.json",
        "/d/chats@..%2F1",
        "/d/%2Fetc%2Fpasswd/rows",
        "/static/../pyproject.toml",
        "/static/%2E%2E/%2E%2E/pyproject.toml",
        "/d/images@1/media?row=1&field=../../etc/passwd",
        "/d/chats@1/row/..%2F1",
    ],
)
def test_path_traversal_is_refused(
    web: WebRegistry, client: TestClient, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A contract file an attacker would like the server to load, right where a relative path would find it.
    monkeypatch.chdir(web.root)
    contract = Registry(web.registry).get("chats", 1).to_dict() | {"name": "evil"}
    (web.root / "evil.yaml").write_text(json.dumps(contract))
    answer = client.get(url)
    assert answer.status_code in (400, 404), (url, answer.status_code)
    assert "secret@example.org" not in answer.text and "root:" not in answer.text
    assert "[tool.importlinter]" not in answer.text


def _crawl(client: TestClient) -> list[tuple[str, str]]:
    """Every page the tests know, HTML and JSON, plus the links found on them (one level)."""
    seen: dict[str, str] = {}
    queue = [*PAGES, "/d/chats@1/diff/chats@2", "/d/moving@2/rows", "/d/moving@1/row/2"]
    for url in list(queue):
        path, _, query = url.partition("?")
        queue.append(("/index" if path == "/" else path) + ".json" + (f"?{query}" if query else ""))
    _wait_job(client, "/d/chats@1/diff/chats@2.json")
    while queue and len(seen) < 400:
        url = queue.pop(0)
        if url in seen:
            continue
        answer = client.get(url)
        seen[url] = (
            answer.text
            if "text" in answer.headers.get("content-type", "")
            or "json" in answer.headers.get("content-type", "")
            else ""
        )
        for link in re.findall(r'href="(/[^"#]*)"', seen[url]):
            link = link.replace("&amp;", "&")
            if link not in seen and not link.startswith("/static") and "verify" not in link:
                queue.append(link)
    return list(seen.items())


def test_masked_values_appear_in_no_response(web: WebRegistry, client: TestClient) -> None:
    pages = _crawl(client)
    assert len(pages) > 80
    for url, text in pages:
        for secret in web.secrets:
            assert secret not in text, (url, secret)
    refused = _json(client, "/d/images@1/media.json?row=1&field=uploader", 403)
    assert "masked" in refused["error"]["message"]
    assert client.get("/d/images@1/media?row=1&field=uploader").status_code == 403
    assert _json(client, "/d/chats@1/find.json?key=email=person3.secret@example.org")["query"]["key"] == {
        "email": "***"
    }
    assert Registry(web.registry).audit("chats") == ()


def test_unmask_at_start_is_audited_and_shows_the_field(web: WebRegistry) -> None:
    for client in _client(web, unmask=["email"], reason="ticket 4411"):
        data = _json(client, "/d/chats@1/row/3.json")
        assert data["rows"][0]["cells"]["email"]["value"] == "person3.secret@example.org"
        assert data["unmasked"] == ["email"]
        images = _json(client, "/d/images@1/row/1.json")  # no field named email: still masked
        assert images["rows"][0]["cells"]["uploader"]["masked"]
        assert "unmasked (audited" in _html(client, "/")
    records = Registry(web.registry).audit("chats")
    assert records and records[-1].command == "serve" and records[-1].reason == "ticket 4411"
    assert records[-1].fields == ("email",)


def test_hostile_text_is_escaped(client: TestClient) -> None:
    for url in ("/d/docs@1/rows", "/d/docs@1/row/7"):
        html = _html(client, url)
        assert HOSTILE not in html and "&lt;script&gt;" in html
    assert _json(client, "/d/docs@1/row/7.json")["rows"][0]["cells"]["text"]["value"] == HOSTILE


def test_pages_carry_the_security_headers(client: TestClient) -> None:
    answer = client.get("/d/chats@1/rows")
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "http" not in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    html = answer.text
    assert "://" not in re.sub(r'href="[^"]*"', "", html.split("<main>")[0])  # nothing from elsewhere
    assert (
        client.get("/static/app.js").status_code == 200 and client.get("/static/app.css").status_code == 200
    )


# ----------------------------------------------------------------------------------------------- CLI


def test_cli_options_reach_the_library_unchanged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from dsm.cli.app import app
    from dsm.viewers.web import server

    seen: dict[str, Any] = {}

    def fake(**kwargs: Any) -> None:
        seen.update(kwargs)

    monkeypatch.setattr(server, "serve", fake)
    result = CliRunner().invoke(
        app,
        [
            "serve",
            "--registry",
            str(tmp_path),
            "--host",
            "127.0.0.2",
            "--port",
            "9000",
            "--token",
            TOKEN,
            "--unmask",
            "email",
            "--reason",
            "why",
            "--bench-reports",
            str(tmp_path / "b"),
            "--no-access-log",
            "--cache-dir",
            str(tmp_path / "c"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert {k: v for k, v in seen.items() if k != "on_ready"} == {
        "registry": str(tmp_path),
        "host": "127.0.0.2",
        "port": 9000,
        "token": TOKEN,
        "unmask": ["email"],
        "reason": "why",
        "storage_options": None,
        "cache_dir": str(tmp_path / "c"),
        "bench_reports": str(tmp_path / "b"),
        "access_log": False,
    }


def test_cli_refusals_have_their_exit_codes(web: WebRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsm.cli.app import app

    monkeypatch.delenv("DSM_SERVE_TOKEN", raising=False)
    runner = CliRunner()
    wide = runner.invoke(app, ["serve", "--registry", web.registry, "--host", "0.0.0.0"])
    assert wide.exit_code == 2 and "--token" in wide.output
    unknown = runner.invoke(app, ["serve", "--registry", web.registry, "--port", "0", "--unmask", "nope"])
    assert unknown.exit_code == 2 and "no dataset in the registry has a classified field" in unknown.output
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        taken = runner.invoke(
            app, ["serve", "--registry", web.registry, "--port", str(busy.getsockname()[1])]
        )
    finally:
        busy.close()
    assert taken.exit_code == 3 and "in use" in taken.output
    monkeypatch.setattr("dsm.viewers.web.REQUIRES", ("starlette", "not_a_module_dsm_needs"))
    missing = runner.invoke(app, ["serve", "--registry", web.registry])
    assert missing.exit_code == 2 and "pip install 'dsm[web]'" in missing.output


def test_sigterm_right_after_the_start_line_is_a_clean_stop(tmp_path: Path) -> None:
    """A supervisor's SIGTERM, even one sent as soon as the start line is out (before uvicorn handles
    signals), stops ``dsm serve`` with exit 0 and no traceback. Ctrl-C is checked by the browser tests."""
    import signal
    import subprocess
    import sys

    dsm_bin = str(Path(sys.executable).with_name("dsm"))
    command = [dsm_bin, "serve", "--registry", str(tmp_path / "registry"), "--port", "0", "--json"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert read_start_document(process)["datasets"] == 0
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    stderr = process.stderr.read() if process.stderr else ""
    assert code == 0 and "Traceback" not in stderr and "interrupted" not in stderr, (code, stderr)


def test_a_failed_diff_stays_failed_until_retried(client: TestClient) -> None:
    url = "/d/chats@1/diff/chats@2.json?key=lang"  # lang repeats: the comparison refuses it
    for _ in range(600):
        answer = client.get(url)
        if answer.status_code != 202:
            break
        time.sleep(0.05)
    assert answer.status_code == 400 and answer.json()["job"]["state"] == "failed"
    finished = answer.json()["job"]["finished_at"]
    again = client.get(url)
    assert again.status_code == 400 and again.json()["job"]["finished_at"] == finished  # not run again
    assert client.get(url + "&retry=1").json()["job"]["state"] in ("queued", "running", "failed")


def test_the_access_log_hides_key_values(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="dsm.serve.access")
    client.get("/d/chats@1/find.json?key=email=person3.secret@example.org")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "/d/chats@1/find.json?key=***" in logged and "person3" not in logged
