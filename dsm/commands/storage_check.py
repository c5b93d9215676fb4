"""``dsm storage check URL``: is a location ready to hold datasets? Each check answers from the store.

Every check writes only under a scratch prefix of its own (``URL/.dsm-tmp-readiness-XXXX/``) and the
scratch objects are removed at the end, also when a check fails or the run is interrupted (and on a
versioned S3 bucket, their old versions and delete markers too). The checks:

=====================  ===============  =====================================================================
check                  group            what it does
=====================  ===============  =====================================================================
``write``              permissions      writes a scratch object with dsm's own writer
``read``               permissions      reads it back; the bytes must be equal
``list``               permissions      lists the scratch prefix; the object must be there with its size
``delete``             permissions      deletes it; it must be gone
``conditional-create`` atomicity        creates an object, then must be refused creating it again
``compare-and-swap``   atomicity        swaps on the content read; a write on a stale version is refused
``read-after-write``   consistency      fresh keys: absent, written, read; overwritten, read again
``list-after-write``   consistency      fresh keys listed right after they are written, and not after delete
``server-checksums``   checksums        which full-object checksums the store keeps for an object dsm wrote
``delete-protection``  durability       versioning or soft delete: can a deleted object be recovered
``encryption``         security         encryption at rest
``public-access``      security         public access blocked, nothing public
``throughput``         throughput       parallel PUT and GET of N objects: MB/s, p50/p99 latency, first byte
=====================  ===============  =====================================================================

A check is ``pass``, ``warn``, ``fail``, or ``unknown`` where the store's API does not tell. The report is
``ok`` when every *required* check passes: ``permissions`` and ``consistency``, and the checks ``require``
adds (check or group names; ``all``). The store-specific answers come from :mod:`dsm.readiness`.

>>> report = storage_check("s3://new-bucket/datasets/", require=["atomicity"])  # doctest: +SKIP
>>> report.ok, report.check("encryption").status  # doctest: +SKIP
(True, 'pass')
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import secrets
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsm.engine import UnitFailure, run_units
from dsm.errors import ConflictError, DsmError, InputError
from dsm.object_store import NonAtomicWriteWarning
from dsm.readiness import Finding, StoreProbe, probe_for
from dsm.storage import TEMP_MARKER, Location, compare_and_swap, location, redact
from dsm.units import parse_rate, parse_size

__all__ = [
    "CHECKS",
    "DEFAULT_REQUIRED",
    "GROUPS",
    "ReadinessCheck",
    "ReadinessReport",
    "ScratchCleanup",
    "Throughput",
    "resolve_checks",
    "storage_check",
]

CHECKS: dict[str, str] = {
    "write": "permissions",
    "read": "permissions",
    "list": "permissions",
    "delete": "permissions",
    "conditional-create": "atomicity",
    "compare-and-swap": "atomicity",
    "read-after-write": "consistency",
    "list-after-write": "consistency",
    "server-checksums": "checksums",
    "delete-protection": "durability",
    "encryption": "security",
    "public-access": "security",
    "throughput": "throughput",
}
"""Every check, by name, with its group (in the order they run)."""
GROUPS: dict[str, tuple[str, ...]] = {}
for _name, _group in CHECKS.items():
    GROUPS.setdefault(_group, ())
    GROUPS[_group] += (_name,)
DEFAULT_REQUIRED = ("permissions", "consistency")
# Checks that look at the scratch object the write check leaves (and so need it).
_ON_OBJECT = ("read", "list", "delete", "server-checksums", "encryption")
_OBJECT_BYTES = 64 << 10
_FRESH_KEYS = 4
_MAX_OBJECTS = 1000
_MAX_OBJECT_SIZE = 1 << 30
_MAX_PROBE_BYTES = 4 << 30
_MAX_WORKERS = 64


def resolve_checks(names: Iterable[str], *, what: str = "check") -> tuple[str, ...]:
    """Check names from check and group names (``permissions``, ``all``), in run order; InputError
    naming the valid names for anything else."""
    wanted: set[str] = set()
    for raw in names:
        for name in (n.strip() for n in str(raw).split(",")):
            if not name:
                continue
            if name == "all":
                wanted |= set(CHECKS)
            elif name in GROUPS:
                wanted |= set(GROUPS[name])
            elif name in CHECKS:
                wanted.add(name)
            else:
                raise InputError(
                    f"{what} {name!r} is not a readiness check; checks: {', '.join(CHECKS)}; groups: "
                    f"{', '.join(GROUPS)}, all"
                )
    return tuple(c for c in CHECKS if c in wanted)


@dataclass(frozen=True, kw_only=True)
class ReadinessCheck:
    """The answer to one check, and whether it was required."""

    name: str
    group: str
    status: str
    detail: str
    required: bool = False
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def satisfied(self) -> bool:
        """A required check must pass; any other answer is enough for one that is not required."""
        return self.status == "pass" or not self.required

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "status": self.status,
            "required": self.required,
            "detail": self.detail,
            "evidence": dict(self.evidence),
        }


@dataclass(frozen=True, kw_only=True)
class Throughput:
    """The throughput probe: ``objects`` of ``object_size`` bytes written then read by ``workers`` in
    parallel. Rates are bytes per second over each phase's wall time; latencies are per request
    (p99 of a few requests is their maximum); first byte is a 1-byte ranged read of each object."""

    objects: int
    object_size: int
    workers: int
    put_bytes_per_s: float
    get_bytes_per_s: float
    put_seconds: float
    get_seconds: float
    put_latency_s: Mapping[str, float]
    get_latency_s: Mapping[str, float]
    first_byte_s: Mapping[str, float]
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "object_size": self.object_size,
            "workers": self.workers,
            "put_bytes_per_s": self.put_bytes_per_s,
            "get_bytes_per_s": self.get_bytes_per_s,
            "put_seconds": self.put_seconds,
            "get_seconds": self.get_seconds,
            "put_latency_s": dict(self.put_latency_s),
            "get_latency_s": dict(self.get_latency_s),
            "first_byte_s": dict(self.first_byte_s),
            "errors": list(self.errors),
        }


@dataclass(frozen=True, kw_only=True)
class ScratchCleanup:
    """What the check wrote and whether it is gone: ``left`` lists anything that could not be removed."""

    prefix: str
    objects_written: int
    removed: int
    left: tuple[str, ...] = ()
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.left

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "objects_written": self.objects_written,
            "removed": self.removed,
            "left": list(self.left),
            "clean": self.clean,
            "notes": dict(self.notes),
        }


@dataclass(frozen=True, kw_only=True)
class ReadinessReport:
    """The readiness of one location: every check run, the throughput figures, and the clean-up."""

    url: str
    store: str
    protocol: str
    checks: tuple[ReadinessCheck, ...]
    scratch: ScratchCleanup
    throughput: Throughput | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every required check passed."""
        return all(c.satisfied for c in self.checks)

    @property
    def failed(self) -> list[ReadinessCheck]:
        """The required checks that did not pass."""
        return [c for c in self.checks if not c.satisfied]

    def check(self, name: str) -> ReadinessCheck:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "store": self.store,
            "protocol": self.protocol,
            "ok": self.ok,
            "failed": [c.name for c in self.failed],
            "checks": [c.to_dict() for c in self.checks],
            "throughput": self.throughput.to_dict() if self.throughput is not None else None,
            "scratch": self.scratch.to_dict(),
            "seconds": self.seconds,
        }


