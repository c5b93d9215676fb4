"""The pinned algorithms, side by side: each name is fixed forever (a change is a new name).

- :mod:`dsm.hashing.checksum`: checksums of a file's bytes by algorithm name (``xxh3-128:<hex>``).
- :mod:`dsm.hashing.rowdigest`: :class:`RowDigest`, the ``dsm-rows-v1`` state of a sequence of rows and
  how parts combine (plain integers, no NumPy).
- :mod:`dsm.hashing.fingerprint`: ``dsm-rows-v1`` over Arrow data (docs/fingerprint.md), the MurmurHash3
  finaliser as its value mixer.
- :mod:`dsm.hashing.fingerprint_kernel`: the compiled kernel that fingerprint hands whole arrays to
  (``_rowhash.c``, an optional build), and the choice between it and the pure-Python path.
- :mod:`dsm.hashing.permutation`: the two seeded permutations, ``dsm-feistel-v1`` (the rewrite's
  ``--shuffle``, MurmurHash3 finaliser rounds) and the read order's keyed permutation (SplitMix64).

Nothing here imports the layers above; only :mod:`~dsm.hashing.fingerprint` needs Arrow.
"""

__all__: list[str] = []
