"""The shape of the package: one home per capability, layers checked by import-linter, old paths that still
work (and say where their names went), one exit-code table, and modules of a readable size."""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import dsm
import dsm.errors as errors
from dsm import _moved
from dsm.cli import EXIT_CODES, exit_code

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "dsm"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


# --- old module paths ---------------------------------------------------------------------------------


def _old_names() -> list[tuple[str, str]]:
    pairs = []
    for old, target in _moved.MOVED.items():
        names = importlib.import_module(target).__all__ if isinstance(target, str) else list(target)
        pairs += [(old, name) for name in names]
    return pairs


@pytest.mark.parametrize(("old", "name"), _old_names(), ids=lambda v: str(v))
def test_an_old_path_still_gives_the_same_object_and_says_where_it_moved(old: str, name: str) -> None:
    if old.endswith("torch"):
        pytest.importorskip("torch")
    module = importlib.import_module(old)
    assert name in module.__all__
    with pytest.warns(DeprecationWarning, match=rf"{re.escape(old)}\.{name} moved to dsm\.[\w.]+; import it"):
        value = getattr(module, name)
    target = _moved.MOVED[old]
    home = target if isinstance(target, str) else target[name]
    new_module, _, attribute = home.partition(":")
    assert value is getattr(importlib.import_module(new_module), attribute or name)


def test_from_import_of_an_old_path_works_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match="dsm.dataset.Dataset moved to dsm.read.dataset.Dataset"):
        from dsm.dataset import Dataset
    from dsm.read.dataset import Dataset as Home

    assert Dataset is Home
    with pytest.warns(DeprecationWarning, match="dsm.cutover.journal.CutoverJournal moved to"):
        from dsm.cutover.journal import CutoverJournal  # a moved module inside a moved package
    assert CutoverJournal.__module__ == "dsm.commands.cutover.journal"
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        importlib.import_module("dsm.fingerprint").nothing  # noqa: B018


def test_old_paths_have_no_file_so_that_moves_stay_renames() -> None:
    for old in _moved.MOVED:
        relative = Path(*old.split("."))
        assert not (ROOT / relative.with_suffix(".py")).exists(), old
        assert not (ROOT / relative / "__init__.py").exists(), old


@pytest.mark.parametrize(
    ("module", "name", "home"),
    [
        ("dsm.commands.bench", "parse_size", "dsm.units"),
        ("dsm.commands.bench", "find_knee", "dsm.benchmark.results"),
        ("dsm.commands.bench", "write_html", "dsm.benchmark.html"),
        ("dsm.commands.rewrite", "target_format", "dsm.rewrite.spec"),
        ("dsm.commands.rewrite", "PROOF_WRITTEN", "dsm.rewrite.run"),
    ],
)
def test_names_a_command_module_re_exported_still_import_from_it(module: str, name: str, home: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"moved to {re.escape(home)}.{name}"):
        value = getattr(importlib.import_module(module), name)
    assert value is getattr(importlib.import_module(home), name)


def test_public_api_names_import_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in dsm.__all__:
            getattr(dsm, name)
        from dsm.commands.bench import BenchReport, bench  # noqa: F401


def test_dataset_fingerprint_is_renamed_identity(tmp_path: Path, sample_table) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import write_parquet_shards

    write_parquet_shards(tmp_path / "data", sample_table, 2)
    registry = str(tmp_path / "registry")
    dsm.register(str(tmp_path / "data"), name="d", registry=registry)
    ds = dsm.open("d", registry=registry)
    assert ds.identity.startswith("xxh3-128:")
    assert ds.identity != ds.contract.fingerprint.unordered  # type: ignore[union-attr]
    with pytest.warns(DeprecationWarning, match="renamed Dataset.identity"):
        assert ds.fingerprint == ds.identity
    assert ds.iterator(10).state_dict()["dataset"]["fingerprint"] == ds.identity  # the state format's key


# --- the layering contract ----------------------------------------------------------------------------


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(tree / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("layout")
    shutil.copytree(PACKAGE, tree / "dsm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_layering_contract_holds() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("storage/secrets.py", "import dsm.commands.verify\n", "Data flows one way"),  # a layer imports above
        ("read/order.py", "import dsm.rewrite.plan\n", "Data flows one way"),  # one engine imports another
        ("cli/verify.py", "import dsm.cli.app\n", "The CLI: app.py"),  # a command module imports the app
        ("viewers/tui/cells.py", "import dsm.cli.render\n", "Data flows one way"),  # a viewer imports the CLI
        ("commands/inspect.py", "import dsm.viewers.tui\n", "Data flows one way"),  # the library, a viewer
        ("viewers/tui/window.py", "import dsm.viewers.tui.app\n", "dsm view: the app opens"),  # a widget
        ("cli/view.py", "import dsm.viewers.tui.app\n", None),  # allowed: the CLI starts a viewer
        ("units.py", "import dsm._version\n", None),  # allowed: a lower layer
    ],
)
def test_the_contract_fails_when_a_layer_imports_one_above_it(
    tree_copy: Path, module: str, line: str, broken: str | None
) -> None:
    path = tree_copy / "dsm" / module
    original = path.read_text(encoding="utf-8")
    try:
        path.write_text(original + "\n" + line, encoding="utf-8")
        result = _lint(tree_copy)
    finally:
        path.write_text(original, encoding="utf-8")
    if broken is None:
        assert result.returncode == 0, result.stdout
    else:
        assert result.returncode == 1, result.stdout
        assert broken in result.stdout.split("Broken contracts")[1]