def _store_error(exc: BaseException | None) -> bool:
    """An error the store (or its client library) answered with, as opposed to a bug in dsm. Client
    libraries wrap the service's error in their own (adlfs raises RuntimeError from an azure error)."""
    while exc is not None:
        if isinstance(exc, (DsmError, OSError)):
            return True
        if type(exc).__module__.split(".")[0] in ("botocore", "aiobotocore", "azure", "s3fs", "adlfs"):
            return True
        exc = exc.__cause__
    return False


def _message(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return redact(text)


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p * len(ordered)) - 1)]

    return {"p50": rank(0.50), "p99": rank(0.99), "max": ordered[-1]}


class _Run:
    """One storage check: the location, its probe, the scratch prefix, and what was written there."""

    def __init__(self, loc: Location, probe: StoreProbe) -> None:
        self.loc = loc
        self.probe = probe
        self.prefix = f"{TEMP_MARKER}readiness-{secrets.token_hex(6)}"
        self.written: set[str] = set()
        self.findings: dict[str, Finding] = {}
        self.throughput: Throughput | None = None
        self.first_missing = _first_missing_dir(loc.root) if loc.is_local else None

    def rel(self, name: str) -> str:
        return f"{self.prefix}/{TEMP_MARKER}{name}"

    def put(self, rel: str, data: bytes) -> None:
        self.written.add(rel)
        self.loc.write_bytes_atomic(rel, data)

    def found(self, check: str, status: str, detail: str, **evidence: Any) -> None:
        self.findings[check] = Finding(check=check, status=status, detail=detail, evidence=evidence)

    def guard(self, check: str, action: Callable[[], Finding | None], *, failing: str = "fail") -> None:
        """Run one check; an error the store answered with becomes its finding (``failing``)."""
        try:
            result = action()
        except Exception as exc:
            if not _store_error(exc):
                raise
            self.found(check, failing, f"{type(exc).__name__}: {_message(exc)}")
            return
        if result is not None:
            self.findings[check] = result

    def listing(self) -> dict[str, int]:
        """Every object under the scratch prefix, asked from the store (no cache), by relative path."""
        root = self.loc.path(self.prefix)
        self.loc.fs.invalidate_cache(root)
        if not self.loc.fs.exists(root):
            return {}
        found = self.loc.fs.find(root, detail=True, withdirs=False)
        head = self.loc.root.rstrip("/") + "/"
        return {
            (k[len(head) :] if k.startswith(head) else k): int(v.get("size") or 0)
            for k, v in found.items()
            if v.get("type", "file") == "file"
        }

    def cleanup(self) -> ScratchCleanup:
        removed, left = 0, []
        notes: dict[str, Any] = {}
        try:
            leftovers = self.listing()
        except Exception as exc:
            if not _store_error(exc):
                raise
            leftovers = {rel: 0 for rel in self.written}
            notes["listing"] = _message(exc)
        for rel in sorted(set(leftovers) | {r for r in self.written if r not in leftovers}):
            try:
                if self.loc.fs.exists(self.loc.path(rel)):
                    self.loc.fs.rm(self.loc.path(rel))
                    removed += 1
            except Exception as exc:
                if not _store_error(exc):
                    raise
                left.append(f"{redact(self.loc.url_of(rel))}: {_message(exc)}")
        with contextlib.suppress(Exception):
            notes.update(self.probe.purge(self.loc, self.prefix))
        for item in notes.get("versions_left") or []:
            left.append(f"{item['key']} (an old version: {item['error']})")
        if not self.loc.is_local and self.loc.protocol != "memory":
            with contextlib.suppress(Exception):
                for rel in self.listing():
                    left.append(redact(self.loc.url_of(rel)))
        else:
            self._remove_folders()
            if self.loc.exists(self.prefix):
                left.append(redact(self.loc.url_of(self.prefix)))
        return ScratchCleanup(
            prefix=redact(self.loc.url_of(self.prefix)),
            objects_written=len(self.written),
            removed=removed,
            left=tuple(left),
            notes=notes,
        )

    def _remove_folders(self) -> None:
        """Local disk and memory: the scratch folder, and folders the check itself created."""
        with contextlib.suppress(Exception):
            if self.loc.fs.exists(self.loc.path(self.prefix)):
                self.loc.fs.rm(self.loc.path(self.prefix), recursive=True)
        if self.first_missing is None:
            return
        path = self.loc.root
        while True:  # only empty folders, only those that did not exist before the check
            with contextlib.suppress(OSError):
                os.rmdir(path)
            if path == self.first_missing or os.path.dirname(path) == path:
                break
            path = os.path.dirname(path)


