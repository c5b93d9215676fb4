"""The two pinned seeded permutations of ``[0, n)``, side by side.

**The read order's** :func:`keyed_permutation` (``dsm.open``'s shuffle, docs/reading.md): indices sorted
by the SplitMix64 finaliser of ``key + i``, where ``key`` chains the SplitMix64 mix of integers. The
compiled kernel computes it where it is built (``DSM_FINGERPRINT_KERNEL`` chooses, as for the row
fingerprint); NumPy's argsort gives the same order otherwise.

**The rewrite's** :class:`Permutation`, ``dsm-feistel-v1``, computed per element without materialising
it: a balanced Feistel network of 6 rounds on ``2k``-bit integers (the smallest even bit width that holds
``n - 1``), whose round function is the MurmurHash3 64-bit finaliser of the right half
XOR a round key; round keys are ``xxh3_64("dsm-feistel-v1:<seed>:<round>")``. A Feistel network is a
bijection on ``[0, 2**2k)``; *cycle walking* (apply it again while the result is ``>= n``) restricts it to
a bijection on ``[0, n)``. Everything is vectorised with NumPy; the same ``n`` and seed give the same
permutation forever (a change would be a new algorithm name).

>>> p = Permutation(10, seed=7)
>>> sorted(p(range(10)).tolist()) == list(range(10))
True
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xxhash

from dsm.hashing import fingerprint_kernel

__all__ = ["SHUFFLE_ALGORITHM", "Permutation", "keyed_permutation"]

SHUFFLE_ALGORITHM = "dsm-feistel-v1"
_ROUNDS = 6
_U64 = np.uint64


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _U64(33))
    x = x * _U64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> _U64(33))
    x = x * _U64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> _U64(33))


class Permutation:
    """The permutation of ``[0, n)`` for ``seed``; call it on an array of indices to get their positions."""

    def __init__(self, n: int, seed: int) -> None:
        if n < 0:
            raise ValueError("n must be >= 0")
        self.n = n
        bits = max(2, (max(n, 1) - 1).bit_length())
        bits += bits % 2
        self._half = _U64(bits // 2)
        self._mask = _U64((1 << (bits // 2)) - 1)
        self._keys = [
            _U64(xxhash.xxh3_64_intdigest(f"{SHUFFLE_ALGORITHM}:{seed}:{r}".encode())) for r in range(_ROUNDS)
        ]

    def _network(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._mask
        with np.errstate(over="ignore"):
            for key in self._keys:
                left, right = right, left ^ (_mix(right ^ key) & self._mask)
        return (left << self._half) | right

    def __call__(self, indices: Iterable[int] | np.ndarray) -> np.ndarray:
        x = np.asarray(indices if isinstance(indices, np.ndarray) else list(indices), dtype=_U64)
        if x.size and int(x.max()) >= self.n:
            raise ValueError(f"index out of range for a permutation of {self.n}")
        x = self._network(x)
        outside = np.flatnonzero(x >= _U64(self.n))
        while outside.size:
            x[outside] = self._network(x[outside])
            outside = outside[x[outside] >= _U64(self.n)]
        return x


# --- the read order's keyed permutation (SplitMix64) -----------------------------------------------

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def _splitmix(value: int) -> int:
    """SplitMix64's finaliser of ``value + gamma`` on Python ints (a bijection of 64-bit integers)."""
    z = (value + _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _splitmix_array(values: np.ndarray) -> np.ndarray:
    """``_splitmix`` over a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = values + np.uint64(_GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))  # type: ignore[no-any-return]


def _key(*parts: int) -> int:
    """One 64-bit key from integers (each taken modulo 2**64), by chained mixing."""
    key = 0
    for part in parts:
        key = _splitmix(key ^ (part & _MASK))
    return key


def keyed_permutation(n: int, *key: int) -> np.ndarray:
    """A permutation of ``range(n)`` fixed by ``key``: indices sorted by ``mix(key + i)``.

    >>> keyed_permutation(5, 7, 0).tolist() == keyed_permutation(5, 7, 0).tolist()
    True
    >>> sorted(keyed_permutation(5, 7, 0).tolist())
    [0, 1, 2, 3, 4]
    """
    if fingerprint_kernel.enabled():  # the same order, computed in O(n) (a test compares both)
        return fingerprint_kernel.keyed_order(n, _key(*key))
    base = np.uint64(_key(*key))
    with np.errstate(over="ignore"):
        sort_keys = _splitmix_array(np.arange(n, dtype=np.uint64) + base)
    # The keys are distinct (a bijection of distinct integers), so every sort gives this one order.
    return np.argsort(sort_keys).astype(np.int64)
