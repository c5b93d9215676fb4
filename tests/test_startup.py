"""The CLI starts light: loading the app and running a bytes-only verify never imports Arrow or NumPy.

`dsm verify` is timed against xxhsum (benchmarks/verify.py) with start-up included, so heavy imports belong
inside the commands that need them (CLI modules import their library lazily).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import write_parquet_shards

HEAVY = ("pyarrow", "numpy", "pandas", "duckdb", "s3fs", "adlfs", "torch")


def _imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return {name.split(".")[0] for name in out.split()}


def test_loading_the_cli_imports_nothing_heavy() -> None:
    loaded = _imported_after("import dsm.cli.app")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_bytes_verify_imports_nothing_heavy(tmp_path: Path, sample_table) -> None:  # type: ignore[no-untyped-def]
    write_parquet_shards(tmp_path / "data", sample_table, 2)
    registry = tmp_path / "registry"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dsm",
            "register",
            str(tmp_path / "data"),
            "--name",
            "s",
            "--registry",
            str(registry),
        ],
        check=True,
        capture_output=True,
    )
    code = (
        "import sys\nfrom dsm.cli.app import app\n"
        f"try:\n    app(['verify', 's', '--registry', {str(registry)!r}])\nexcept SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
    )
    loaded = _imported_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
