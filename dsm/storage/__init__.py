"""Storage: every path dsm touches goes through fsspec, addressed by URL; one module per concern.

- :mod:`dsm.storage.location`: :class:`Location` (list, open, atomic writes, create-exclusive) and
  :func:`location`, :func:`compare_and_swap`, :func:`storage_errors`.
- :mod:`dsm.storage.options`: ``DSM_STORAGE_OPTIONS`` and options layered by protocol or URL prefix.
- :mod:`dsm.storage.secrets`: :func:`redact`, :func:`public_url`, :func:`remember_secret`.
- :mod:`dsm.storage.canonical`: :func:`canonical_location`, one value per stored file whatever spelling of its
  URL or path named it (what deciding that two versions share a file compares).
- :mod:`dsm.storage.readiness`: the store-specific answers of ``dsm storage check`` (each store's probe is in
  its own module; local disk's in :mod:`dsm.storage.local`).
- :mod:`dsm.storage.stores`: the :class:`ObjectStore` base and the registry of stores by protocol; one
  module per store: :mod:`dsm.storage.s3`, :mod:`dsm.storage.azure`, :mod:`dsm.storage.memory`.

>>> loc = location("memory://doc-storage")
>>> loc.protocol, loc.list_files()
('memory', [])
"""

from dsm.storage.canonical import (
    canonical_location,
    canonical_url,
    claimed_location,
    glob_of,
    is_within,
    overlaps,
)
from dsm.storage.location import (
    TEMP_MARKER,
    FileInfo,
    Location,
    compare_and_swap,
    is_temporary,
    location,
    storage_errors,
)
from dsm.storage.options import options_for, protocol_of, storage_options_from_env
from dsm.storage.secrets import public_url, redact, remember_secret

__all__ = [
    "TEMP_MARKER",
    "FileInfo",
    "Location",
    "canonical_location",
    "canonical_url",
    "claimed_location",
    "compare_and_swap",
    "glob_of",
    "is_temporary",
    "is_within",
    "location",
    "options_for",
    "overlaps",
    "protocol_of",
    "public_url",
    "redact",
    "remember_secret",
    "storage_errors",
    "storage_options_from_env",
]
