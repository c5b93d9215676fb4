"""The lease of a cutover: one process at a time runs its stages.

``NAME/cutovers/ID/lease.json`` names the owner (host, pid, user), a random token, and when the lease
expires. A process takes the lease when the file is absent, released, or expired, with a compare-and-swap
on the bytes it read (two processes cannot both take it); it renews the lease from a heartbeat thread
every third of its duration while a stage runs, and releases it at the end. A lease whose holder died
(``kill -9``, a lost machine) expires on its own; ``force`` takes a live one (the caller prints whose).

Expiry compares wall clocks of different machines: keep them in sync, and keep the duration well above
the skew between them.

>>> from dsm.storage import location
>>> lease = Lease(location("memory://doc-lease"), cutover_id="c1", seconds=60)
>>> lease.acquire() is None
True
>>> lease.release()
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dsm.commands.cutover.journal import Owner, current_owner
from dsm.commands.cutover.state import format_time
from dsm.errors import ConflictError, ContractError, InputError, StorageError
from dsm.storage import Location, compare_and_swap, redact

__all__ = ["DEFAULT_LEASE_SECONDS", "LEASE_FILE", "Lease", "LeaseInfo"]

LEASE_FILE = "lease.json"
DEFAULT_LEASE_SECONDS = 60.0
"""How long a lease lasts without renewal; the heartbeat renews it every third of that."""


@dataclass(frozen=True, kw_only=True)
class LeaseInfo:
    """The content of a lease file."""

    owner: Owner
    token: str
    acquired: str
    expires: float
    released: bool = False

    @property
    def expires_at(self) -> str:
        return format_time(datetime.fromtimestamp(self.expires, UTC))

    def held(self, now: float) -> bool:
        """Whether the lease keeps others out at ``now`` (epoch seconds)."""
        return not self.released and now < self.expires

    def describe(self) -> str:
        return f"{self.owner.describe()} until {self.expires_at}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner.to_dict(),
            "token": self.token,
            "acquired": self.acquired,
            "expires": self.expires,
            "expires_at": self.expires_at,
            "released": self.released,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LeaseInfo:
        return cls(
            owner=Owner.from_dict(data.get("owner") or {}),
            token=str(data["token"]),
            acquired=str(data.get("acquired", "")),
            expires=float(data["expires"]),
            released=bool(data.get("released", False)),
        )


class Lease:
    """The lease of one cutover, held by this process once :meth:`acquire` returned."""

    def __init__(
        self,
        loc: Location,
        *,
        cutover_id: str,
        seconds: float = DEFAULT_LEASE_SECONDS,
        owner: Owner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if seconds <= 0:
            raise InputError(f"lease_seconds must be more than 0, got {seconds}")
        self.loc = loc
        self.cutover_id = cutover_id
        self.seconds = float(seconds)
        self.owner = owner or current_owner()
        self._clock = clock
        self._token = uuid.uuid4().hex
        self._raw: bytes | None = None
        self._acquired = ""
        self._expires = 0.0
        self._lost: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- reading ----------------------------------------------------------------------------------------

    def read(self) -> tuple[LeaseInfo | None, bytes | None]:
        """The lease on storage (None when there is none) and its raw bytes."""
        if not self.loc.exists(LEASE_FILE):
            return None, None
        raw = self.loc.read_bytes(LEASE_FILE)
        try:
            return LeaseInfo.from_dict(json.loads(raw)), raw
        except (ValueError, KeyError, TypeError):
            raise ContractError(
                f"{redact(self.loc.url_of(LEASE_FILE))} is not a cutover lease; remove it if no process "
                "runs this cutover"
            ) from None

    @property
    def held(self) -> bool:
        return self._raw is not None and self._lost is None

    # --- taking, renewing, releasing ------------------------------------------------------------------

    def _payload(self, expires: float, released: bool = False) -> bytes:
        info = LeaseInfo(
            owner=self.owner, token=self._token, acquired=self._acquired, expires=expires, released=released
        )
        return json.dumps(info.to_dict(), indent=1).encode("utf-8")

    def acquire(self, *, force: bool = False) -> LeaseInfo | None:
        """Take the lease. Returns the lease it took over (expired, or live with ``force``), or None.

        Raises :class:`~dsm.errors.ConflictError` (exit 3) naming the holder and the expiry when another
        process holds it, and when another process took it at the same moment.
        """
        current, raw = self.read()
        now = self._clock()
        if current is not None and current.held(now) and current.token != self._token and not force:
            raise ConflictError(
                f"cutover {self.cutover_id} is locked by {current.describe()}: another run holds it. "
                "Wait for it to finish; if that process is dead, retry after the lease expires or pass "
                "--force to break it"
            )
        self._acquired = format_time(datetime.fromtimestamp(now, UTC))
        self._expires = now + self.seconds
        new = self._payload(self._expires)
        try:
            compare_and_swap(self.loc, LEASE_FILE, raw, new)
        except ConflictError:
            raise ConflictError(
                f"cutover {self.cutover_id} was locked by another process at the same moment; retry"
            ) from None
        self._raw = new
        self._lost = None
        if current is not None and not current.released and current.token != self._token:
            return current
        return None

    def renew(self) -> None:
        """Push the expiry forward; raises ConflictError (and marks the lease lost) if it was taken."""
        with self._lock:
            if self._raw is None or self._lost is not None:
                raise ConflictError(self._lost or f"the lease of cutover {self.cutover_id} is not held")
            expires = self._clock() + self.seconds
            new = self._payload(expires)
            try:
                compare_and_swap(self.loc, LEASE_FILE, self._raw, new)
            except ConflictError:
                holder, _ = self._safe_read()
                who = holder.owner.describe() if holder is not None else "another process"
                self._lost = (
                    f"the lease of cutover {self.cutover_id} was taken over by {who} while this run held it; "
                    "this run stops"
                )
                raise ConflictError(self._lost) from None
            self._raw = new
            self._expires = expires

    def _safe_read(self) -> tuple[LeaseInfo | None, bytes | None]:
        try:
            return self.read()
        except (ContractError, StorageError):
            return None, None

    def check(self) -> None:
        """Raise ConflictError when this process no longer holds the lease (taken over, or expired)."""
        if self._lost is not None:
            raise ConflictError(self._lost)
        if self._raw is None:
            raise ConflictError(f"the lease of cutover {self.cutover_id} is not held")
        if self._clock() >= self._expires:
            self.renew()  # the heartbeat fell behind: renew now, or learn that the lease is gone

    def confirm(self) -> None:
        """:meth:`check`, then read the lease back from storage: before an action that must not run twice."""
        self.check()
        with self._lock:  # the heartbeat may be between writing the file and remembering what it wrote
            current, raw = self.read()
            if current is None or raw != self._raw:
                who = current.owner.describe() if current is not None else "nobody (the lease file is gone)"
                self._lost = f"the lease of cutover {self.cutover_id} is now held by {who}; this run stops"
                raise ConflictError(self._lost)

    def release(self) -> None:
        """Give the lease up (a no-op when it is not held or was lost)."""
        self.stop_heartbeat()
        with self._lock:
            if self._raw is None or self._lost is not None:
                self._raw = None
                return
            # taken over or unreachable: then it expires on its own
            with contextlib.suppress(ConflictError, StorageError):
                compare_and_swap(self.loc, LEASE_FILE, self._raw, self._payload(self._clock(), released=True))
            self._raw = None

    # --- heartbeat --------------------------------------------------------------------------------------

    def start_heartbeat(self) -> None:
        """Renew the lease every third of its duration from a daemon thread until :meth:`stop_heartbeat`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"dsm-lease-{self.cutover_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        interval = max(0.05, self.seconds / 3)
        while not self._stop.wait(interval):
            try:
                self.renew()
            except ConflictError:
                return  # lost: check() tells the main thread
            except StorageError:
                continue  # unreachable for a moment: try again next beat, check() notices expiry

    def stop_heartbeat(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
