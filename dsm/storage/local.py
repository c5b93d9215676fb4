"""Local disk as ``dsm storage check`` sees it: what the operating system tells about a folder.

The registry and data writes on local disk are :class:`~dsm.storage.location.Location`'s own (``link()`` to
create, a lock file and ``rename()`` to swap); this module answers the readiness questions: whether the
folder is on a dm-crypt device (``/sys/dev/block``), and whether other users of the machine can reach it.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any

from dsm.storage.readiness import Finding, StoreProbe

if TYPE_CHECKING:
    from dsm.storage.location import Location

__all__ = ["LocalProbe"]


class LocalProbe(StoreProbe):
    """Local disk (and what the operating system tells about it)."""

    name = "local"

    def atomic_detail(self) -> str:
        return "link() to create, a lock file and rename() to swap"

    def checksums(self, loc: Location, rel: str) -> Finding:
        return Finding(
            check="server-checksums",
            status="warn",
            detail="local disk keeps no checksum of a file; verify --fast reads every shard here",
        )

    def delete_protection(self, loc: Location, rel: str | None) -> Finding:
        return Finding(
            check="delete-protection",
            status="unknown",
            detail="local disk: file-system snapshots or backups, if any, are not visible to dsm",
        )

    def encryption(self, loc: Location, rel: str | None) -> Finding:
        device = _block_device(loc.root)
        chain = _dm_crypt_chain(device) if device else []
        if chain:
            return Finding(
                check="encryption",
                status="pass",
                detail=f"on a dm-crypt device ({' on '.join(chain)})",
                evidence={"device": device, "dm": chain},
            )
        return Finding(
            check="encryption",
            status="unknown",
            detail="not on a dm-crypt device dsm can see; file-system or hardware encryption is not visible",
            evidence={"device": device},
        )

    def public_access(self, loc: Location) -> Finding:
        path = _existing_parent(loc.root)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        evidence: dict[str, Any] = {"path": path, "mode": f"{mode:o}"}
        closed = _closed_ancestor(path)
        if closed is not None:  # other users cannot even reach the folder
            evidence["closed_by"] = {"path": closed[0], "mode": f"{closed[1]:o}"}
            return Finding(
                check="public-access",
                status="pass",
                detail=f"other users of this machine cannot reach it ({closed[0]} is mode {closed[1]:o})",
                evidence=evidence,
            )
        if mode & stat.S_IWOTH:
            return Finding(
                check="public-access",
                status="fail",
                detail=f"{path} is writable by every user of this machine (mode {mode:o})",
                evidence=evidence,
            )
        if mode & stat.S_IROTH:
            return Finding(
                check="public-access",
                status="warn",
                detail=f"{path} can be listed by every user of this machine (mode {mode:o})",
                evidence=evidence,
            )
        return Finding(
            check="public-access",
            status="pass",
            detail=f"{path} cannot be listed by other users (mode {mode:o})",
            evidence=evidence,
        )


def _closed_ancestor(path: str) -> tuple[str, int] | None:
    """The nearest folder at or above ``path`` that other users may not enter (no ``o+x``), if any."""
    while True:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if not mode & stat.S_IXOTH:
            return path, mode
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _existing_parent(path: str) -> str:
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _block_device(path: str) -> str | None:
    """``MAJOR:MINOR`` of the block device holding ``path`` (None for tmpfs, overlay and the like)."""
    dev = os.stat(_existing_parent(path)).st_dev
    name = f"{os.major(dev)}:{os.minor(dev)}"
    return name if os.path.exists(f"/sys/dev/block/{name}") else None


def _dm_crypt_chain(device: str, depth: int = 0) -> list[str]:
    """The device-mapper layers from ``device`` down to a dm-crypt one (LVM on LUKS...), else []."""
    base = f"/sys/dev/block/{device}"
    try:
        with open(f"{base}/dm/uuid") as handle:
            uuid = handle.read().strip()
        with open(f"{base}/dm/name") as handle:
            name = handle.read().strip()
    except OSError:
        return []
    if uuid.startswith("CRYPT-"):
        return [f"{name} ({uuid.split('-')[1]})"]
    if depth > 4:
        return []
    for slave in sorted(os.listdir(f"{base}/slaves")) if os.path.isdir(f"{base}/slaves") else []:
        try:
            with open(f"{base}/slaves/{slave}/dev") as handle:
                below = _dm_crypt_chain(handle.read().strip(), depth + 1)
        except OSError:
            continue
        if below:
            return [name, *below]
    return []
