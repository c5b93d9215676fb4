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
adds (check or group names; ``all``). The store-specific answers come from :mod:`dsm.storage.readiness`.

>>> report = storage_check("s3://new-bucket/datasets/", require=["atomicity"])  # doctest: +SKIP
>>> report.ok, report.check("encryption").status  # doctest: +SKIP
(True, 'pass')
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsm.commands.storage_check.checks import (
    ON_OBJECT,
    Run,
    check_atomicity,
    check_consistency,
    check_delete,
    check_permissions,
    check_throughput,
)
from dsm.commands.storage_check.report import ReadinessCheck, ReadinessReport, ScratchCleanup, Throughput
from dsm.errors import InputError
from dsm.storage import location, redact
from dsm.storage.readiness import probe_for
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
    if wanted & set(ON_OBJECT):
        wanted |= {"write", "delete"}  # they look at the object the write leaves, which is then deleted
    objects, size, workers = _bounded(objects, object_size, workers)
    minimum = parse_rate(min_throughput, what="min_throughput") if min_throughput is not None else None
    loc = location(url, storage_options)
    if loc.exists() and not loc.isdir():
        raise InputError(
            f"{redact(url)} is a file: dsm storage check takes the folder or prefix data goes to"
        )
    started = time.perf_counter()
    run = Run(loc, probe_for(loc))
    try:
        written = False
        if wanted & set(GROUPS["permissions"]):
            written = check_permissions(run, wanted)
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
            check_delete(run)
        if wanted & set(GROUPS["atomicity"]):
            check_atomicity(run, wanted)
        if wanted & set(GROUPS["consistency"]):
            check_consistency(run, wanted)
        if "throughput" in wanted:
            run.guard(
                "throughput",
                lambda: check_throughput(
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
