"""The compiled kernel of the row fingerprint, and the choice between it and the pure-Python path.

``dsm.hashing._rowhash`` (C, built from ``_rowhash.c`` beside this module against the system's ``xxhash.h``
when the package is installed) hashes whole Arrow arrays with the GIL released, one call per array: each
string or binary value (offsets, views and fixed-size layouts), each decimal's normalised text, the
elements of each list, integers, floats and instants, and it folds fields into rows and rows into the
digest; it also computes the read order's block permutation (:func:`keyed_order`).
:mod:`dsm.hashing.fingerprint` keeps the algorithm's structure and hands those loops here when the kernel
is active; where the kernel was not built, its own pure-Python (NumPy) path gives the same digests, bit
for bit (a test compares both), as NumPy gives the same permutations.

``DSM_FINGERPRINT_KERNEL`` chooses: unset or ``auto`` (the kernel where it is built), ``python`` (always the
pure-Python path), ``compiled`` (the kernel, or a StorageError where it is not built).

>>> provenance()["row_hashing"] in ("compiled", "python")
True
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING

from dsm._version import tool_name
from dsm.errors import InputError, StorageError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = [
    "ENV_VAR",
    "apply_nulls",
    "digest_parts",
    "enabled",
    "finish",
    "fold",
    "fold_instant_values",
    "fold_number_values",
    "hash_binary_values",
    "hash_decimal_values",
    "hash_instant_values",
    "hash_list_values",
    "hash_number_values",
    "keyed_order",
    "provenance",
]

ENV_VAR = "DSM_FINGERPRINT_KERNEL"
_MODES = ("auto", "python", "compiled")


@lru_cache(maxsize=1)
def _load() -> tuple[ModuleType | None, str]:
    """The built kernel module, or None and why it could not be imported."""
    try:
        from dsm.hashing import _rowhash  # type: ignore[attr-defined]
    except ImportError as exc:
        if importlib.util.find_spec("dsm.hashing._rowhash") is None:
            return None, "dsm.hashing._rowhash was not built when dsm was installed"
        return None, f"dsm.hashing._rowhash does not load: {exc}"
    return _rowhash, ""


def _mode() -> str:
    mode = os.environ.get(ENV_VAR, "").strip().lower() or "auto"
    if mode not in _MODES:
        raise InputError(f"{ENV_VAR}={mode!r} is not one of: {', '.join(_MODES)}")
    return mode


def enabled() -> bool:
    """True when row hashing goes through the compiled kernel (read from the environment on every call)."""
    mode = _mode()
    if mode == "python":
        return False
    kernel, why = _load()
    if kernel is None and mode == "compiled":
        raise StorageError(
            f"{ENV_VAR}=compiled but the compiled fingerprint kernel is not built ({why}); reinstall dsm "
            "with a C compiler and xxhash.h present (Debian/Ubuntu: apt-get install gcc libxxhash-dev)"
        )
    return kernel is not None


def provenance() -> dict[str, str]:
    """What computed a command's row fingerprints, for the ``provenance`` of its JSON: the tool, and how
    this process and its local workers hash rows.

    ``row_hashing`` is ``compiled`` or ``python``; ``notice`` (one line) is present when the pure-Python
    path is used, and says why.
    """
    shown = {"tool": tool_name()}
    if enabled():
        kernel, _ = _load()
        version = getattr(kernel, "XXHASH_VERSION", "?")
        return {**shown, "row_hashing": "compiled", "kernel": f"dsm.hashing._rowhash (xxHash {version})"}
    if _mode() == "python":
        reason = f"{ENV_VAR}=python asked for it"
    else:
        reason = f"{_load()[1]} (to build it: install gcc and libxxhash-dev, then reinstall dsm)"
    notice = f"row fingerprints computed by the pure-Python path (same digests, slower): {reason}"
    return {**shown, "row_hashing": "python", "notice": notice}


def _kernel() -> ModuleType:
    kernel, why = _load()
    if kernel is None:
        raise StorageError(f"the compiled fingerprint kernel is not built ({why})")
    return kernel


def keyed_order(n: int, base: int) -> np.ndarray:
    """``0 .. n-1`` sorted by the SplitMix64 finaliser of ``base + i`` (int64): what
    :func:`dsm.hashing.permutation.keyed_permutation` computes with NumPy's argsort, in O(n)."""
    import numpy as np

    out = np.empty(max(n, 0), dtype=np.int64)
    _kernel().keyed_order(base, out)
    return out


