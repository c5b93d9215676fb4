"""Leases: one process at a time does a thing (runs a cutover, writes a rewrite's destination).

A lease file names the owner (host, pid, user), a random token, and when the lease expires. A process
takes the lease when the file is absent, released, or stale, with a compare-and-swap on the bytes it read
(two processes cannot both take it, on local disk and on every object store with conditional writes); it
renews the lease from a heartbeat thread every third of its duration while it works, and releases it at
the end. The stale-claim rule: a lease is stale once it expired (its holder died: ``kill -9``, a lost
machine) and, with ``take_dead``, as soon as its holder is a process of this host that no longer runs;
``force`` takes a live one (the caller prints whose).

Expiry compares wall clocks of different machines: keep them in sync, and keep the duration well above
the skew between them.

>>> from dsm.storage import location
>>> lease = Lease(location("memory://doc-lease"), "lease.json", what="the doc", seconds=60)
>>> lease.acquire() is None
True
>>> lease.release()
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

from dsm.errors import ConflictError, ContractError, InputError, StorageError
from dsm.storage.location import Location, compare_and_swap
from dsm.storage.secrets import redact
from dsm.units import format_time

__all__ = ["DEFAULT_LEASE_SECONDS", "Lease", "LeaseInfo", "Owner", "current_owner"]

DEFAULT_LEASE_SECONDS = 60.0
"""How long a lease lasts without renewal; the heartbeat renews it every third of that."""


@dataclass(frozen=True, kw_only=True)
class Owner:
    """Who acts: host, process id and user (written into leases and journal records)."""

    host: str
    pid: int
    user: str

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid, "user": self.user}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Owner:
        return cls(
            host=str(data.get("host", "?")), pid=int(data.get("pid", 0)), user=str(data.get("user", "?"))
        )

    def describe(self) -> str:
        return f"{self.user}@{self.host} pid {self.pid}"

    def dead_here(self) -> bool:
        """Whether this owner is a process of this host that no longer runs."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False  # it exists (another user's process, say)
        return False


def current_owner() -> Owner:
    """This process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in a bare container
        user = str(os.getuid()) if hasattr(os, "getuid") else "?"
    return Owner(host=socket.gethostname(), pid=os.getpid(), user=user)


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
    """The lease in file ``rel`` of ``loc`` on ``what`` (named in messages), held by this process once
    :meth:`acquire` returned."""

    kind: ClassVar[str] = "dsm"
    """What messages call such a lease (``a cutover lease``)."""

    def __init__(
        self,
        loc: Location,
        rel: str,
        *,
        what: str,
        seconds: float = DEFAULT_LEASE_SECONDS,
        owner: Owner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise InputError(f"lease_seconds must be more than 0, got {seconds!r}")
        self.loc = loc
        self.rel = rel
        self.what = what
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
        if not self.loc.exists(self.rel):
            return None, None
        raw = self.loc.read_bytes(self.rel)
        try:
            return LeaseInfo.from_dict(json.loads(raw)), raw
        except (ValueError, KeyError, TypeError):
            raise ContractError(
                f"{redact(self.loc.url_of(self.rel))} is not a {self.kind} lease; remove it if no "
                f"process works on {self.what}"
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

    def busy(self, holder: LeaseInfo) -> str:
        """The message of :meth:`acquire` when ``holder`` holds the lease (subclasses say what to do)."""
        return (
            f"{self.what} is locked by {holder.describe()}: another process holds it. Wait for it to "
            "finish; if that process is dead, retry after the lease expires"
        )

    def acquire(self, *, force: bool = False, take_dead: bool = False) -> LeaseInfo | None:
        """Take the lease. Returns the lease it took over (stale, or live with ``force``), or None.

        With ``take_dead``, a lease whose holder is a process of this host that no longer runs is stale
        at once (else only once it expired). Raises :class:`~dsm.errors.ConflictError` (exit 3) with
        :meth:`busy`'s message when another process holds it, and when another process took it at the
        same moment.
        """
        current, raw = self.read()
        now = self._clock()
        live = current is not None and current.held(now) and current.token != self._token
        if live and take_dead and current is not None and current.owner.dead_here():
            live = False
        if live and current is not None and not force:
            raise ConflictError(self.busy(current))
        self._acquired = format_time(datetime.fromtimestamp(now, UTC))
        self._expires = now + self.seconds
        new = self._payload(self._expires)
        try:
            compare_and_swap(self.loc, self.rel, raw, new)
        except ConflictError:
            winner, _ = self.read()  # who took it first is named as when it is found held
            if winner is not None and winner.token != self._token and winner.held(self._clock()):
                raise ConflictError(self.busy(winner)) from None
            raise ConflictError(
                f"{self.what} was locked by another process at the same moment; retry"
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
                raise ConflictError(self._lost or f"the lease of {self.what} is not held")
            expires = self._clock() + self.seconds
            new = self._payload(expires)
            try:
                compare_and_swap(self.loc, self.rel, self._raw, new)
            except ConflictError:
                holder, _ = self._safe_read()
                who = holder.owner.describe() if holder is not None else "another process"
                self._lost = (
                    f"the lease of {self.what} was taken over by {who} while this run held it; this run stops"
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
            raise ConflictError(f"the lease of {self.what} is not held")
        if self._clock() >= self._expires:
            self.renew()  # the heartbeat fell behind: renew now, or learn that the lease is gone

    def confirm(self) -> None:
        """:meth:`check`, then read the lease back from storage: before an action that must not run twice."""
        self.check()
        with self._lock:  # the heartbeat may be between writing the file and remembering what it wrote
            current, raw = self.read()
            if current is None or raw != self._raw:
                who = current.owner.describe() if current is not None else "nobody (the lease file is gone)"
                self._lost = f"the lease of {self.what} is now held by {who}; this run stops"
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
                compare_and_swap(self.loc, self.rel, self._raw, self._payload(self._clock(), released=True))
            self._raw = None

    def remove(self) -> None:
        """Delete the lease file while holding it (what holds no other process's work: the thing is
        done), and on local disk the lock file its compare-and-swap used; then the lease is not held."""
        self.stop_heartbeat()
        with self._lock:
            if self._raw is None or self._lost is not None:
                self._raw = None
                return
            _, raw = self._safe_read()
            if raw == self._raw:
                self.loc.remove(self.rel)
                if self.loc.is_local:
                    with contextlib.suppress(OSError):
                        os.unlink(self.loc.path(self.rel) + ".lock")
            self._raw = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # --- heartbeat --------------------------------------------------------------------------------------

    def start_heartbeat(self) -> None:
        """Renew the lease every third of its duration from a daemon thread until :meth:`stop_heartbeat`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"dsm-lease-{self.rel}", daemon=True)
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
