"""The URLs of the web viewer, built in one place (templates and JSON links use the same functions).

Deep links name a version by number (``NAME@3``), never by alias: an alias moves, a link in a bug report
must keep opening the same row.

>>> row_url("web@3", 17)
'/d/web@3/row/17'
>>> media_url("web@3", 17, "image/front")
'/d/web@3/media?row=17&field=image%2Ffront'
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from dsm.contract import Contract
from dsm.viewers.web.refs import pinned

__all__ = [
    "cutover_url",
    "dataset_url",
    "diff_url",
    "episode_url",
    "episodes_url",
    "find_url",
    "media_url",
    "row_url",
    "rows_url",
    "verify_url",
    "version_links",
    "version_url",
]


def _query(**params: Any) -> str:
    kept = {k: v for k, v in params.items() if v is not None and v != ""}
    return "?" + urlencode(kept, doseq=True) if kept else ""


def dataset_url(name: str) -> str:
    return f"/d/{name}"


def version_url(ref: str) -> str:
    return f"/d/{ref}"


def rows_url(ref: str, offset: int = 0, length: int | None = None, columns: str | None = None) -> str:
    return f"/d/{ref}/rows" + _query(offset=offset, length=length, columns=columns)


def row_url(ref: str, position: int) -> str:
    return f"/d/{ref}/row/{position}"


def media_url(ref: str, position: int, field: str) -> str:
    return f"/d/{ref}/media" + _query(row=position, field=field)


def find_url(ref: str, key: dict[str, Any]) -> str:
    return f"/d/{ref}/find" + _query(key=[f"{k}={v}" for k, v in key.items()])


def episodes_url(ref: str, offset: int = 0, anomalies: bool = False) -> str:
    return f"/d/{ref}/episodes" + _query(offset=offset or None, anomalies=1 if anomalies else None)


def episode_url(ref: str, episode: Any) -> str:
    return f"/d/{ref}/episode" + _query(id=str(episode))


def diff_url(old: str, new: str, **params: Any) -> str:
    return f"/d/{old}/diff/{new}" + _query(**params)


def verify_url(ref: str, deep: bool = False) -> str:
    return f"/d/{ref}/verify" + _query(deep=1 if deep else None)


def cutover_url(cutover_id: str) -> str:
    return f"/cutovers/{quote(cutover_id, safe='')}"


def version_links(contract: Contract) -> dict[str, str | None]:
    """The pages of one version (pinned by number)."""
    ref = pinned(contract.name, int(contract.version or 0))
    parent = contract.lineage.parent if contract.lineage else None
    previous = f"{contract.name}@{int(contract.version or 0) - 1}" if (contract.version or 0) > 1 else None
    return {
        "self": version_url(ref),
        "dataset": dataset_url(contract.name),
        "rows": rows_url(ref),
        "episodes": episodes_url(ref),
        "verify": verify_url(ref),
        "verify_deep": verify_url(ref, deep=True),
        "diff_parent": diff_url(parent, ref) if parent and "/" not in parent else None,
        "diff_previous": diff_url(previous, ref) if previous else None,
    }