def _first_missing_dir(path: str) -> str | None:
    if os.path.exists(path):
        return None
    while not os.path.exists(os.path.dirname(path)):
        path = os.path.dirname(path)
    return path


def _check_permissions(run: _Run, wanted: set[str]) -> bool:
    """write, read, list (and later delete) of one scratch object; True when the object was written."""
    obj = run.rel("object")
    payload = secrets.token_bytes(_OBJECT_BYTES)

    def write() -> Finding:
        run.put(obj, payload)
        how = (
            "direct upload" if run.loc.protocol in ("s3", "s3a", "az", "abfs", "abfss") else "temporary name"
        )
        return Finding(check="write", status="pass", detail=f"wrote a {_OBJECT_BYTES}-byte object ({how})")

    run.guard("write", write)
    if run.findings["write"].status != "pass":
        for name in _ON_OBJECT:
            if name in wanted:
                run.found(name, "unknown", "not tested: the write failed")
        return False

    def read() -> Finding:
        back = run.loc.read_bytes(obj)
        if back != payload:
            return Finding(
                check="read",
                status="fail",
                detail=f"read {len(back)} bytes that differ from the {len(payload)} written",
            )
        return Finding(check="read", status="pass", detail="read back the same bytes")

    def listed() -> Finding:
        found = run.listing()
        if obj not in found:
            return Finding(check="list", status="fail", detail="the object just written is not listed")
        if found[obj] != len(payload):
            return Finding(
                check="list", status="fail", detail=f"listed with size {found[obj]}, not {len(payload)}"
            )
        return Finding(check="list", status="pass", detail="listed with its size")

    if "read" in wanted:
        run.guard("read", read)
    if "list" in wanted:
        run.guard("list", listed)
    return True


