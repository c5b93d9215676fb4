"""The compiled fingerprint kernel and the pure-Python path give the same digests, bit for bit.

Both paths run in every test run: the kernel where it is built (``make install`` builds it where gcc and
xxhash.h are present), the pure-Python path through ``DSM_FINGERPRINT_KERNEL=python``, and a build without
a compiler checks that dsm installs and works without the kernel.
"""

from __future__ import annotations

import decimal
import functools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dsm.cli.app import app
from dsm.errors import StorageError
from dsm.hashing import fingerprint_kernel
from dsm.hashing.fingerprint import (
    _NS_PER_UNIT,
    _T_ROW,
    _decimal_text,
    _key_hash,
    digest_batch,
    hash_rows,
    hash_values,
)
from tests.arrow_strategies import any_types, arrays, decimal_array, decimal_types, decimals, tables
from tests.formats.conformance import TYPE_CASES, column
from tests.test_fingerprint_vectors import TABLE_ORDERED, TABLE_UNORDERED, vector_table

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def _built() -> bool:
    return fingerprint_kernel._load()[0] is not None


needs_kernel = pytest.mark.skipif(not _built(), reason="the compiled kernel is not built here")


def _with_mode(mode: str, compute: Callable[[], T]) -> T:
    before = os.environ.get(fingerprint_kernel.ENV_VAR)
    os.environ[fingerprint_kernel.ENV_VAR] = mode
    try:
        return compute()
    finally:
        if before is None:
            del os.environ[fingerprint_kernel.ENV_VAR]
        else:
            os.environ[fingerprint_kernel.ENV_VAR] = before


def both_paths(compute: Callable[[], T]) -> tuple[T, T]:
    """``compute()`` through the kernel and through the pure-Python path."""
    return _with_mode("compiled", compute), _with_mode("python", compute)


def _hex(values: np.ndarray) -> list[str]:
    return [f"{int(v):016x}" for v in values]


