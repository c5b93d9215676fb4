"""``dsm serve``: a local, read-only web viewer of a registry, its rows (text, chat, images, audio, video, RL
episodes), its row diffs and its cutovers, on the inspect layer (:mod:`dsm.inspect`) and the commands.

A Starlette app (server-rendered Jinja templates, a little plain JavaScript, all shipped in the package: no
CDN, no network, no build step) served by uvicorn. It needs the ``web`` extra (``pip install 'dsm[web]'``):
:func:`require_web` says so, naming it, before anything else is imported. Every page has a ``.json`` twin
with the same data; routes and their JSON shapes: docs/serve.md.

>>> from dsm.viewers.web import serve
>>> serve(registry="/data/registry", port=8765)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from dsm.errors import InputError

if TYPE_CHECKING:
    from dsm.viewers.web.app import create_app
    from dsm.viewers.web.config import ServeConfig, serve_config
    from dsm.viewers.web.server import ServeInfo, serve

__all__ = [
    "EXTRA",
    "REQUIRES",
    "ServeConfig",
    "ServeInfo",
    "create_app",
    "require_web",
    "serve",
    "serve_config",
]

EXTRA = "web"
REQUIRES = ("starlette", "uvicorn", "jinja2")

_LAZY = {
    "create_app": "dsm.viewers.web.app",
    "ServeConfig": "dsm.viewers.web.config",
    "serve_config": "dsm.viewers.web.config",
    "ServeInfo": "dsm.viewers.web.server",
    "serve": "dsm.viewers.web.server",
}


def require_web() -> None:
    """Raise an :class:`InputError` (exit 2) naming the ``web`` extra when a package it brings is missing."""
    missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(
            f"dsm serve needs the {EXTRA} extra: pip install 'dsm[{EXTRA}]' (missing: {', '.join(missing)})"
        )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_web()
    return getattr(importlib.import_module(module), name)