def _out(n: int) -> np.ndarray:
    import numpy as np

    return np.empty(n, dtype=np.uint64)


def hash_binary_values(arr: pa.Array, seed: int) -> np.ndarray:
    """XXH3-64 with ``seed`` of every value of a string, binary, large, view or fixed-size binary array.

    Null slots get whatever their bytes hash to; the caller replaces them.
    """
    import pyarrow as pa

    kernel = _kernel()
    out = _out(len(arr))
    kind = arr.type
    buffers = arr.buffers()
    if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        validity = buffers[0] if arr.null_count else None
        kernel.hash_binary_views(buffers[1], buffers[2:], validity, arr.offset, len(arr), seed, out)
    elif pa.types.is_fixed_size_binary(kind):
        width = kind.byte_width
        kernel.hash_fixed_binary(_or_empty(buffers[1]), arr.offset, len(arr), width, seed, out)
    else:
        large = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
        kernel.hash_binary(
            buffers[1], _or_empty(buffers[2]), arr.offset, len(arr), 8 if large else 4, seed, out
        )
    return out


def hash_decimal_values(arr: pa.Array, seed: int) -> np.ndarray:
    """XXH3-64 with ``seed`` of the normalised text of every value of a decimal32/64/128/256 array."""
    kernel = _kernel()
    out = _out(len(arr))
    kind = arr.type
    kernel.hash_decimals(arr.buffers()[1], arr.offset, len(arr), kind.byte_width, kind.scale, seed, out)
    return out


def decimal_texts(arr: pa.Array) -> list[str]:
    """The normalised texts the kernel hashes for a decimal array (null slots included): for tests."""
    kind = arr.type
    texts: list[str] = _kernel().decimal_texts(
        arr.buffers()[1], arr.offset, len(arr), kind.byte_width, kind.scale
    )
    return texts


def hash_list_values(offsets: np.ndarray, children: np.ndarray, tag: int, *, ordered: bool) -> np.ndarray:
    """The list hash of each slot that ``offsets`` (int64, one more than the slots) cuts from ``children``.

    ``children`` holds the hashes of the child values from ``offsets[0]`` on. Ordered lists key each
    element by its position; maps (``ordered=False``) sum their entries in any order.
    """
    import numpy as np

    count = len(offsets) - 1
    out = _out(count)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    children = np.ascontiguousarray(children, dtype=np.uint64)
    _kernel().hash_lists(offsets, 0, count, 8, children, tag, ordered, out)
    return out


_NUMBER_KINDS = {
    ("int", 8): "b",
    ("int", 16): "h",
    ("int", 32): "i",
    ("int", 64): "q",
    ("uint", 8): "B",
    ("uint", 16): "H",
    ("uint", 32): "I",
    ("uint", 64): "Q",
    ("float", 32): "f",
    ("float", 64): "d",
}


def _number_code(kind: pa.DataType) -> str:
    """The kernel's code of an integer or float32/float64 type (ValueError for any other)."""
    import pyarrow as pa

    family = "uint" if pa.types.is_unsigned_integer(kind) else "int" if pa.types.is_integer(kind) else "float"
    code = _NUMBER_KINDS.get((family, kind.bit_width))
    if code is None:
        raise ValueError(f"the fingerprint kernel hashes no numbers of type {kind}")
    return code


