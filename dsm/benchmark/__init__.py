"""The read benchmark engine behind ``dsm bench``: runs readers, measures, compares, gates, reports.

- :mod:`dsm.benchmark.options`: every option checked and frozen before anything is read.
- :mod:`dsm.benchmark.runner`: one run: reader threads over the shards, every request timed.
- :mod:`dsm.benchmark.sweep`: runs over worker counts and repetitions, two datasets interleaved.
- :mod:`dsm.benchmark.results`: figures from the requests of a run (percentiles, knee, provenance).
- :mod:`dsm.benchmark.gates`: the comparison of two datasets and the gates that make it a verdict.
- :mod:`dsm.benchmark.html` and :mod:`dsm.benchmark.raw`: the HTML report and the raw request table.

The command is :func:`dsm.commands.bench.bench` (``dsm.bench``, which is why this package is not named
``dsm.bench``).
"""

__all__: list[str] = []
