"""The parts a cutover is built from (the command itself is :mod:`dsm.commands.cutover`).

- :mod:`dsm.cutover.state`: the stages, and the state derived from a journal (a pure function).
- :mod:`dsm.cutover.journal`: append-only records in the registry, one file per record.
- :mod:`dsm.cutover.lease`: one process at a time runs a cutover; a heartbeat renews its lease.
- :mod:`dsm.cutover.prices`: the price table (shipped defaults, or ``--prices FILE``).
- :mod:`dsm.cutover.estimate`: time, bytes, requests, cost and peak storage from measured speeds.
- :mod:`dsm.cutover.sample`: the plan's speed sample and the shadow's row-by-row comparison (Arrow).
- :mod:`dsm.cutover.killpoints`: the crash points tests use (``DSM_TEST_KILL_AT``).
"""

from dsm.cutover.journal import JOURNAL_FORMAT, CutoverJournal, Owner, current_owner
from dsm.cutover.lease import DEFAULT_LEASE_SECONDS, Lease, LeaseInfo
from dsm.cutover.state import STAGES, CutoverState, StageState, derive_state, parse_duration

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "JOURNAL_FORMAT",
    "STAGES",
    "CutoverJournal",
    "CutoverState",
    "Lease",
    "LeaseInfo",
    "Owner",
    "StageState",
    "current_owner",
    "derive_state",
    "parse_duration",
]
