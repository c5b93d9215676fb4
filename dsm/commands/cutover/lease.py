"""The lease of a cutover: one process at a time runs its stages (:class:`dsm.storage.lease.Lease`).

``NAME/cutovers/ID/lease.json`` is renewed by a heartbeat while a stage runs and released at the end. A
lease whose holder died (``kill -9``, a lost machine) expires on its own; ``--force`` takes a live one (the
caller prints whose).

>>> from dsm.storage import location
>>> lease = Lease(location("memory://doc-lease"), cutover_id="c1", seconds=60)
>>> lease.acquire() is None
True
>>> lease.release()
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dsm.storage import Location
from dsm.storage.lease import DEFAULT_LEASE_SECONDS, LeaseInfo, Owner
from dsm.storage.lease import Lease as StorageLease

__all__ = ["DEFAULT_LEASE_SECONDS", "LEASE_FILE", "Lease", "LeaseInfo"]

LEASE_FILE = "lease.json"


class Lease(StorageLease):
    """The lease of one cutover, held by this process once :meth:`acquire` returned."""

    kind = "cutover"

    def __init__(
        self,
        loc: Location,
        *,
        cutover_id: str,
        seconds: float = DEFAULT_LEASE_SECONDS,
        owner: Owner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            loc, LEASE_FILE, what=f"cutover {cutover_id}", seconds=seconds, owner=owner, clock=clock
        )
        self.cutover_id = cutover_id

    def busy(self, holder: LeaseInfo) -> str:
        return (
            f"cutover {self.cutover_id} is locked by {holder.describe()}: another run holds it. "
            "Wait for it to finish; if that process is dead, retry after the lease expires or pass "
            "--force to break it"
        )