def _check_delete(run: _Run) -> None:
    obj = run.rel("object")

    def delete() -> Finding:
        run.loc.remove(obj)
        run.loc.fs.invalidate_cache(run.loc.path(obj))
        if run.loc.exists(obj):
            return Finding(check="delete", status="fail", detail="the object is still there after the delete")
        return Finding(check="delete", status="pass", detail="deleted, and gone")

    run.guard("delete", delete)


def _check_atomicity(run: _Run, wanted: set[str]) -> None:
    def create() -> Finding:
        rel = run.rel("create")
        run.written.add(rel)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", NonAtomicWriteWarning)
            run.loc.create_exclusive(rel, b"first")
            try:
                run.loc.create_exclusive(rel, b"second")
            except ConflictError:
                refused = True
            else:
                refused = False
        kept = run.loc.read_bytes(rel)
        if not refused or kept != b"first":
            return Finding(
                check="conditional-create",
                status="fail",
                detail="creating an object that exists was not refused: the store "
                + ("overwrote it" if kept != b"first" else "accepted it")
                + " (If-None-Match ignored); versions would not be safe here",
                evidence={
                    "second_create": "refused" if refused else "accepted",
                    "kept_first": kept == b"first",
                },
            )
        atomic = run.loc.atomic_writes and not caught
        return Finding(
            check="conditional-create",
            status="pass" if atomic else "warn",
            detail=(
                f"a second create was refused ({run.probe.atomic_detail()})"
                if atomic
                else "a second create was refused by a check before the write: a racing writer could slip "
                "between them (not atomic here)"
            ),
            evidence={"second_create": "refused", "atomic": atomic},
        )

    def swap() -> Finding:
        rel = run.rel("swap")
        run.written.add(rel)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NonAtomicWriteWarning)
            compare_and_swap(run.loc, rel, None, b"one")
            compare_and_swap(run.loc, rel, b"one", b"two")
            if run.loc.read_bytes(rel) != b"two":
                return Finding(
                    check="compare-and-swap", status="fail", detail="a swap on the current content was lost"
                )
            return run.probe.stale_write(run.loc, rel)

    if "conditional-create" in wanted:
        run.guard("conditional-create", create)
    if "compare-and-swap" in wanted:
        run.guard("compare-and-swap", swap)