def hash_number_values(arr: pa.Array, tag: int, high_tag: int = 0) -> np.ndarray:
    """``fmix(v ^ tag)`` of every value of an integer or float32/float64 array (integers sign-extended to
    64 bits; unsigned ones from 2**63 on take ``high_tag``; floats widened to float64 bits with every NaN
    canonical). A float16 array is cast to float64 by the caller."""
    out = _out(len(arr))
    code = _number_code(arr.type)
    _kernel().hash_numbers(_or_empty(arr.buffers()[1]), arr.offset, len(arr), code, tag, high_tag, out)
    return out


def hash_instant_values(arr: pa.Array, ns_per_unit: int, tag: int) -> np.ndarray:
    """The hash of every value of a timestamp, time or duration array: whole seconds and nanoseconds."""
    out = _out(len(arr))
    width = arr.type.bit_width // 8
    per_second = 1_000_000_000 // ns_per_unit
    _kernel().hash_instants(
        _or_empty(arr.buffers()[1]), arr.offset, len(arr), width, per_second, ns_per_unit, tag, out
    )
    return out


def apply_nulls(arr: pa.Array, hashes: np.ndarray, null_hash: int) -> bool:
    """Put ``null_hash`` in the slots of ``hashes`` that are null in ``arr``, in place; False (and nothing
    done) when ``arr`` has no validity bitmap to read."""
    validity = arr.buffers()[0]
    if validity is None:
        return False
    _kernel().apply_nulls(validity, arr.offset, len(arr), null_hash, hashes)
    return True


def fold(total: np.ndarray, hashes: np.ndarray, key: int) -> None:
    """``total += fmix(hashes ^ key)`` (mod 2**64), in place."""
    import numpy as np

    _kernel().fold(total, np.ascontiguousarray(hashes, dtype=np.uint64), key)


def _validity(arr: pa.Array) -> object:
    """The validity bitmap the fused folds read: None where no slot is null."""
    return arr.buffers()[0] if arr.null_count else None


def fold_number_values(
    total: np.ndarray, arr: pa.Array, key: int, tag: int, high_tag: int, null_hash: int
) -> None:
    """``total += fmix(h ^ key)`` in place, ``h`` each value's :func:`hash_number_values` hash (``null_hash``
    in a null slot): hashing, nulls and fold in one pass, with no array of value hashes between them."""
    _kernel().fold_numbers(
        total,
        _or_empty(arr.buffers()[1]),
        _validity(arr),
        arr.offset,
        len(arr),
        _number_code(arr.type),
        tag,
        high_tag,
        null_hash,
        key,
    )


def fold_instant_values(
    total: np.ndarray, arr: pa.Array, key: int, ns_per_unit: int, tag: int, null_hash: int
) -> None:
    """As :func:`fold_number_values`, with each value's :func:`hash_instant_values` hash."""
    per_second = 1_000_000_000 // ns_per_unit
    _kernel().fold_instants(
        total,
        _or_empty(arr.buffers()[1]),
        _validity(arr),
        arr.offset,
        len(arr),
        arr.type.bit_width // 8,
        per_second,
        ns_per_unit,
        tag,
        null_hash,
        key,
    )


def finish(values: np.ndarray, tag: int) -> np.ndarray:
    """``values = fmix(values ^ tag)``, in place; returns ``values``."""
    _kernel().finish(values, tag)
    return values


def digest_parts(row_hashes: np.ndarray, k1: int, k2: int, g1: int, g2: int) -> tuple[int, int, int, int]:
    """``(u1, u2, o1, o2)`` of a sequence of row hashes (docs/fingerprint.md section 4)."""
    import numpy as np

    parts: tuple[int, int, int, int] = _kernel().digest(
        np.ascontiguousarray(row_hashes, dtype=np.uint64), k1, k2, g1, g2
    )
    return parts


def _or_empty(buffer: pa.Buffer | None) -> object:
    return b"" if buffer is None else buffer
