"""The read platform: ``dsm.open(REF)`` and iterators with exact, cheap checkpoint and restart.

- :mod:`dsm.read.order`: the read order of an epoch and how it is cut among ranks and workers (pure).
- :mod:`dsm.read.state`: :class:`~dsm.read.state.ReadOrder`, :class:`~dsm.read.state.IteratorState`, the
  state format, and :func:`~dsm.read.state.merge_states`.
- :mod:`dsm.read.cache`: the shared local cache of remote shards.
- :mod:`dsm.read.dataset`: :func:`~dsm.read.dataset.open`, :class:`~dsm.read.dataset.Dataset` and its
  iterators.
- :mod:`dsm.read.torch`: a dataset as a PyTorch ``IterableDataset`` with one state for the loader (needs
  ``torch``; nothing else imports it).
"""

__all__: list[str] = []