def _check_consistency(run: _Run, wanted: set[str]) -> None:
    keys = [run.rel(f"fresh-{secrets.token_hex(4)}") for _ in range(_FRESH_KEYS)]
    problems: list[str] = []
    listing_problems: list[str] = []

    def read_after_write() -> Finding:
        for rel in keys:
            if run.loc.exists(rel):  # the negative lookup first: some caches then serve the miss
                problems.append(f"{posixpath.basename(rel)} existed before it was written")
            first, second = secrets.token_bytes(64), secrets.token_bytes(96)
            run.put(rel, first)
            if run.loc.read_bytes(rel) != first:
                problems.append(
                    f"{posixpath.basename(rel)}: a read right after the write returned other bytes"
                )
            run.put(rel, second)
            if run.loc.read_bytes(rel) != second:
                problems.append(
                    f"{posixpath.basename(rel)}: a read right after an overwrite returned old bytes"
                )
        evidence = {"keys": len(keys), "rounds": ["absent", "write", "read", "overwrite", "read"]}
        if problems:
            return Finding(
                check="read-after-write", status="fail", detail="; ".join(problems), evidence=evidence
            )
        return Finding(
            check="read-after-write",
            status="pass",
            detail=f"{len(keys)} fresh keys read their new bytes right after each write and overwrite",
            evidence=evidence,
        )

    def list_after_write() -> Finding:
        listed = run.listing()
        missing = [posixpath.basename(k) for k in keys if k not in listed]
        if missing:
            listing_problems.append(f"not listed right after the write: {', '.join(missing)}")
        for rel in keys:
            run.loc.remove(rel)
        listed = run.listing()
        still = [posixpath.basename(k) for k in keys if k in listed]
        if still:
            listing_problems.append(f"still listed right after the delete: {', '.join(still)}")
        if listing_problems:
            return Finding(check="list-after-write", status="fail", detail="; ".join(listing_problems))
        return Finding(
            check="list-after-write",
            status="pass",
            detail=f"{len(keys)} fresh keys listed right after the write and gone right after the delete",
        )

    run.guard("read-after-write", read_after_write)
    if "list-after-write" in wanted:
        run.guard("list-after-write", list_after_write)


def _check_throughput(
    run: _Run, *, objects: int, object_size: int, workers: int, min_throughput: float | None
) -> None:
    workers = min(workers, objects)
    base = secrets.token_bytes(object_size)
    names = [run.rel(f"throughput-{i:04d}") for i in range(objects)]
    run.written.update(names)

    def body(i: int) -> bytes:
        tag = i.to_bytes(8, "big")
        return (tag + base[8:]) if object_size >= 8 else base  # every object different

    def put(i: int) -> float:
        start = time.perf_counter()
        run.loc.write_bytes_atomic(names[i], body(i))
        return time.perf_counter() - start

    def get(i: int) -> float:
        start = time.perf_counter()
        data = run.loc.read_bytes(names[i])
        elapsed = time.perf_counter() - start
        if data != body(i):
            raise DsmError(f"{posixpath.basename(names[i])}: read back {len(data)} bytes that differ")
        return elapsed

    def first_byte(i: int) -> float:
        start = time.perf_counter()
        run.loc.fs.cat_file(run.loc.path(names[i]), start=0, end=1)
        return time.perf_counter() - start

    def phase(fn: Callable[[int], float]) -> tuple[float, list[float], list[str]]:
        start = time.perf_counter()
        results = run_units(fn, list(range(objects)), workers=workers, on_error="collect")
        wall = time.perf_counter() - start
        errors = [
            f"{type(r.error).__name__}: {_message(r.error)}" for r in results if isinstance(r, UnitFailure)
        ]
        for r in results:
            if isinstance(r, UnitFailure) and not _store_error(r.error):
                raise r.error
        return wall, [r for r in results if isinstance(r, float)], errors

    put_wall, put_times, put_errors = phase(put)
    get_wall, get_times, get_errors = phase(get) if not put_errors else (0.0, [], [])
    _, ttfb_times, ttfb_errors = phase(first_byte) if not put_errors else (0.0, [], [])
    total = objects * object_size
    figures = Throughput(
        objects=objects,
        object_size=object_size,
        workers=workers,
        put_bytes_per_s=total / put_wall if put_wall > 0 and not put_errors else 0.0,
        get_bytes_per_s=total / get_wall if get_wall > 0 and not get_errors else 0.0,
        put_seconds=put_wall,
        get_seconds=get_wall,
        put_latency_s=_percentiles(put_times),
        get_latency_s=_percentiles(get_times),
        first_byte_s=_percentiles(ttfb_times),
        errors=tuple(put_errors + get_errors + ttfb_errors),
    )
    run.throughput = figures
    evidence = figures.to_dict()
    if figures.errors:
        run.found(
            "throughput",
            "fail",
            f"{len(figures.errors)} request(s) failed: {figures.errors[0]}",
            **evidence,
        )
        return
    text = (
        f"PUT {figures.put_bytes_per_s / 1e6:.1f} MB/s, GET {figures.get_bytes_per_s / 1e6:.1f} MB/s "
        f"({objects} x {object_size} bytes, {workers} workers); first byte p50 "
        f"{figures.first_byte_s['p50'] * 1000:.1f} ms"
    )
    if min_throughput is not None:
        slow = [
            f"{what} {rate / 1e6:.1f} MB/s"
            for what, rate in (("PUT", figures.put_bytes_per_s), ("GET", figures.get_bytes_per_s))
            if rate < min_throughput
        ]
        if slow:
            run.found(
                "throughput",
                "fail",
                f"{', '.join(slow)} below the minimum {min_throughput / 1e6:.1f} MB/s ({text})",
                **evidence,
            )
            return
    run.found("throughput", "pass", text, **evidence)