def test_the_contract_fails_on_an_import_cycle(tree_copy: Path) -> None:
    path = tree_copy / "dsm" / "storage" / "options.py"
    original = path.read_text(encoding="utf-8")
    try:
        path.write_text(original + "\nimport dsm.storage.location\n", encoding="utf-8")
        result = _lint(tree_copy)
    finally:
        path.write_text(original, encoding="utf-8")
    assert result.returncode == 1
    assert "No cycles are allowed in dsm.storage" in result.stdout


# --- homes ----------------------------------------------------------------------------------------------

FAMILIES = (
    "register",
    "verify",
    "catalog",
    "diff",
    "inspect",
    "rewrite",
    "bench",
    "cutover",
    "storage_check",
    "footprint",
    "lifecycle",
    "policy",
)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_command_family_has_a_cli_module_and_a_library_module_of_one_name(family: str) -> None:
    library = importlib.import_module(f"dsm.commands.{family}")
    cli = importlib.import_module(f"dsm.cli.{family}")
    assert library.__all__ and callable(cli.add_to)


def test_every_library_command_module_is_a_family() -> None:
    found = {p.stem for p in (PACKAGE / "commands").iterdir() if not p.name.startswith("_")}
    assert {name.removesuffix(".py") for name in found} == set(FAMILIES)


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def test_no_module_is_over_about_600_lines_unless_its_docstring_says_why() -> None:
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > 620:
            long[str(path.relative_to(ROOT))] = lines
    for name, lines in long.items():
        text = _docstring(ROOT / name)
        assert re.search(r"\b(longer than|over 600 lines)\b", text), f"{name}: {lines} lines, no reason given"


def test_each_object_store_names_the_protocols_the_registry_maps_to_it() -> None:
    from dsm.storage.stores import known_stores

    for protocol, target in known_stores().items():
        module, _, name = target.partition(":")
        assert protocol in getattr(importlib.import_module(module), name).protocol


# --- errors and exit codes ------------------------------------------------------------------------------


ERROR_CLASSES = [n for n in errors.__all__ if isinstance(getattr(errors, n), type)]  # not the helper about()


def test_the_errors_docstring_draws_exactly_the_error_classes() -> None:
    drawn = set(re.findall(r"[├└]── (\w+)", errors.__doc__ or "")) | {"DsmError"}
    assert drawn == set(ERROR_CLASSES)


@pytest.mark.parametrize("name", ERROR_CLASSES)
def test_the_exit_code_table_gives_every_error_its_code(name: str) -> None:
    cls = getattr(errors, name)
    assert exit_code(cls) == cls.exit_code
    assert exit_code(cls("x") if name != "StageCheckFailed" else cls("x", {})) == cls.exit_code


def test_the_exit_code_table() -> None:
    assert exit_code(KeyboardInterrupt()) == 130
    # A bug is reported as one (exit 70, EX_SOFTWARE), never as 1 (the data failed a check).
    assert exit_code(RuntimeError()) == 70
    assert sorted({code for _, code, _ in EXIT_CODES}) == [1, 2, 3, 70, 130]
    assert exit_code(errors.ConflictError) == 3 and exit_code(errors.StageCheckFailed) == 1


def test_the_old_to_keyword_of_the_rewrites_warns_and_writes_the_same_bytes(
    tmp_path: Path,
    sample_table,  # type: ignore[no-untyped-def]
) -> None:
    from tests.conftest import write_parquet_shards

    write_parquet_shards(tmp_path / "data", sample_table.slice(0, 500), 2)
    registry = str(tmp_path / "registry")
    dsm.register(str(tmp_path / "data"), name="d", registry=registry)
    new = dsm.convert_format("d@1", str(tmp_path / "new"), format="jsonl", registry=registry, name="n")
    with pytest.warns(DeprecationWarning, match=r"convert_format\(to=\.\.\.\) is renamed format="):
        old = dsm.convert_format("d@1", str(tmp_path / "old"), to="jsonl", registry=registry, name="o")
    assert [s.checksum for s in new.contract.shards] == [s.checksum for s in old.contract.shards]
    assert new.parameters == old.parameters  # the lineage still records "to": the format written
    with pytest.warns(DeprecationWarning, match=r"reshard\(to=\.\.\.\)"):
        dsm.reshard("d@1", str(tmp_path / "r"), num_shards=1, to="csv", registry=registry, name="r")
    with pytest.raises(dsm.InputError, match="needs the target format"):
        dsm.convert_format("d@1", str(tmp_path / "none"), registry=registry)


def test_a_setting_patched_through_an_old_path_reaches_its_home_and_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dsm.read.iterator as home

    before = home.READ_BATCH_BYTES
    old = importlib.import_module("dsm.dataset")
    with pytest.warns(DeprecationWarning, match="set it there"):
        monkeypatch.setattr(old, "READ_BATCH_BYTES", 1)
    assert home.READ_BATCH_BYTES == 1
    monkeypatch.undo()
    assert before == home.READ_BATCH_BYTES


# --- benchmarks -----------------------------------------------------------------------------------------


def _top_level_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_benchmark_script_is_imported_in_place_of_a_module() -> None:
    """``python benchmarks/x.py`` puts benchmarks/ first on the import path, so a script named like a module
    is imported in its place by every benchmark (a script named ``inspect.py`` broke them all: dataclasses
    and numpy import ``inspect``). No script has a standard library module's name, and a script named like
    an installed package (``ray.py``, as its issue names it) is imported by no benchmark under that name."""
    import importlib.metadata

    scripts = {path.stem: path for path in (ROOT / "benchmarks").glob("*.py")}
    assert {"ray", "rewrite"} <= set(scripts)
    assert sorted(set(scripts) & set(sys.stdlib_module_names)) == []
    installed = set(scripts) & set(importlib.metadata.packages_distributions())
    assert "ray" in installed
    for path in scripts.values():
        assert sorted(_top_level_imports(path) & installed) == [], path.name
