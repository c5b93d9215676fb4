"""The results of ``dsm storage check``: one answer per check, the throughput figures, the clean-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReadinessCheck", "ReadinessReport", "ScratchCleanup", "Throughput"]


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
