"""The audit log of a registry: who saw the values of classified fields, when, of which dataset, and why.

Every unmasking (``dsm head REF --unmask email``, ``dsm.inspect.open_rows(..., unmask=["email"])``) writes
one record before any value is read: ``NAME/audit/<time>-<id>.json`` in the registry, created exclusively so
that a record is never overwritten (append-only on every store, object stores included). A record that cannot
be written stops the unmasking.

>>> from dsm.registry import Registry
>>> registry = Registry("memory://doc-audit")
>>> read_audit(registry, "web-text")
()
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsm.errors import ContractError
from dsm.registry import Registry
from dsm.storage import redact

__all__ = ["AuditRecord", "read_audit", "record_unmask"]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a bare container
        return str(os.getuid()) if hasattr(os, "getuid") else "?"


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """One unmasking: the dataset version, the fields and their classifications, who, where and when."""

    dataset: str
    version: int | None
    fields: tuple[str, ...]
    classifications: Mapping[str, str] = field(default_factory=dict)
    action: str = "unmask"
    command: str = ""
    reason: str | None = None
    user: str = ""
    host: str = ""
    at: str = ""
    tool: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "fields": list(self.fields),
            "classifications": dict(self.classifications),
            "action": self.action,
            "command": self.command,
            "reason": self.reason,
            "user": self.user,
            "host": self.host,
            "at": self.at,
            "tool": self.tool,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditRecord:
        return cls(
            dataset=str(data["dataset"]),
            version=data.get("version"),
            fields=tuple(data.get("fields") or ()),
            classifications=dict(data.get("classifications") or {}),
            action=str(data.get("action", "unmask")),
            command=str(data.get("command", "")),
            reason=data.get("reason"),
            user=str(data.get("user", "")),
            host=str(data.get("host", "")),
            at=str(data.get("at", "")),
            tool=str(data.get("tool", "")),
        )


def record_unmask(
    registry: Registry,
    *,
    dataset: str,
    version: int | None,
    fields: Sequence[str],
    classifications: Mapping[str, str],
    command: str,
    reason: str | None = None,
    tool: str = "",
) -> AuditRecord:
    """Append the record of an unmasking to ``NAME/audit/`` of ``registry`` and return it.

    Raises :class:`dsm.errors.StorageError` when it cannot be written: then nothing may be unmasked.
    """
    now = datetime.now(UTC)
    record = AuditRecord(
        dataset=dataset,
        version=version,
        fields=tuple(fields),
        classifications={f: classifications[f] for f in fields if f in classifications},
        command=command,
        reason=reason,
        user=_user(),
        host=socket.gethostname(),
        at=now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        tool=tool,
    )
    name = f"{dataset}/audit/{now.strftime('%Y%m%dT%H%M%S%fZ')}-{uuid.uuid4().hex[:12]}.json"
    body = json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n"
    registry.location.create_exclusive(name, redact(body).encode("utf-8"))
    return record


def read_audit(registry: Registry, name: str) -> tuple[AuditRecord, ...]:
    """Every audit record of dataset ``name``, oldest first."""
    folder = registry.location.child(f"{name}/audit")
    records = []
    for info in folder.list_files(recursive=False):
        if not info.path.endswith(".json"):
            continue
        raw = folder.read_bytes(info.path)
        try:
            records.append(AuditRecord.from_dict(json.loads(raw)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ContractError(
                f"{redact(folder.url_of(info.path))}: not an audit record (expected a JSON object with "
                "dataset, fields, user, at); it was changed by hand"
            ) from None
    return tuple(sorted(records, key=lambda r: r.at))