def _bounded(objects: int, object_size: int | str, workers: int) -> tuple[int, int, int]:
    """The throughput probe's sizes, checked before anything is allocated."""
    if isinstance(objects, bool) or not isinstance(objects, int) or not 1 <= objects <= _MAX_OBJECTS:
        raise InputError(f"objects: {objects!r} must be a whole number from 1 to {_MAX_OBJECTS}")
    size = parse_size(object_size, what="object_size")
    if size > _MAX_OBJECT_SIZE:
        raise InputError(f"object_size: {object_size!r} is more than the 1 GiB the probe allows")
    if objects * size > _MAX_PROBE_BYTES:
        raise InputError(
            f"the throughput probe would write {objects} x {size} bytes, more than 4 GiB; use fewer or "
            "smaller objects"
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= _MAX_WORKERS:
        raise InputError(f"workers: {workers!r} must be a whole number from 1 to {_MAX_WORKERS}")
    return objects, size, workers


def storage_check(
    url: str,
    *,
    require: Sequence[str] = (),
    skip: Sequence[str] = (),
    checks: Sequence[str] | None = None,
    objects: int = 8,
    object_size: int | str = "1MiB",
    workers: int = 4,
    min_throughput: float | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ReadinessReport:
    """Run the readiness checks on the folder or prefix ``url`` and return the report.

    ``checks`` selects which to run (check or group names; default every one). Required to pass are
    ``permissions`` and ``consistency`` (those that run), the checks ``require`` adds (always run), less
    those ``skip`` names. The
    throughput probe writes ``objects`` objects of ``object_size`` with ``workers`` in parallel and fails
    below ``min_throughput`` (bytes/s or ``"100MB/s"``). Everything written goes under a scratch prefix
    that is removed at the end, whatever happens.
    """
    wanted = set(resolve_checks(checks, what="check") if checks is not None else CHECKS)
    extra = set(resolve_checks(require, what="required check"))
    wanted |= extra
    required = (set(resolve_checks(DEFAULT_REQUIRED)) & wanted | extra) - set(
        resolve_checks(skip, what="skip")
    )
    if wanted & set(_ON_OBJECT):
        wanted |= {"write", "delete"}  # they look at the object the write leaves, which is then deleted
    objects, size, workers = _bounded(objects, object_size, workers)
    minimum = parse_rate(min_throughput, what="min_throughput") if min_throughput is not None else None
    loc = location(url, storage_options)
    if loc.exists() and not loc.isdir():
        raise InputError(
            f"{redact(url)} is a file: dsm storage check takes the folder or prefix data goes to"
        )
    started = time.perf_counter()
    run = _Run(loc, probe_for(loc))
    try:
        written = False
        if wanted & set(GROUPS["permissions"]):
            written = _check_permissions(run, wanted)
        obj = run.rel("object") if written else None
        if "server-checksums" in wanted and obj is not None:
            run.guard("server-checksums", lambda: run.probe.checksums(loc, obj), failing="unknown")
        if "delete-protection" in wanted:
            run.guard("delete-protection", lambda: run.probe.delete_protection(loc, obj), failing="unknown")
        if "encryption" in wanted and obj is not None:
            run.guard("encryption", lambda: run.probe.encryption(loc, obj), failing="unknown")
        if "public-access" in wanted:
            run.guard("public-access", lambda: run.probe.public_access(loc), failing="unknown")
        if written and "delete" in wanted:
            _check_delete(run)
        if wanted & set(GROUPS["atomicity"]):
            _check_atomicity(run, wanted)
        if wanted & set(GROUPS["consistency"]):
            _check_consistency(run, wanted)
        if "throughput" in wanted:
            run.guard(
                "throughput",
                lambda: _check_throughput(
                    run, objects=objects, object_size=size, workers=workers, min_throughput=minimum
                ),
            )
    finally:
        scratch = run.cleanup()
    results = tuple(
        ReadinessCheck(
            name=name,
            group=CHECKS[name],
            status=run.findings[name].status,
            detail=run.findings[name].detail,
            evidence=run.findings[name].evidence,
            required=name in required,
        )
        for name in CHECKS
        if name in wanted and name in run.findings
    )
    return ReadinessReport(
        url=redact(url),
        store=run.probe.name,
        protocol=loc.protocol,
        checks=results,
        scratch=scratch,
        throughput=run.throughput,
        seconds=time.perf_counter() - started,
    )


# --------------------------------------------------------------------------------------- for cutover plan

PLAN_PROBE_OBJECTS = 4
PLAN_PROBE_SIZE = 1 << 20
"""The throughput probe a cutover plan runs on its destination: small, the plan takes about a second."""


@dataclass(frozen=True, kw_only=True)
class PlanReadiness:
    """What a cutover plan learns about its destination: the readiness report (None when the data policy
    forbids the location: then nothing is written there, not even a scratch object), the checks required
    (``permissions`` and ``consistency``, and what the policy's rules need), those skipped, the policy's
    verdict, and the problems that stop the cutover at plan. ``forbidden`` is True when a policy rule is
    broken: the plan then writes no sample of the data there either."""

    report: ReadinessReport | None
    required: tuple[str, ...]
    skipped: tuple[str, ...]
    policy: Any  # dsm.commands.policy.PolicyCheck
    problems: tuple[str, ...]

    @property
    def forbidden(self) -> bool:
        return not self.policy.ok

    def to_dict(self) -> dict[str, Any]:
        return {
            **(self.report.to_dict() if self.report is not None else {"checks": []}),
            "required": list(self.required),
            "skipped": list(self.skipped),
            "problems": list(self.problems),
        }


def plan_readiness(
    url: str,
    *,
    schema: Any,
    skip: Sequence[str] = (),
    workers: int | None = None,
    registry: Any = None,
    storage_options: Mapping[str, Any] | None = None,
) -> PlanReadiness:
    """Run every readiness check on a cutover's destination ``url`` (a small throughput probe) and judge
    it: a required check that does not pass is a problem unless ``skip`` names it; the data policy's
    rules for ``schema``'s classifications are judged from the same answers (skipping does not lift a
    policy rule). A location the policy does not allow is not written to at all."""
    from dsm.commands._common import open_registry
    from dsm.commands.policy import PolicyCheck, check_destination
    from dsm.policy import classified_fields, read_policy

    reg = open_registry(registry, storage_options)
    skipped = resolve_checks(skip, what="--skip-readiness")
    policy = read_policy(reg.location)
    classified = classified_fields(schema)
    needs = policy.storage_requirements(classified) if policy is not None else {}
    required = tuple(
        c for c in resolve_checks([*DEFAULT_REQUIRED, *needs], what="required check") if c not in skipped
    )
    if policy is not None and classified:
        refused = policy.location_violations(classified, url, storage_options)
        if refused:
            verdict = PolicyCheck(
                url=redact(url), policy=policy.source, classified=classified, violations=tuple(refused)
            )
            return PlanReadiness(
                report=None,
                required=required,
                skipped=skipped,
                policy=verdict,
                problems=tuple(v.message for v in refused),
            )
    report = storage_check(
        url,
        require=list(needs),
        skip=skipped,
        objects=PLAN_PROBE_OBJECTS,
        object_size=PLAN_PROBE_SIZE,
        workers=max(1, min(4, workers or 4)),
        storage_options=storage_options,
    )
    problems = [
        f"readiness check {c.name} of {redact(url)}: {c.status}: {c.detail} "
        f"(--skip-readiness {c.name} to go on)"
        for c in report.checks
        if c.name in required and c.status != "pass"
    ]
    verdict = check_destination(schema, url, readiness=report, registry=reg, storage_options=storage_options)
    problems += [v.message for v in verdict.violations]
    return PlanReadiness(
        report=report, required=required, skipped=skipped, policy=verdict, problems=tuple(problems)
    )
