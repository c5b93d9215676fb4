"""What a new user meets in the first hour: the entry points answer, and the small things say what happened.

Each test drives one of them as a user would: ``dsm --version`` and ``-h``, ``help(dsm)`` and ``dir(dsm)``,
``import dsm.torch`` without torch, ``python -m dsm.demo --help``; then owners given with a comma, an alias on
a dataset that does not exist, an empty folder, a cutover plan to a folder that does not exist, a switch
that failed, a gate's unit, a benchmark of too few requests and the comparison chart of the HTML report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from typer.testing import CliRunner

import dsm
from dsm._version import __version__
from dsm.cli.app import app
from tests.conftest import write_parquet_shards
from tests.cutover_support import FAST, make_dataset

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


def _python(*args: str, code: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, *(("-c", code) if code is not None else ()), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def test_version_and_short_help() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.strip() == f"dsm {__version__}"
    for args in (["-h"], ["verify", "-h"], ["cutover", "list", "-h"]):
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0 and "Usage:" in shown.stdout, args
    assert "70" in runner.invoke(app, ["-h"]).stdout  # the exit codes, the bug's too


def test_help_and_dir_list_the_lazy_public_api() -> None:
    listed = dir(dsm)
    assert {"verify", "register", "open", "Contract", "DsmError", "plan_cutover"} <= set(listed)
    page = _python(code="import dsm, pydoc; print(pydoc.render_doc(dsm, renderer=pydoc.plaintext))").stdout
    assert "verify(ref" in page and "class Contract" in page.replace("builtins.object\n", "")


def test_dsm_torch_without_torch_names_the_extra() -> None:
    blocked = (
        "import sys; sys.modules['torch'] = None\n"
        "try:\n    import dsm.torch\nexcept ImportError as e:\n    print(e)"
    )
    out = _python(code=blocked)
    assert "pip install 'dsm[torch]'" in out.stdout and "Traceback" not in out.stderr, out


def test_the_demo_module_has_help_and_writes_nothing_for_it(tmp_path: Path) -> None:
    shown = _python("-m", "dsm.demo", "--help", cwd=tmp_path)
    assert shown.returncode == 0 and "usage: python -m dsm.demo" in shown.stdout
    assert list(tmp_path.iterdir()) == []  # no folder named --help
    written = _python("-m", "dsm.demo", str(tmp_path / "d"), "--shards", "2", "--rows", "40", cwd=tmp_path)
    assert written.returncode == 0 and sorted(p.name for p in (tmp_path / "d").iterdir()) == [
        "part-00000.parquet",
        "part-00001.parquet",
    ]


def test_owners_given_with_commas_are_several(tmp_path: Path, sample_table: pa.Table) -> None:
    write_parquet_shards(tmp_path / "data", sample_table.slice(0, 10), 1)
    registry = str(tmp_path / "registry")
    args = [
        "register",
        str(tmp_path / "data"),
        "--name",
        "d",
        "--owner",
        "a@x.org,b@y.org",
        "--owner",
        "c@z.org",
    ]
    ran = runner.invoke(app, [*args, "--registry", registry, "--json"])
    assert ran.exit_code == 0 and json.loads(ran.stdout)["owners"] == ["a@x.org", "b@y.org", "c@z.org"]


def test_alias_on_a_dataset_that_does_not_exist_says_so(tmp_path: Path) -> None:
    ran = runner.invoke(app, ["alias", "nosuch", "prod", "1", "--registry", str(tmp_path / "r"), "--json"])
    error = json.loads(ran.stdout)["error"]
    assert ran.exit_code == 2 and error["type"] == "DatasetNotFound"
    assert "no dataset named 'nosuch'" in error["message"] and "[]" not in error["message"]


def test_an_empty_folder_says_it_is_empty(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    ran = runner.invoke(
        app, ["register", str(tmp_path / "empty"), "--name", "d", "--registry", str(tmp_path / "r")]
    )
    assert ran.exit_code == 2 and "no files there" in ran.stderr and "--format" not in ran.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    ran = runner.invoke(
        app, ["register", str(tmp_path / "other"), "--name", "d", "--registry", str(tmp_path / "r")]
    )
    assert ran.exit_code == 2 and "notes.txt" in ran.stderr and "--format" in ran.stderr


def test_cutover_plan_leaves_no_folder_it_made(tmp_path: Path, sample_table: pa.Table) -> None:
    registry, _ = make_dataset(tmp_path, sample_table.slice(0, 300), shards=2)
    dest = tmp_path / "new" / "place" / "web"
    planned = dsm.plan_cutover("web@prod", to=str(dest), registry=registry, measure_seconds=0.05)
    assert planned.ok and planned.estimate is not None
    assert not (tmp_path / "new").exists()


def test_a_switch_that_failed_is_not_said_to_have_moved(tmp_path: Path, sample_table: pa.Table) -> None:
    registry, data = make_dataset(tmp_path, sample_table.slice(0, 300), shards=2)
    report = dsm.start_cutover(
        "web@prod", to=str(tmp_path / "out"), through="shadow", registry=registry, **FAST
    )
    third = dsm.register(str(data), name="web", registry=registry, description="moved by someone else")
    dsm.alias("web", "prod", third.version or 0, registry=registry)
    ran = runner.invoke(app, ["cutover", "run", report.id, "--registry", registry])
    assert ran.exit_code == 2
    status = runner.invoke(app, ["cutover", "status", report.id, "--registry", registry])
    line = next(line for line in status.stdout.splitlines() if line.strip().startswith("switch"))
    assert "failed" in line and "already" not in line, line


def test_gates_print_their_unit_and_few_requests_are_called_noise(
    tmp_path: Path, sample_table: pa.Table
) -> None:
    write_parquet_shards(tmp_path / "a", sample_table.slice(0, 200), 2)
    write_parquet_shards(tmp_path / "b", sample_table.slice(0, 200), 2)
    registry = str(tmp_path / "registry")
    dsm.register(str(tmp_path / "a"), name="a", registry=registry)
    dsm.register(str(tmp_path / "b"), name="b", registry=registry)
    html = tmp_path / "report.html"
    gates = ["--max-regression", "0", "--min-throughput", "1TB/s"]  # 1 TB/s cannot hold
    ran = runner.invoke(
        app, ["bench", "a", "--compare", "b", *gates, "--output", str(html), "--registry", registry]
    )
    assert ran.exit_code == 1
    throughput = next(line for line in ran.stdout.splitlines() if line.startswith("FAIL min_throughput"))
    assert "B/s, threshold 1TB/s" in throughput, throughput
    as_json = runner.invoke(app, ["bench", "a", "--compare", "b", *gates, "--registry", registry, "--json"])
    units = {g["name"]: g["unit"] for g in json.loads(as_json.stdout)["gates"]}
    assert units == {"min_throughput": "B/s", "max_regression": "%", "max_errors": ""}
    from dsm.cli.bench import _gate_figure

    assert (_gate_figure(88.44, "%"), _gate_figure(0.25, "s"), _gate_figure(3, "")) == ("88.4%", "250ms", "3")
    assert "request(s) measured, so its percentiles and rates are noise" in ran.stdout
    page = html.read_text()
    # A comparison draws both datasets' latency curves on one chart per worker count.
    assert "request latency with 1 worker, CDF" in page and "a: request latency" not in page
    assert 'width="560"' not in page and "max-width:100%" in page


def test_warnings_are_one_line(tmp_path: Path, sample_table: pa.Table) -> None:
    write_parquet_shards(tmp_path / "data", sample_table.slice(0, 10), 1)
    registry = str(tmp_path / "registry")
    dsm.register(str(tmp_path / "data"), name="d", registry=registry)
    dsm.deprecate("d@1", reason="superseded", registry=registry)
    shown = runner.invoke(app, ["show", "d@1", "--registry", registry])
    lines = [line for line in shown.stderr.splitlines() if line.strip()]
    assert shown.exit_code == 0 and len(lines) == 1 and lines[0].startswith("warning: d@1 is deprecated")


def test_an_empty_registry_is_named_not_shown_as_an_empty_table(tmp_path: Path) -> None:
    registry = str(tmp_path / "no-such-registry[1]")
    ran = runner.invoke(app, ["ls", "--registry", registry])
    assert ran.exit_code == 0
    assert (
        ran.stdout.strip()
        == f"no datasets in registry {registry}; `dsm register SOURCE --name NAME` adds one"
    )
    as_json = runner.invoke(app, ["ls", "--registry", registry, "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == []
