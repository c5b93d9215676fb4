"""How each check of ``dsm storage check`` is run: the scratch prefix, its clean-up, and the checks every
store shares (the store-specific answers are each store's :class:`~dsm.storage.readiness.StoreProbe`)."""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import secrets
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from dsm.commands.storage_check.report import ScratchCleanup, Throughput
from dsm.engine import UnitFailure, run_units
from dsm.errors import ConflictError, DsmError
from dsm.storage import TEMP_MARKER, Location, compare_and_swap, redact
from dsm.storage.readiness import Finding, StoreProbe
from dsm.storage.stores import NonAtomicWriteWarning

__all__ = [
    "ON_OBJECT",
    "Run",
    "check_atomicity",
    "check_consistency",
    "check_delete",
    "check_permissions",
    "check_throughput",
]

ON_OBJECT = ("read", "list", "delete", "server-checksums", "encryption")
"""Checks that look at the scratch object the write check leaves (and so need it)."""
_OBJECT_BYTES = 64 << 10
_FRESH_KEYS = 4


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


class Run:
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


def check_permissions(run: Run, wanted: set[str]) -> bool:
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
        for name in ON_OBJECT:
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


def check_delete(run: Run) -> None:
    obj = run.rel("object")

    def delete() -> Finding:
        run.loc.remove(obj)
        run.loc.fs.invalidate_cache(run.loc.path(obj))
        if run.loc.exists(obj):
            return Finding(check="delete", status="fail", detail="the object is still there after the delete")
        return Finding(check="delete", status="pass", detail="deleted, and gone")

    run.guard("delete", delete)


def check_atomicity(run: Run, wanted: set[str]) -> None:
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


def check_consistency(run: Run, wanted: set[str]) -> None:
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


def check_throughput(
    run: Run, *, objects: int, object_size: int, workers: int, min_throughput: float | None
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