def test_kernel_is_built_where_a_compiler_and_xxhash_h_are_present(tmp_path: Path) -> None:
    # The build is optional (no compiler: the pure-Python path), so a C error would otherwise pass unseen.
    compiler = shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0])
    if compiler is None:
        pytest.skip("no C compiler here")
    probe = subprocess.run(
        [compiler, "-E", "-x", "c", "-"], input=b"#include <xxhash.h>\n", capture_output=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip("xxhash.h is not installed here")
    assert _built(), fingerprint_kernel._load()[1]
    assert _with_mode("auto", fingerprint_kernel.provenance)["row_hashing"] == "compiled"


@needs_kernel
@pytest.mark.parametrize("case", sorted(TYPE_CASES))
def test_every_conformance_type_hashes_alike_on_both_paths(case: str) -> None:
    arr = column(case, 19)
    for piece in (arr, arr.slice(5, 9), arr.slice(19), pa.chunked_array([arr.slice(0, 4), arr.slice(4)])):
        kernel, python = both_paths(lambda piece=piece: hash_values(piece))  # type: ignore[misc]
        assert _hex(kernel) == _hex(python), case
    nested = {
        "list": pa.ListArray.from_arrays(pa.array([0, 2, 2, 7, 19], pa.int32()), arr),
        "struct": pa.StructArray.from_arrays([arr], names=[case]),
    }
    for kind, value in nested.items():
        kernel, python = both_paths(lambda value=value: hash_values(value))  # type: ignore[misc]
        assert _hex(kernel) == _hex(python), (case, kind)


@needs_kernel
def test_the_whole_conformance_table_digests_alike_on_both_paths() -> None:
    table = pa.table({name: column(name, 23) for name in TYPE_CASES})
    kernel, python = both_paths(lambda: digest_batch(table))
    assert kernel == python and kernel.rows == 23


@needs_kernel
def test_pinned_vectors_hold_on_both_paths() -> None:
    for digest in both_paths(lambda: digest_batch(vector_table())):
        assert (digest.unordered, digest.ordered) == (TABLE_UNORDERED, TABLE_ORDERED)


_BYTE_TYPES = [
    pa.string(),
    pa.large_string(),
    pa.string_view(),
    pa.binary(),
    pa.large_binary(),
    pa.binary_view(),
]
_LENGTHS = [*range(0, 20), 31, 32, 33, 127, 128, 129, 239, 240, 241, 255, 256, 1023, 1024, 5000]


@needs_kernel
@pytest.mark.parametrize("type_", _BYTE_TYPES, ids=str)
def test_values_of_every_length_class_hash_alike(type_: pa.DataType) -> None:
    # Each XXH3 length class and both view layouts (inline up to 12 bytes, else in a data buffer).
    values = [bytes((i * 7 + n) % 251 for i in range(n)) for n in _LENGTHS]
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_string_view(type_):
        values = [
            v.decode("latin-1").encode()[:n].decode("utf-8", "ignore")
            for v, n in zip(values, _LENGTHS, strict=True)
        ]
    half = len(values) // 2
    # Concatenating view arrays keeps both sets of data buffers: views into the second buffer get tested.
    arr = pa.concat_arrays([pa.array(values[:half], type_), pa.array([*values[half:], None], type_)])
    for piece in (arr, arr.slice(3), arr.slice(half - 2, 9)):
        kernel, python = both_paths(lambda piece=piece: hash_values(piece))  # type: ignore[misc]
        assert _hex(kernel) == _hex(python)


_LONG_LENGTHS = [241, 255, 256, 257, 1023, 1024, 1025, 1088, 2047, 2048, 4096 + 63, 65536 + 1]


@needs_kernel
@settings(max_examples=150, deadline=None)
@given(
    data=st.one_of(
        st.binary(min_size=241, max_size=5000),
        st.sampled_from(_LONG_LENGTHS).map(lambda n: bytes((i * 131 + n) % 256 for i in range(n))),
    ),
    seed=st.integers(0, 2**64 - 1),
)
def test_every_long_input_form_the_cpu_runs_gives_xxhashs_digest(data: bytes, seed: int) -> None:
    # Values over 240 bytes are hashed by the AVX-512 or AVX2 form where the CPU has it; each form the CPU
    # runs, the one in use first, against xxhash's own digest (stripes, blocks and their edges).
    kernel = fingerprint_kernel._load()[0]
    assert kernel is not None
    digests = kernel.long_digests(data, seed)
    assert digests[0][0] == kernel.LONG_HASH_FORM
    assert digests[-1][0] == "default"
    for form, digest in digests:
        assert digest == xxhash.xxh3_64_intdigest(data, seed=seed), form


@needs_kernel
@pytest.mark.parametrize("width", [4, 8, 16, 32])
def test_decimals_at_every_limb_and_chunk_edge_hash_alike(width: int) -> None:
    factory, precision = {4: (pa.decimal32, 9), 8: (pa.decimal64, 18), 16: (pa.decimal128, 38)}.get(
        width, (pa.decimal256, 76)
    )
    edges = {0, 1, 9, 10, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**64 + 1, 2**127 - 1}
    edges |= {2**128, 2**128 + 2**64, 2**192, 10**19 - 1, 10**19, 10**38 - 1, 10**38, 10**57, 10**76 - 1}
    bound = 10**precision - 1
    unscaled = sorted(u for e in edges if e <= bound for u in (e, -e))
    for scale in (0, 2, min(19, precision), precision, -3):
        type_ = factory(precision, scale)
        arr = decimal_array(type_, [decimal.Decimal(f"{u}E{-scale}") for u in unscaled] + [None])
        assert fingerprint_kernel.decimal_texts(arr)[:-1] == [_decimal_text(v) for v in arr.to_pylist()[:-1]]
        kernel, python = both_paths(lambda arr=arr: hash_values(arr))  # type: ignore[misc]
        assert _hex(kernel) == _hex(python), type_


_PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@needs_kernel
@_PROPERTY
@given(any_types().flatmap(arrays))
def test_random_arrays_hash_alike_on_both_paths(arr: pa.Array) -> None:
    kernel, python = both_paths(lambda: hash_values(arr))
    assert _hex(kernel) == _hex(python)


@needs_kernel
@_PROPERTY
@given(tables())
def test_random_tables_digest_alike_on_both_paths(table: pa.Table) -> None:
    kernel, python = both_paths(lambda: digest_batch(table))
    assert kernel == python


@needs_kernel
@settings(max_examples=300, deadline=None)
@given(decimal_types().flatmap(lambda t: st.tuples(st.just(t), st.lists(decimals(t), max_size=8))))
def test_kernel_decimal_text_is_the_exact_normalised_text(case: tuple[pa.DataType, list[Any]]) -> None:
    type_, values = case
    arr = decimal_array(type_, values)
    texts = fingerprint_kernel.decimal_texts(arr)
    assert texts == [_decimal_text(v) for v in arr.to_pylist()]
    # The text is the value: parsing it back gives the same number, and it has no exponent.
    assert all(decimal.Decimal(t) == v and "E" not in t for t, v in zip(texts, values, strict=True))


@pytest.mark.parametrize(
    ("text", "type_", "expected"),
    [
        ("1.50", pa.decimal128(10, 2), "1.5"),
        ("-0.01", pa.decimal128(10, 2), "-0.01"),
        ("100", pa.decimal128(10, 0), "100"),
        ("0.00", pa.decimal128(10, 2), "0"),
        ("-0.000", pa.decimal256(40, 3), "0"),
        ("12300", pa.decimal128(5, -2), "12300"),
        (
            "1234567890123456789012345678.0123456789",
            pa.decimal128(38, 10),
            "1234567890123456789012345678.0123456789",
        ),
        ("-" + "9" * 76, pa.decimal256(76, 0), "-" + "9" * 76),
        ("0." + "0" * 70 + "123000", pa.decimal256(76, 76), "0." + "0" * 70 + "123"),
    ],
)
def test_decimal_text_follows_the_spec_beyond_28_digits(text: str, type_: pa.DataType, expected: str) -> None:
    arr = pa.array([decimal.Decimal(text)], type=type_)
    assert _decimal_text(arr.to_pylist()[0]) == expected
    if _built():
        assert fingerprint_kernel.decimal_texts(arr) == [expected]
        kernel, python = both_paths(lambda: hash_values(arr))
        assert _hex(kernel) == _hex(python)


@needs_kernel
def test_malformed_buffers_raise_instead_of_reading_outside_them() -> None:
    from dsm.hashing import _rowhash  # type: ignore[attr-defined]

    out = np.zeros(2, dtype=np.uint64)
    beyond = np.array([0, 3, 99], dtype=np.int32)
    with pytest.raises(ValueError, match="outside the data buffer"):
        _rowhash.hash_binary(beyond, b"abcdef", 0, 2, 4, 7, out)
    backwards = np.array([4, 1, 2], dtype=np.int64)
    with pytest.raises(ValueError, match="outside the data buffer"):
        _rowhash.hash_binary(backwards, b"abcdef", 0, 2, 8, 7, out)
    with pytest.raises(ValueError, match="shorter"):
        _rowhash.hash_binary(np.array([0, 1], dtype=np.int32), b"a", 0, 2, 4, 7, out)
    view = np.zeros(4, dtype=np.int32)
    view[0], view[2], view[3] = 20, 5, 0  # a 20-byte value in data buffer 5, which does not exist
    with pytest.raises(ValueError, match="outside its data buffer"):
        _rowhash.hash_binary_views(view, [b"x" * 40], None, 0, 1, 7, out)
    # The same view under a null slot is never read.
    _rowhash.hash_binary_views(view, [b"x" * 40], b"\x00", 0, 1, 7, out)
    with pytest.raises(ValueError, match="outside the child values"):
        _rowhash.hash_lists(np.array([0, 5], dtype=np.int64), 0, 1, 8, np.zeros(3, np.uint64), 13, True, out)
    with pytest.raises(ValueError, match="smaller than count"):
        _rowhash.hash_decimals(b"\0" * 64, 0, 4, 16, 2, 7, out)


def test_the_python_path_is_used_when_asked_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fingerprint_kernel.ENV_VAR, "python")
    assert not fingerprint_kernel.enabled()
    shown = fingerprint_kernel.provenance()
    assert shown["row_hashing"] == "python"
    assert "pure-Python path" in shown["notice"] and "DSM_FINGERPRINT_KERNEL=python" in shown["notice"]
    assert "\n" not in shown["notice"]
    digest = digest_batch(vector_table())
    assert (digest.unordered, digest.ordered) == (TABLE_UNORDERED, TABLE_ORDERED)


