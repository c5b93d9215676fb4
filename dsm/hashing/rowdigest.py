"""Row digests of ``dsm-rows-v1`` as plain integers: combining shards needs no NumPy.

``RowDigest`` holds the two unordered sums and the two polynomial hashes of a sequence of rows (see
docs/fingerprint.md); ``a + b`` is the digest of a's rows followed by b's.
``dsm.hashing.fingerprint.digest_batch`` computes one from Arrow data.

>>> a = RowDigest(rows=1, u1=1, u2=2, o1=3, o2=4)
>>> (a + RowDigest.empty()) == a
True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dsm.errors import InputError

__all__ = ["ALGORITHM", "G1", "G2", "P", "RowDigest"]

ALGORITHM = "dsm-rows-v1"
P = (1 << 61) - 1
"""Mersenne prime modulus of the ordered digest."""
G1 = 0x1A2B3C4D5E6F789 % P
G2 = 0x0FEDCBA987654321 % P
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, kw_only=True)
class RowDigest:
    """The fingerprint state of a sequence of rows; combine parts with ``+`` (concatenation).

    ``unordered`` and ``ordered`` give the hex digests stored in contracts.
    """

    rows: int
    u1: int
    u2: int
    o1: int
    o2: int

    @classmethod
    def empty(cls) -> RowDigest:
        return cls(rows=0, u1=0, u2=0, o1=0, o2=0)

    def __add__(self, other: RowDigest) -> RowDigest:
        """The digest of these rows followed by ``other``'s rows."""
        return RowDigest(
            rows=self.rows + other.rows,
            u1=(self.u1 + other.u1) & _MASK64,
            u2=(self.u2 + other.u2) & _MASK64,
            o1=(self.o1 * pow(G1, other.rows, P) + other.o1) % P,
            o2=(self.o2 * pow(G2, other.rows, P) + other.o2) % P,
        )

    @property
    def unordered(self) -> str:
        return f"{self.u1:016x}{self.u2:016x}"

    @property
    def ordered(self) -> str:
        return f"{self.o1:016x}{self.o2:016x}"

    @classmethod
    def from_hex(cls, *, rows: int, unordered: str, ordered: str) -> RowDigest:
        """Rebuild a digest from a contract's values, to combine shards into the dataset's digest."""
        try:
            return cls(
                rows=rows,
                u1=int(unordered[:16], 16),
                u2=int(unordered[16:32], 16),
                o1=int(ordered[:16], 16),
                o2=int(ordered[16:32], 16),
            )
        except ValueError:
            raise InputError(f"not a {ALGORITHM} digest: {unordered!r} / {ordered!r}") from None

    @classmethod
    def combine(cls, parts: Iterable[RowDigest]) -> RowDigest:
        total = cls.empty()
        for part in parts:
            total = total + part
        return total
