"""What ``dsm serve`` is started with, checked before anything listens.

The rules of the issue: bind to 127.0.0.1 by default; any other ``host`` requires a token (``--token`` or
``DSM_SERVE_TOKEN``); every ``--unmask FIELD`` must be a classified field of some dataset of the registry (the
unmasking itself is audited when a dataset's rows are first shown).

>>> check_host("127.0.0.1", None), check_host("::1", None)
('127.0.0.1', '::1')
>>> check_host("0.0.0.0", None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dsm.errors.InputError: --host 0.0.0.0 accepts connections from other machines: ...
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsm.errors import InputError

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MIN_TOKEN_CHARS",
    "TOKEN_ENV",
    "ServeConfig",
    "check_host",
    "is_loopback",
    "serve_config",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "DSM_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
"""A token shorter than this is refused: it guards every row of every dataset the registry lists."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is only reachable from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, token: str | None) -> str:
    """``host``, once it is known that a non-loopback one comes with a token."""
    if not host:
        raise InputError("--host is empty: give an address to listen on (default 127.0.0.1)")
    if not is_loopback(host) and not token:
        raise InputError(
            f"--host {host} accepts connections from other machines: give a token with --token or "
            f"{TOKEN_ENV} (every request must then carry it), or listen on 127.0.0.1"
        )
    return host


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """How one ``dsm serve`` runs. ``token`` is never shown (not in ``repr``, logs or pages)."""

    registry: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = field(default=None, repr=False)
    unmask: tuple[str, ...] = ()
    reason: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    bench_reports: str | None = None
    """A folder (any fsspec URL) of HTML reports written by ``dsm bench --output``, listed under /bench."""
    allowed_hosts: tuple[str, ...] | None = None
    """``Host`` header values accepted; None: the loopback names when listening on loopback, else any (a
    non-loopback server checks the token instead). Refusing other names stops DNS-rebinding pages."""
    threads: int = 8
    """Requests handled at once (each decodes at most a few pieces): bounds the server's memory."""
    debug: bool = False

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def host_names(self, port: int) -> tuple[str, ...] | None:
        """The ``Host`` values a request may carry on ``port`` (None: any)."""
        if self.allowed_hosts is not None:
            return self.allowed_hosts
        if not self.loopback:
            return None
        names = ("127.0.0.1", "localhost", "[::1]")
        return names + tuple(f"{name}:{port}" for name in names)


def serve_config(
    *,
    registry: str | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    unmask: Sequence[str] = (),
    reason: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    bench_reports: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    threads: int = 8,
    debug: bool = False,
) -> ServeConfig:
    """A checked :class:`ServeConfig`; ``token`` defaults to ``DSM_SERVE_TOKEN``."""
    token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InputError(
            f"the token has {len(token)} characters; use at least {MIN_TOKEN_CHARS} "
            "(for example: python -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )
    if not 0 <= port <= 65535:
        raise InputError(f"--port {port} is not a TCP port (0 to 65535; 0 picks a free one)")
    if threads < 1:
        raise InputError(f"threads must be at least 1, got {threads}")
    return ServeConfig(
        registry=registry,
        host=check_host(host, token),
        port=port,
        token=token,
        unmask=tuple(dict.fromkeys(unmask)),
        reason=reason,
        storage_options=dict(storage_options or {}),
        cache_dir=cache_dir,
        bench_reports=bench_reports,
        allowed_hosts=tuple(allowed_hosts) if allowed_hosts is not None else None,
        threads=threads,
        debug=debug,
    )