def test_a_bad_mode_and_a_missing_kernel_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fingerprint_kernel.ENV_VAR, "fastest")
    with pytest.raises(ValueError, match="DSM_FINGERPRINT_KERNEL"):
        fingerprint_kernel.enabled()
    monkeypatch.setenv(fingerprint_kernel.ENV_VAR, "compiled")
    monkeypatch.setattr(fingerprint_kernel, "_load", lambda: (None, "not built in this test"))
    with pytest.raises(StorageError, match="not built in this test"):
        fingerprint_kernel.enabled()


@pytest.fixture
def parquet_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    # The kernel's types, and numbers beside them, in shards of several row groups.
    kinds = ["string", "large_string", "binary", "fixed_size_binary", "decimal128", "decimal256", "list"]
    kinds += ["large_list", "list_of_binary", "struct", "dictionary", "int64", "float64", "timestamp_ns_utc"]
    table = pa.table({name: column(name, 40) for name in kinds})
    for i in range(2):
        pq.write_table(table.slice(i * 20, 20), folder / f"part-{i:05d}.parquet", row_group_size=7)
    return folder


def test_register_and_deep_verify_report_the_path_in_json(
    parquet_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    registry = str(tmp_path / "registry")
    fingerprints = {}
    for mode in ["python", "auto"] if _built() else ["python"]:
        monkeypatch.setenv(fingerprint_kernel.ENV_VAR, mode)
        name = f"d-{mode}"
        registered = runner.invoke(
            app, ["register", str(parquet_folder), "--name", name, "--registry", registry, "--json"]
        )
        assert registered.exit_code == 0, registered.output
        body = json.loads(registered.stdout)
        fingerprints[mode] = body["fingerprint"]
        verified = runner.invoke(app, ["verify", name, "--deep", "--registry", registry, "--json"])
        assert verified.exit_code == 0, verified.output
        report = json.loads(verified.stdout)
        for shown in (body["provenance"], report["provenance"]):
            assert shown["row_hashing"] == ("python" if mode == "python" else "compiled")
            assert ("notice" in shown) == (mode == "python")
    assert len({json.dumps(f, sort_keys=True) for f in fingerprints.values()}) == 1


@pytest.fixture(scope="module")
def wheel_without_compiler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """dsm built as a wheel with a C compiler that always fails: the kernel is skipped, the build is not."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    shutil.copytree(
        ROOT, source, ignore=shutil.ignore_patterns(".*", "*.so", "build", "node_modules", "*-data")
    )
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = out.glob("dsm-*.whl")
    yield wheel


def test_dsm_installs_and_works_without_a_compiler(wheel_without_compiler: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel_without_compiler) as wheel:
        names = wheel.namelist()
        assert "dsm/hashing/fingerprint.py" in names and not [n for n in names if n.endswith(".so")]
        wheel.extractall(tmp_path / "site")
    code = (
        "import json, dsm, dsm.hashing.fingerprint_kernel as k\n"
        "from dsm.hashing.fingerprint import digest_batch\n"
        "from tests.test_fingerprint_vectors import vector_table\n"
        "d = digest_batch(vector_table())\n"
        # JSONL without its compiled kernel: pyarrow's parser and Arrow's join
        "import io, pyarrow as pa\n"
        "from dsm.formats import _flatjson\n"
        "from dsm.formats.jsonl import JsonlFormat\n"
        "t = pa.table({'a': [1, None], 'b': ['x', 'y']})\n"
        "s = io.BytesIO(); w = JsonlFormat().open_writer(s, t.schema)\n"
        "w.write_batch(t.to_batches()[0]); w.close()\n"
        "r = JsonlFormat().iter_batches(io.BytesIO(s.getvalue()), shard='x', schema=t.schema)\n"
        "back = pa.Table.from_batches(list(r))\n"
        "jsonl = [_flatjson._kernel() is None, s.getvalue().decode(), back.equals(t)]\n"
        "print(json.dumps([dsm.__file__, d.unordered, d.ordered, k.provenance(), jsonl]))\n"
    )
    # No site hooks (-S): the editable install of this checkout must not shadow the wheel's files.
    paths = [
        str(tmp_path / "site"),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        str(ROOT),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop(fingerprint_kernel.ENV_VAR, None)
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, check=True, cwd=tmp_path
    )
    where, unordered, ordered, shown, jsonl = json.loads(done.stdout)
    assert jsonl == [True, '{"a":1,"b":"x"}\n{"a":null,"b":"y"}\n', True]
    assert where.startswith(str(tmp_path / "site")), where
    assert (unordered, ordered) == (TABLE_UNORDERED, TABLE_ORDERED)
    assert shown["row_hashing"] == "python" and "was not built" in shown["notice"]


@needs_kernel
@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(0, 20_000) | st.sampled_from([8192, 65_536, 300_000]),
    key=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=6),
)
def test_the_read_orders_permutation_is_the_same_on_both_paths(n: int, key: list[int]) -> None:
    """The kernel's O(n) block permutation against NumPy's argsort of the same keys (docs/reading.md)."""
    from dsm.hashing.permutation import keyed_permutation

    compiled, python = both_paths(lambda: keyed_permutation(n, *key))
    assert compiled.dtype == python.dtype == np.int64
    assert compiled.tolist() == python.tolist()


@needs_kernel
def test_every_size_to_599_and_one_past_the_bucket_cap_is_the_same_on_both_paths() -> None:
    from dsm.hashing.permutation import keyed_permutation

    for n in [*range(0, 600), (1 << 21) + 5]:  # the last one past the kernel's cap of 2**20 buckets
        compiled, python = both_paths(lambda n=n: keyed_permutation(n, 2, 7, 0, 3, n))
        assert np.array_equal(compiled, python), n


_FLAT_TYPES = [
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
    pa.float32(), pa.float64(), pa.date32(), pa.timestamp("s"), pa.timestamp("ms", tz="UTC"),
    pa.timestamp("us"), pa.timestamp("ns", tz="Asia/Kolkata"), pa.time32("s"), pa.time32("ms"),
    pa.time64("us"), pa.time64("ns"), pa.duration("s"), pa.duration("ns"),
]  # fmt: skip


def _random_flat(rng: np.random.Generator, type_: pa.DataType, n: int, null_share: float) -> pa.Array:
    """``n`` values of ``type_`` from random bits (every NaN payload, negative instants, the extremes),
    with about ``null_share`` of the slots null (their bytes random too)."""
    width = type_.bit_width // 8
    raw = rng.integers(0, 256, n * width, dtype=np.uint8).tobytes()
    if pa.types.is_time(type_):  # a time of day: the unit's count in [0, one day)
        per_day = 86_400 * 1_000_000_000 // _NS_PER_UNIT[type_.unit]
        values = rng.integers(0, per_day, n).astype(np.int32 if width == 4 else np.int64)
        raw = values.tobytes()
    validity = None
    if null_share:
        valid = rng.random(n) >= null_share
        validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(raw)])


@needs_kernel
@settings(max_examples=150, deadline=None)
@given(
    types=st.lists(st.sampled_from(_FLAT_TYPES), min_size=1, max_size=4),
    rows=st.sampled_from([0, 1, 7, 511, 512, 513, 1025, 3000]),
    cut=st.integers(0, 17),
    chunks=st.integers(1, 3),
    null_share=st.sampled_from([0.0, 0.01, 0.5, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_number_and_instant_fields_fold_in_one_pass_as_hashed_then_folded(
    types: list[pa.DataType], rows: int, cut: int, chunks: int, null_share: float, seed: int
) -> None:
    """Flat number and instant fields are hashed and folded into the row hashes in one pass of the kernel
    (blocks of 512 slots): the same row hashes and digests as hashing each field's values first, then
    folding them, and as the pure-Python path, across block edges, offsets (slices), chunks and nulls."""
    rng = np.random.default_rng(seed)
    columns = []
    for type_ in types:
        parts = [_random_flat(rng, type_, rows + cut, null_share).slice(cut) for _ in range(chunks)]
        columns.append(pa.chunked_array(parts, type=type_))
    table = pa.table(columns, names=[f"f{i}" for i in range(len(types))])

    def two_steps() -> np.ndarray:
        total = np.zeros(table.num_rows, dtype=np.uint64)
        for name, values in zip(table.column_names, table.columns, strict=True):
            fingerprint_kernel.fold(total, hash_values(values), _key_hash(name))
        return fingerprint_kernel.finish(total, _T_ROW)

    fused = _with_mode("compiled", lambda: hash_rows(table))
    assert _hex(fused) == _hex(_with_mode("compiled", two_steps))
    assert _hex(fused) == _hex(_with_mode("python", lambda: hash_rows(table)))
    for batch in table.combine_chunks().to_batches():
        kernel, python = both_paths(functools.partial(digest_batch, batch))
        assert kernel == python


@needs_kernel
def test_a_fused_fold_refuses_buffers_too_short_for_its_slots() -> None:
    from dsm.hashing import _rowhash  # type: ignore[attr-defined]

    total = np.zeros(4, dtype=np.uint64)
    numbers = np.arange(4, dtype=np.int64)
    with pytest.raises(ValueError, match="shorter than count"):
        _rowhash.fold_numbers(total, numbers, None, 1, 4, "q", 1, 2, 3, 4)
    with pytest.raises(ValueError, match="validity bitmap is shorter"):
        nine = np.arange(9, dtype=np.int64)
        _rowhash.fold_numbers(np.zeros(9, np.uint64), nine, b"\xff", 0, 9, "q", 1, 2, 3, 4)
    with pytest.raises(ValueError, match="total must hold count"):
        _rowhash.fold_numbers(np.zeros(3, np.uint64), numbers, None, 0, 4, "q", 1, 2, 3, 4)
    with pytest.raises(ValueError, match="unknown number kind"):
        _rowhash.fold_numbers(total, numbers, None, 0, 4, "x", 1, 2, 3, 4)
    with pytest.raises(ValueError, match="one second"):
        _rowhash.fold_instants(total, numbers, None, 0, 4, 8, 1000, 1000, 1, 2, 3)
    with pytest.raises(ValueError, match="shorter than count"):
        _rowhash.fold_instants(total, numbers, None, 2, 4, 8, 1000, 1_000_000, 1, 2, 3)
