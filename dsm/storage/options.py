"""Filesystem options by URL: ``DSM_STORAGE_OPTIONS`` and ``storage_options``, keyed by protocol or URL
prefix, layered so that a registry and its data can sit on different stores (docs/storage.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import fsspec

from dsm.errors import InputError

__all__ = ["LOCAL_PROTOCOLS", "options_for", "protocol_of", "storage_options_from_env"]


def storage_options_from_env() -> dict[str, Any]:
    """``DSM_STORAGE_OPTIONS`` as given (a JSON object, possibly keyed by protocol or URL), or ``{}``."""
    raw = os.environ.get("DSM_STORAGE_OPTIONS", "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"DSM_STORAGE_OPTIONS is not valid JSON ({exc.msg}); give a JSON object") from None
    if not isinstance(value, dict):
        raise InputError("DSM_STORAGE_OPTIONS must be a JSON object of filesystem options")
    return value


LOCAL_PROTOCOLS = {"file", "local"}
# Protocol names that share options: options under "az" apply to abfs:// URLs too, and so on.
_FAMILIES = {
    "s3": ("s3", "s3a"),
    "s3a": ("s3", "s3a"),
    "az": ("az", "abfs", "abfss"),
    "abfs": ("az", "abfs", "abfss"),
    "abfss": ("az", "abfs", "abfss"),
    "gs": ("gs", "gcs"),
    "gcs": ("gs", "gcs"),
    "file": ("file", "local"),
    "local": ("file", "local"),
}


def _protocol_names() -> set[str]:
    return {*fsspec.available_protocols(), *_FAMILIES}


def protocol_of(url: str) -> str:
    """The protocol of a URL (``s3`` of ``s3://b/k``); ``file`` for a plain path."""
    head, sep, _ = str(url).partition("://")
    return head.lower() if sep and "/" not in head else "file"


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` overlaid with ``extra``; nested mappings (``config_kwargs``) are merged, not replaced."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def options_for(url: str, *layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """The filesystem options for ``url`` from ``layers`` of keyed options (later layers win).

    In each layer, a key that is a protocol name (``s3``, ``az``, ``gs``, ``memory``, ``file``, ...) with
    an object value holds that protocol's options (``az`` also serves ``abfs``/``abfss``, ``s3`` also
    ``s3a``); a key that is a URL prefix (``"s3://bucket"``) with an object value holds options for URLs
    under it, the longest prefix winning; every other key applies to every URL that is not a local path.

    >>> options_for("s3://b/x", {"anon": True, "s3": {"endpoint_url": "http://s3.test"}, "az": {"anon": 0}})
    {'anon': True, 'endpoint_url': 'http://s3.test'}
    """
    protocol = protocol_of(url)
    names = _protocol_names()
    family = _FAMILIES.get(protocol, (protocol,))
    out: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        flat = {
            k: v for k, v in layer.items() if not (isinstance(v, Mapping) and (k in names or "://" in str(k)))
        }
        if protocol not in LOCAL_PROTOCOLS:
            out = _merge(out, flat)
        for name in family:
            if isinstance(layer.get(name), Mapping):
                out = _merge(out, layer[name])
        prefixes = sorted(
            (str(k) for k, v in layer.items() if "://" in str(k) and isinstance(v, Mapping)), key=len
        )
        for prefix in prefixes:
            if url == prefix or url.startswith(prefix.rstrip("/") + "/"):
                out = _merge(out, layer[prefix])
    return out
